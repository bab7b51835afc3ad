#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

#include <vector>

#include "report/formats.h"
#include "report/report.h"

namespace conform {

namespace {

namespace fs = std::filesystem;

const char* extension(const std::string& format) {
    if (format == "json") return ".json";
    if (format == "junit") return ".xml";
    if (format == "md") return ".md";
    return ".html";
}

// "" when a file can be created in the existing directory d.
std::string probe(const fs::path& d) {
    // access() says yes to root on a read-only mount; creating a file is the
    // test. mkstemp: an unpredictable name, created exclusively, so a link
    // planted at a guessable probe name is never followed (and truncated).
    std::string tmpl = (d / ".conform-probe.XXXXXX").string();
    std::vector<char> name(tmpl.begin(), tmpl.end());
    name.push_back('\0');
    const int fd = ::mkstemp(name.data());
    if (fd < 0) return std::strerror(errno ? errno : EACCES);
    ::close(fd);
    ::unlink(name.data());
    return "";
}

void put(std::string& out, const nlohmann::json& j, int indent) {
    const auto scalar = [](const nlohmann::json& v) {
        return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    };
    const std::string pad(static_cast<size_t>(indent + 2), ' ');
    if (j.is_object()) {
        if (j.empty()) {
            out += "{}";
            return;
        }
        out += "{\n";
        bool first = true;
        for (auto it = j.begin(); it != j.end(); ++it) {
            out += (first ? "" : ",\n") + pad + scalar(it.key()) + ": ";
            put(out, it.value(), indent + 2);
            first = false;
        }
        out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "}";
    } else if (j.is_array()) {
        const bool flat = std::all_of(
            j.begin(), j.end(), [](const nlohmann::json& v) { return v.is_number() || v.is_null() || v.is_boolean(); });
        if (j.empty() || flat) {
            out += scalar(j);
            return;
        }
        out += "[\n";
        for (size_t i = 0; i < j.size(); ++i) {
            out += (i ? ",\n" : "") + pad;
            put(out, j[i], indent + 2);
        }
        out += "\n" + std::string(static_cast<size_t>(indent), ' ') + "]";
    } else {
        out += scalar(j);
    }
}

}  // namespace

std::string render_json(const nlohmann::json& report) {
    std::string out;
    put(out, report, 0);
    return out + "\n";
}

const std::vector<std::string>& report_formats() {
    static const std::vector<std::string> f = {"json", "junit", "md", "html"};
    return f;
}

std::optional<std::vector<std::string>> parse_report_formats(const std::string& list, std::string* error) {
    std::vector<std::string> out;
    std::string item;
    auto take = [&]() -> bool {
        if (item == "all") {
            for (const auto& f : report_formats())
                if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
        } else if (std::find(report_formats().begin(), report_formats().end(), item) != report_formats().end()) {
            if (std::find(out.begin(), out.end(), item) == out.end()) out.push_back(item);
        } else {
            if (error)
                *error = (item.empty() ? std::string("empty format name") : "unknown format '" + item + "'") +
                         " (formats: json, junit, md, html, or all)";
            return false;
        }
        item.clear();
        return true;
    };
    for (char ch : list) {
        if (ch != ',') {
            item += ch;
        } else if (!take()) {
            return std::nullopt;
        }
    }
    if (!take()) return std::nullopt;
    // Written in a fixed order, whatever order they were asked in.
    std::vector<std::string> ordered;
    for (const auto& f : report_formats())
        if (std::find(out.begin(), out.end(), f) != out.end()) ordered.push_back(f);
    return ordered;
}

std::string report_path(const std::string& out_dir, const std::string& format, const std::string& base) {
    return (fs::path(out_dir.empty() ? "." : out_dir) / (base + extension(format))).string();
}

std::string out_dir_problem(const std::string& out_dir) {
    if (out_dir.empty()) return "empty directory name";
    std::error_code ec;
    fs::path p(out_dir);
    if (fs::exists(p, ec)) {
        if (!fs::is_directory(p, ec)) return out_dir + ": exists and is not a directory";
        const std::string why = probe(p);
        return why.empty() ? "" : out_dir + ": not writable (" + why + ")";
    }
    // Not there yet: it will be created; the nearest existing directory above must allow that.
    fs::path up = fs::absolute(p, ec).parent_path();
    while (!up.empty() && !fs::exists(up, ec) && up != up.parent_path()) up = up.parent_path();
    if (!fs::is_directory(up, ec)) return out_dir + ": cannot be created: " + up.string() + " is not a directory";
    const std::string why = probe(up);
    return why.empty() ? "" : out_dir + ": cannot be created in " + up.string() + " (" + why + ")";
}

std::vector<std::pair<std::string, std::string>> render_reports(const nlohmann::json& report,
                                                                const std::vector<std::string>& formats,
                                                                const std::string& base) {
    std::vector<std::pair<std::string, std::string>> files;
    for (const auto& f : formats) {
        std::string body;
        if (f == "json")
            body = render_json(report);
        else if (f == "junit")
            body = render_junit(report);
        else if (f == "md")
            body = render_markdown(report);
        else if (f == "html")
            body = render_html(report);
        else
            throw std::runtime_error("unknown report format '" + f + "'");
        files.emplace_back(base + extension(f), std::move(body));
    }
    return files;
}

std::vector<std::string> write_reports(const nlohmann::json& report, const std::vector<std::string>& formats,
                                       const std::string& out_dir, const std::string& base) {
    // Everything rendered before anything is written: a renderer that throws
    // leaves the previous reports as they were.
    const auto files = render_reports(report, formats, base);
    std::vector<std::string> written;
    for (const auto& [name, body] : files) {
        const std::string path = (fs::path(out_dir) / name).string();
        write_file_atomic(path, body);
        written.push_back(path);
    }
    return written;
}

}  // namespace conform

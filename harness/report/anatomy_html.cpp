#include "report/anatomy_html.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"

namespace conform::report {

extern const char* const kAnatomyPageTemplate;  // report/anatomy_page.html, embedded by cmake/embed.cmake

namespace {

using nlohmann::json;

std::string shell_word(const std::string& s) {
    bool plain = !s.empty();
    for (char c : s)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./+=:,", c))) plain = false;
    if (plain) return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// The picker's first entry, when the configuration is not one of the
// The presets the page offers: those whose whole block is the model (not
// gpt-oss, whose experts conform does not compute: its FFN would be priced as
// a dense SwiGLU).
std::vector<const config::Preset*> page_presets() {
    std::vector<const config::Preset*> v;
    for (const auto& p : config::presets())
        if (config::unmodelled_for(p.model(), Op::block).empty()) v.push_back(&p);
    return v;
}

// presets with flags on top: a config.json (its base the file as read, so
// the page's command line names the flags changed from it) or flags alone.
json given_entry(const config::ModelConfig& m, int* choice) {
    const std::string preset_origin = "preset " + m.name;
    if (m.origin == preset_origin) {
        const auto ps = page_presets();
        for (size_t i = 0; i < ps.size(); ++i)
            if (ps[i]->name == m.name) {
                *choice = static_cast<int>(i);
                return nullptr;
            }
    }
    *choice = 0;
    if (m.origin.rfind("config ", 0) == 0) {
        json base = nullptr;
        try {
            base = config::config_json(config::load_hf_config(m.name));
        } catch (const std::exception&) {
            // Read a moment ago; gone now: the page lists every size as a flag.
        }
        return {{"label", m.origin}, {"base", base}, {"flag", "--config " + shell_word(m.name)}};
    }
    return {{"label", m.origin}, {"base", nullptr}, {"flag", ""}};
}

void replace(std::string& s, const std::string& what, const std::string& with) {
    const size_t at = s.find(what);
    if (at == std::string::npos || s.find(what, at + 1) != std::string::npos)
        throw std::logic_error("anatomy page template: expected one " + what);
    s.replace(at, what.size(), with);
}

std::string html_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        switch (c) {
            case '&': o += "&amp;"; break;
            case '<': o += "&lt;"; break;
            case '>': o += "&gt;"; break;
            case '"': o += "&quot;"; break;
            default: o += c;
        }
    }
    return o;
}

}  // namespace

Ridge assumed_ridge() {
    Ridge r;
    r.flops_per_byte = 989e12 / 3.35e12;
    r.label =
        "assumed, not measured: an H100 SXM-like GPU, 989 TFLOP/s dense bf16 over 3.35 TB/s of HBM3 = 295 FLOP/B "
        "(an H200's 4.8 TB/s gives 206); conform anatomy --with-ceilings measures this machine instead";
    return r;
}

Ridge measured_ridge(double copy_bytes_per_s, double matmul_flops_per_s, int threads, int64_t matmul_n) {
    Ridge r;
    r.measured = true;
    r.copy_bytes_per_s = copy_bytes_per_s;
    r.matmul_flops_per_s = matmul_flops_per_s;
    r.flops_per_byte = copy_bytes_per_s > 0 ? matmul_flops_per_s / copy_bytes_per_s : 0;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "measured on this machine: copy %.1f GB/s (256 MiB, read + write, %d threads), LibTorch f32 matmul "
                  "%.1f GFLOP/s (%lld^3) = %.1f FLOP/B",
                  copy_bytes_per_s / 1e9, threads, matmul_flops_per_s / 1e9, static_cast<long long>(matmul_n),
                  r.flops_per_byte);
    r.label = buf;
    return r;
}

std::string render_anatomy_html(const AnatomyPage& p) {
    json presets = json::array();
    for (const config::Preset* pr : page_presets())
        presets.push_back({{"name", pr->name}, {"source", pr->source}, {"config", config::config_json(pr->model())}});
    int choice = 0;
    const json given = given_entry(p.model, &choice);
    json ridge = {{"flops_per_byte", p.ridge.flops_per_byte}, {"label", p.ridge.label}, {"measured", p.ridge.measured}};
    if (p.ridge.measured) {
        ridge["copy_bytes_per_s"] = p.ridge.copy_bytes_per_s;
        ridge["matmul_flops_per_s"] = p.ridge.matmul_flops_per_s;
    }
    const json data = {{"schema", "conform-anatomy-page/1"},
                       {"formulas", config::to_json(config::formula_table())},
                       {"convention", config::anatomy_convention()},
                       {"presets", presets},
                       {"given", given},
                       {"initial",
                        {{"config", config::config_json(p.model)},
                         {"choice", choice},
                         {"tokens", p.tokens},
                         {"context", p.context},
                         {"dtype", p.dtype}}},
                       {"ridge", ridge}};
    // Inside <script type="application/json">: no "</script>" may appear;
    // '<' only occurs in strings, where \u003c reads back as '<'.
    std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
    std::string safe;
    safe.reserve(text.size());
    for (char c : text) safe += c == '<' ? std::string("\\u003c") : std::string(1, c);

    std::string page = kAnatomyPageTemplate;
    replace(page, "@TITLE@", html_escape("conform anatomy: " + p.model.name));
    replace(page, "@DATA@", safe);
    return page;
}

std::string html_target_problem(const std::string& path, bool force) {
    namespace fs = std::filesystem;
    if (path.empty()) return "empty file name";
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path, ec);
    if (fs::exists(st)) {
        if (fs::is_directory(st)) return path + ": is a directory (give a file name for the page)";
        if (fs::is_symlink(st)) return path + ": is a symbolic link; not replaced (give the file it points to)";
        if (!fs::is_regular_file(st)) return path + ": exists and is not a regular file; not replaced";
        if (!force) return path + ": exists (use --force to overwrite)";
    }
    const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
    const fs::file_status ds = fs::status(dir, ec);
    if (!fs::exists(ds)) return path + ": directory " + dir.string() + " does not exist";
    if (!fs::is_directory(ds)) return path + ": " + dir.string() + " is not a directory";
    if (::access(dir.c_str(), W_OK) != 0) return path + ": directory " + dir.string() + " is not writable (" + std::strerror(errno) + ")";
    return "";
}

}  // namespace conform::report

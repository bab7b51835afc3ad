#include "report/out_dir.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include "report/formats.h"

namespace conform {

namespace {

// Every file a report format is written to, for base.
std::vector<std::string> report_names(const std::string& base) {
    std::vector<std::string> names;
    for (const auto& f : report_formats())
        names.push_back(std::filesystem::path(report_path("", f, base)).filename().string());
    return names;
}

}  // namespace

OutDir::OutDir(const std::string& path, std::string base) : path_(path), base_(std::move(base)) {
    // The directory named, not where a link there points: a link at --out
    // would put the reports where the user did not say (docs/inputs.md).
    std::string own = path_;
    while (own.size() > 1 && own.back() == '/') own.pop_back();
    std::error_code ec;
    if (std::filesystem::is_symlink(std::filesystem::symlink_status(own, ec)))
        throw std::runtime_error(path_ + ": a symbolic link (to " + std::filesystem::read_symlink(own, ec).string() +
                                 "); reports are written only into a directory named by its own path");
    std::filesystem::create_directories(path_, ec);
    if (ec) throw std::runtime_error(path_ + ": cannot create directory: " + ec.message());
    fd_ = ::open(own.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd_ < 0) throw std::runtime_error(path_ + ": cannot open: " + std::strerror(errno));
}

OutDir::~OutDir() {
    if (fd_ >= 0) ::close(fd_);
}

OutDir::Seen OutDir::look(const std::string& name) const {
    struct stat st {};
    Seen s;
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return s;
    s.exists = true;
    s.dev = static_cast<uint64_t>(st.st_dev);
    s.ino = static_cast<uint64_t>(st.st_ino);
    s.size = static_cast<uint64_t>(st.st_size);
    s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;  // no one can set it back
    return s;
}

std::string OutDir::shown(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

std::string OutDir::where_opened() const {
    char buf[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(fd_);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    if (n <= 0) return "(a directory no longer reachable by name)";
    return std::string(buf, static_cast<size_t>(n));
}

void OutDir::snapshot() {
    before_.clear();
    for (const auto& n : report_names(base_)) before_.emplace_back(n, look(n));
    snapped_ = true;
}

std::vector<std::string> OutDir::write(const nlohmann::json& report, const std::vector<std::string>& formats) {
    const auto files = render_reports(report, formats, base_);  // all rendered before anything is written
    std::vector<std::string> paths;
    for (const auto& [name, body] : files) {
        written_.emplace_back(name, write_file_atomic_at(fd_, name, body, shown(name)));
        paths.push_back(shown(name));
    }
    return paths;
}

bool OutDir::same_dir() const {
    struct stat by_path {}, opened {};
    return ::stat(path_.c_str(), &by_path) == 0 && ::fstat(fd_, &opened) == 0 && by_path.st_dev == opened.st_dev &&
           by_path.st_ino == opened.st_ino;
}

std::string OutDir::put_back() {
    // Whatever now answers to --out (a planted directory, a link) is moved
    // aside under a name that says what it is, nothing deleted; the
    // directory conform opened goes back to the path the user will look at.
    const std::string ours = where_opened();
    std::random_device rd;
    std::string aside;
    struct stat st {};
    if (::lstat(path_.c_str(), &st) == 0) {
        for (int attempt = 0; attempt < 20 && aside.empty(); ++attempt) {
            const std::string name = path_ + ".planted-" + std::to_string(rd() % 1000000);
            if (::lstat(name.c_str(), &st) != 0 && ::rename(path_.c_str(), name.c_str()) == 0) aside = name;
        }
        if (aside.empty())
            return "conform: --out " + path_ + " is not the directory conform opened before the run (it was replaced "
                   "during the run, by a worker?) and cannot be moved aside: " + std::strerror(errno) +
                   "; the reports conform wrote are in " + ours;
    }
    if (::rename(ours.c_str(), path_.c_str()) != 0)
        return "conform: --out " + path_ + " was replaced during the run (by a worker?)" +
               (aside.empty() ? std::string() : "; what was put there is now " + aside) +
               "; conform's directory cannot be moved back (" + std::strerror(errno) + "): its reports are in " + ours;
    return "conform: --out " + path_ + " was replaced during the run (by a worker?): conform's directory is back at " +
           path_ + (aside.empty() ? std::string() : ", and what was put there is now " + aside);
}

std::vector<std::string> OutDir::sweep() {
    std::vector<std::string> lines;
    if (!same_dir()) lines.push_back(put_back());
    const bool at_path = same_dir();
    for (const auto& [name, id] : written_) {
        struct stat st {};
        const bool reached = ::stat(shown(name).c_str(), &st) == 0 && static_cast<uint64_t>(st.st_dev) == id.dev &&
                             static_cast<uint64_t>(st.st_ino) == id.ino;
        const Seen now = look(name);
        if ((!reached || !now.exists || now.dev != id.dev || now.ino != id.ino) && at_path)
            lines.push_back("conform: " + shown(name) + " is not the report conform wrote: it was replaced after "
                            "conform wrote it");
    }
    if (!snapped_) return lines;
    for (auto& [name, was] : before_) {
        bool ours = false;
        for (const auto& w : written_) ours = ours || w.first == name;
        if (ours) continue;
        const Seen now = look(name);
        if (now == was) continue;
        if (now.exists && ::unlinkat(fd_, name.c_str(), 0) == 0)
            lines.push_back("conform: " + shown(name) + " was changed during the run, not by conform (a worker?): "
                            "removed, so that it cannot pass for this run's report");
        else
            lines.push_back("conform: " + shown(name) + " was changed during the run, not by conform (a worker?)" +
                            (now.exists ? std::string(" and cannot be removed: ") + std::strerror(errno) : ""));
        was = look(name);  // said once: a second sweep (after writing) compares with what this one left
    }
    return lines;
}

}  // namespace conform

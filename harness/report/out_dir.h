// harness/report/out_dir.h — the --out directory of a gate run, held against
// the code the run hosts. A worker runs as the user's uid and may write what
// the user may (impls/PLUGINS.md, "Threat model"): forge a report, plant
// links, swap the directory. So the gate
//   * opens --out once, before any worker starts, and writes every report
//     through that descriptor (a directory replaced by a link later is not
//     followed), each into an unpredictable new file renamed into place;
//   * remembers, before the first worker starts, what every report file of
//     the directory was (snapshot);
//   * after every worker has stopped and before it writes (sweep): puts its
//     directory back at --out if something else was put there (that is
//     moved aside as --out.planted-N, nothing deleted), and removes a report
//     file that changed since and that it did not write — a forgery must not
//     pass for this run's report, nor stay where the user will look. Each
//     finding is a line for the user, goes into the report it then writes
//     ("tampered"), and makes the run fail;
//   * after writing (sweep again): checks that --out/NAME, as the user will
//     open it, is the file it wrote.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"

namespace conform {

class OutDir {
   public:
    // Creates the directory if needed and opens it; throws std::runtime_error naming it.
    explicit OutDir(const std::string& path, std::string base = "conform");
    ~OutDir();
    OutDir(const OutDir&) = delete;
    OutDir& operator=(const OutDir&) = delete;

    // What each report file (every format) is now.
    void snapshot();
    // Renders every format, then writes each through the descriptor; returns
    // the paths as --out spells them. Throws std::runtime_error naming the file.
    std::vector<std::string> write(const nlohmann::json& report, const std::vector<std::string>& formats);
    // What changed behind conform's back, one line per finding (empty: nothing).
    std::vector<std::string> sweep();

   private:
    struct Seen {
        bool exists = false;
        uint64_t dev = 0, ino = 0, size = 0;
        int64_t mtime_ns = 0, ctime_ns = 0;
        bool operator==(const Seen& o) const {
            return exists == o.exists && dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
                   ctime_ns == o.ctime_ns;
        }
    };
    Seen look(const std::string& name) const;
    std::string shown(const std::string& name) const;
    std::string where_opened() const;  // the opened directory's path now
    bool same_dir() const;             // --out, by its path, is the directory opened
    std::string put_back();            // the opened directory back at --out; the line saying what happened

    std::string path_, base_;
    int fd_ = -1;
    bool snapped_ = false;
    std::vector<std::pair<std::string, Seen>> before_;
    std::vector<std::pair<std::string, FileId>> written_;
};

}  // namespace conform

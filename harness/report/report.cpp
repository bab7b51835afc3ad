#include "report/report.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <random>
#include <stdexcept>
#include <unistd.h>

#include "reference/reference.h"
#include "report/view.h"

namespace conform {

bool RunReport::all_pass() const {
    if (!nothing_ran.empty() || !missing_twists.empty()) return false;
    for (const auto& c : results)
        if (!c.pass) return false;
    return true;
}

void RunReport::add_nothing_ran(const std::string& impl, const std::string& op) {
    std::string why;
    for (const auto& n : not_run)
        if (n.impl == impl && (op.empty() || n.op == op))
            why += (why.empty() ? "" : "; ") + fmt::format("{}: {} case{} declined: {}", n.op, n.cases,
                                                           n.cases == 1 ? "" : "s", n.reason);
    nothing_ran.push_back({impl, op, why.empty() ? "no case was offered to it" : why});
}

namespace {

std::string sci(double v) {
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isnan(v)) return "nan";
    return fmt::format("{:.2e}", v);
}

const TensorResult* worst_tensor(const CaseResult& c) {
    const TensorResult* w = nullptr;
    for (const auto& t : c.tensors)
        if (!w || t.v.margin < w->v.margin) w = &t;
    return w;
}

nlohmann::json num(double v) {
    if (std::isfinite(v)) return v;
    return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

// Three significant digits: an error map is for the eye, and the JSON stays small.
nlohmann::json cell(double v) {
    if (!std::isfinite(v)) return nullptr;  // the output was NaN or ±Inf there
    if (v == 0) return 0;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return std::strtod(buf, nullptr);
}

nlohmann::json cells(const std::vector<double>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (double x : v) a.push_back(cell(x));
    return a;
}

// Error maps kept per (impl, op) in a run's report: the first failing cases
// show the pattern; a thousand more would only make the report large.
constexpr int kErrorMapsPerGroup = 3;

}  // namespace

nlohmann::json to_json(const ErrorMap& m) {
    nlohmann::json j;
    j["tensor"] = m.tensor;
    j["case_id"] = m.case_id;
    j["rows"] = m.rows;
    j["cols"] = m.cols;
    j["heads"] = m.heads;
    j["head_dim"] = m.head_dim;
    j["has_heads"] = m.has_heads;
    j["allowed"] = num(m.allowed);
    j["max_err"] = num(m.max_err);
    nlohmann::json values = nlohmann::json::array();
    for (int64_t r = 0; r < m.grid_rows; ++r) {
        const auto first = m.grid.begin() + r * m.grid_cols;
        values.push_back(cells(std::vector<double>(first, first + m.grid_cols)));
    }
    j["grid"] = {{"rows", m.grid_rows},
                 {"cols", m.grid_cols},
                 {"row_pool", m.row_pool},
                 {"head_pool", m.head_pool},
                 {"dim_pool", m.dim_pool},
                 {"dim_cells", m.dim_cells},
                 {"row_positions", m.row_positions},
                 {"values", values}};
    j["by_position"] = {{"pool", m.position_pool}, {"positions", m.by_position_positions}, {"max", cells(m.by_position)}};
    j["by_dim"] = {{"pool", m.by_dim_pool}, {"max", cells(m.by_dim)}};
    if (m.has_heads) j["by_head"] = cells(m.by_head);
    return j;
}

void RunReport::add_not_run(const std::string& impl, const std::string& op, const std::string& reason) {
    for (auto& n : not_run)
        if (n.impl == impl && n.op == op) {
            ++n.cases;
            return;
        }
    not_run.push_back({impl, op, reason, 1});
}

void print_summary(std::ostream& os, const RunReport& r) {
    struct Row {
        int run = 0, passed = 0;
        double worst_margin = INFINITY, err = 0, allowed = 0;
        std::string tensor = "-";
        int declined = 0;
        bool nothing_ran = false;
    };
    std::map<std::pair<std::string, std::string>, Row> rows;  // (op, impl)
    // Declines in the table, beside what ran: a row of nothing but declines
    // is a row, not an absence.
    for (const auto& n : r.not_run) rows[{n.op, n.impl}].declined += n.cases;
    for (const auto& n : r.nothing_ran)
        for (auto& [key, row] : rows)
            if (key.second == n.impl && (n.op.empty() || key.first == n.op)) row.nothing_ran = true;
    for (const auto& c : r.results) {
        Row& row = rows[{to_string(c.op), c.impl}];
        row.run++;
        if (c.pass) row.passed++;
        const TensorResult* w = worst_tensor(c);
        const double margin = c.error.empty() ? (w ? w->v.margin : INFINITY) : 0.0;
        if (margin < row.worst_margin || row.run == 1) {
            row.worst_margin = margin;
            row.err = w ? w->v.err : NAN;  // at the element that decides the margin
            row.allowed = w ? w->v.allowed : NAN;
            row.tensor = w ? w->name : "-";
        }
    }
    // Columns as wide as their longest entry (paged_attention, "simd relations").
    size_t ow = 10, iw = 12;
    for (const auto& [key, row] : rows) ow = std::max(ow, key.first.size()), iw = std::max(iw, key.second.size());
    os << fmt::format("{:<{}} {:<{}} {:>6} {:>6} {:>10} {:>10} {:>8}  {}\n", "op", ow, "impl", iw, "cases", "pass",
                      "worst err", "allowed", "margin", "tensor");
    for (const auto& [key, row] : rows) {
        const std::string margin = row.run == 0               ? "-"
                                   : std::isinf(row.worst_margin) ? "inf"
                                                                  : fmt::format("{:.2f}x", row.worst_margin);
        std::string note = row.passed == row.run ? "" : "   FAIL";
        if (row.nothing_ran) note = "   FAIL: no property case ran";
        if (row.declined) note += fmt::format("   ({} declined)", row.declined);
        os << fmt::format("{:<{}} {:<{}} {:>6} {:>6} {:>10} {:>10} {:>8}  {}{}\n", key.first, ow, key.second, iw, row.run,
                          row.passed, row.run ? sci(row.err) : "-", row.run ? sci(row.allowed) : "-", margin,
                          row.tensor, note);
    }
    for (const auto& n : r.not_run)
        os << fmt::format("not run:   {} {}: {} case{} unsupported ({})\n", n.impl, n.op, n.cases,
                          n.cases == 1 ? "" : "s", n.reason);
    for (const auto& n : r.not_offered) {
        std::string ts;
        for (const auto& t : n.twists) ts += (ts.empty() ? "" : ", ") + t;
        os << fmt::format("not offered: {} {}: {} (undeclared twists: no case with one on)\n", n.impl, n.op, ts);
    }
    // Router cases judged on the experts the kernel took (near-ties it broke
    // its own way, docs/moe.md): how many, and the first, per implementation and op.
    std::map<std::pair<std::string, std::string>, std::pair<int, std::string>> taken;
    for (const auto& c : r.results)
        if (!c.route_taken.empty()) {
            auto& [n, first] = taken[{c.impl, to_string(c.op)}];
            if (n++ == 0) first = c.case_id + ": " + c.route_taken;
        }
    for (const auto& [key, v] : taken)
        os << fmt::format("experts:   {} {}: {} case{} judged on the experts it took, at near-ties (first: {})\n",
                          key.first, key.second, v.first, v.first == 1 ? "" : "s", v.second);
    for (const auto& m : r.missing_twists) os << "FAIL: --require-twists: " << m << " is not declared\n";
    for (const auto& w : r.workers)
        if (w.restarts > 0)
            os << fmt::format("restarted: {} {} time{} in {} calls (each after it crashed, hung or broke the protocol, "
                              "between cases or in one)\n",
                              w.impl, w.restarts, w.restarts == 1 ? "" : "s", w.calls);
}

void print_failure(std::ostream& os, const CaseResult& c) {
    os << "\n" << report::failure_text(to_json(c));  // the same text a merged report's renderers print (view.h)
}

nlohmann::json to_json(const CaseResult& c) {
    nlohmann::json j;
    j["impl"] = c.impl;
    j["op"] = to_string(c.op);
    j["dtype"] = to_string(c.dtype);
    if (c.act_quant != ActQuant::none) j["act_quant"] = to_string(c.act_quant);
    j["case_id"] = c.case_id;
    j["origin"] = c.origin;
    if (!c.file.empty()) {
        j["file"] = c.file;
        j["group"] = c.group;
    }
    j["pass"] = c.pass;
    j["seconds"] = c.seconds;
    j["inputs"] = c.shapes;
    if (!c.error.empty()) j["error"] = c.error;
    if (!c.first_failing.empty()) j["first_failing"] = c.first_failing;
    if (c.shrink_steps) j["shrink_steps"] = c.shrink_steps;
    if (c.shrink_tried || !c.shrink_stopped.empty()) {
        j["shrink_tried"] = c.shrink_tried;
        j["shrink_seconds"] = c.shrink_seconds;
        if (!c.shrink_stopped.empty()) j["shrink_stopped"] = c.shrink_stopped;
    }
    if (!c.same_as.empty()) j["same_as"] = c.same_as;
    if (!c.route_taken.empty()) j["route_taken"] = c.route_taken;
    if (!c.diagnosis.empty() || c.hypotheses_tried > 0) {
        // Structured: every hypothesis under which the output conforms, by bug id.
        auto& d = j["diagnosis"];
        d["lines"] = c.diagnosis;
        d["tried"] = c.hypotheses_tried;
        d["explained"] = !c.hypotheses.empty();
        auto& ms = d["matches"] = nlohmann::json::array();
        for (const auto& m : c.hypotheses)
            ms.push_back({{"id", m.id},
                          {"change", m.change},
                          {"why", m.why},
                          {"tensor", m.tensor},
                          {"err_config", num(m.err_config)},
                          {"err_hypothesis", num(m.err_hypothesis)},
                          {"allowed", num(m.allowed)},
                          {"note", m.note}});
    }
    if (!c.localisation.empty()) {
        const Localisation& l = c.localisation;
        j["localisation"] = {{"walked", l.walked},     {"first_divergence", l.first_divergence},
                             {"conforming", l.conforming}, {"tensor", l.tensor},
                             {"worst", l.worst},       {"patterns", l.patterns}};
    }
    if (!c.replay.empty()) j["replay"] = c.replay;
    if (!c.error_map.empty()) j["error_map"] = to_json(c.error_map);
    if (!c.unshrunk_error_map.empty()) j["unshrunk_error_map"] = to_json(c.unshrunk_error_map);
    auto& ts = j["tensors"] = nlohmann::json::array();
    for (const auto& t : c.tensors) {
        const Verdict& v = t.v;
        nlohmann::json tj;
        tj["name"] = t.name;
        tj["pass"] = v.pass;
        tj["numel"] = v.m.numel;
        tj["max_abs"] = num(v.m.max_abs);
        tj["max_rel"] = num(v.m.max_rel);
        tj["rel_floor"] = num(v.m.rel_floor);
        tj["nmse"] = num(v.m.nmse);
        tj["cosine"] = num(v.m.cosine);
        tj["max_ref"] = num(v.m.max_ref);
        tj["mismatches"] = v.mismatches;
        tj["mismatch_pct"] = v.mismatch_pct;
        tj["worst"] = {{"flat", v.m.worst.flat}, {"token", v.m.worst.token}, {"col", v.m.worst.col},
                       {"head", v.m.worst.head},  {"dim", v.m.worst.dim},     {"actual", num(v.m.worst_actual)},
                       {"expected", num(v.m.worst_expected)}};
        tj["bound"] = {{"k", v.k},
                       {"baseline_library", num(v.base.err_library)},
                       {"baseline_sequential", num(v.base.err_sequential)},
                       {"baseline_row", num(v.baseline)},
                       {"floor", num(v.floor)},
                       {"noise", num(v.noise)},
                       {"allowed", num(v.allowed)},
                       {"nmse_allowed", num(v.nmse_allowed)},
                       {"decided_by", v.decided_by},
                       {"noise_max", num(v.noise_max)}};
        // The bound is per element: the element with the least margin, its error and bound ("bound" holds its terms).
        tj["decisive"] = {{"flat", v.at.flat}, {"token", v.at.token}, {"col", v.at.col}, {"head", v.at.head},
                          {"dim", v.at.dim},   {"err", num(v.err)},     {"allowed", num(v.allowed)}};
        tj["margin"] = num(v.margin);
        if (!v.why.empty()) tj["why"] = v.why;
        ts.push_back(tj);
    }
    return j;
}

void print_phases(std::ostream& os, const RunReport& r) {
    std::vector<phases::Phase> ps = r.phases;
    std::stable_sort(ps.begin(), ps.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
    double total = 0;
    for (const auto& p : ps) total += p.seconds;
    os << fmt::format("\n{:<40}{:>10}{:>8}{:>8}\n", "phase", "seconds", "share", "calls");
    for (const auto& p : ps)
        os << fmt::format("{:<40}{:>10.2f}{:>7.1f}%{:>8}\n", p.name, p.seconds, total > 0 ? 100 * p.seconds / total : 0.0,
                          p.calls);
    os << fmt::format("{:<40}{:>10.2f}\n", "total", total);
}

nlohmann::json to_json(const RunReport& r) {
    nlohmann::json j;
    j["schema"] = "conform-report/1";
    j["seed"] = r.seed;
    j["cases_per_op"] = r.cases_per_op;
    j["impls"] = r.impls;
    j["ops"] = r.ops;
    j["dtype"] = r.dtype;
    j["fixtures"] = r.fixtures;
    j["reference"] = "LibTorch " + ref::version();
    j["seconds"] = r.seconds;
    int passed = 0;
    for (const auto& c : r.results) passed += c.pass;
    j["summary"] = {{"cases", r.results.size()}, {"passed", passed}, {"failed", r.results.size() - passed}};
    j["pass"] = r.all_pass();
    auto& cs = j["cases"] = nlohmann::json::array();
    std::map<std::pair<std::string, std::string>, int> maps;  // (impl, op) -> error maps kept
    int omitted = 0;
    for (const auto& c : r.results) {
        nlohmann::json cj = to_json(c);
        if (cj.contains("error_map") && ++maps[{c.impl, to_string(c.op)}] > kErrorMapsPerGroup) {
            cj.erase("error_map");
            cj.erase("unshrunk_error_map");
            ++omitted;
        }
        cs.push_back(std::move(cj));
    }
    j["error_maps"] = {{"per_impl_op", kErrorMapsPerGroup}, {"omitted", omitted}};
    auto& ph = j["phases"] = nlohmann::json::array();
    for (const auto& p : r.phases) ph.push_back({{"phase", p.name}, {"seconds", p.seconds}, {"calls", p.calls}});
    auto& nr = j["not_run"] = nlohmann::json::array();
    for (const auto& n : r.not_run)
        nr.push_back({{"impl", n.impl}, {"op", n.op}, {"cases", n.cases}, {"reason", n.reason}});
    auto& ws = j["workers"] = nlohmann::json::array();
    for (const auto& w : r.workers)
        ws.push_back({{"impl", w.impl}, {"calls", w.calls}, {"repeats", w.repeats}, {"restarts", w.restarts}});
    auto& no = j["not_offered"] = nlohmann::json::array();
    for (const auto& n : r.not_offered) no.push_back({{"impl", n.impl}, {"op", n.op}, {"twists", n.twists}});
    if (!r.missing_twists.empty()) j["missing_twists"] = r.missing_twists;
    auto& none = j["nothing_ran"] = nlohmann::json::array();
    for (const auto& n : r.nothing_ran) {
        none.push_back({{"impl", n.impl}, {"reason", n.reason}});
        if (!n.op.empty()) none.back()["op"] = n.op;
    }
    return j;
}

FileId write_file_atomic_at(int dirfd, const std::string& name, const std::string& content, const std::string& shown) {
    // A name nobody can predict, created exclusively and never through a
    // link (O_CREAT | O_EXCL | O_NOFOLLOW), so nothing planted beforehand — a
    // symlink at a temporary name, a file of the same name — is written
    // through; fsync'd before the rename so a crash leaves the old report or
    // the new one, never half of one. renameat(2) replaces a link at `name`
    // itself, never its target. Relative to dirfd: a directory swapped for
    // a link after it was opened is not followed.
    std::random_device rd;
    std::string tmp;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
        static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        tmp = "." + name + ".";
        for (int i = 0; i < 12; ++i) tmp += abc[rd() % (sizeof abc - 1)];
        fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) throw std::runtime_error(shown + ": cannot create a temporary file: " + std::strerror(errno));
    auto fail = [&](const std::string& what) {
        const int e = errno;
        ::close(fd);
        ::unlinkat(dirfd, tmp.c_str(), 0);
        throw std::runtime_error(shown + ": " + what + ": " + std::strerror(e));
    };
    for (size_t off = 0; off < content.size();) {
        const ssize_t n = ::write(fd, content.data() + off, content.size() - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write failed");
        off += static_cast<size_t>(n);
    }
    if (::fchmod(fd, 0644) != 0) fail("cannot set permissions");
    if (::fsync(fd) != 0) fail("fsync failed");
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("fstat failed");
    if (::close(fd) != 0) {
        ::unlinkat(dirfd, tmp.c_str(), 0);
        throw std::runtime_error(shown + ": close failed: " + std::strerror(errno));
    }
    if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
        const int e = errno;
        ::unlinkat(dirfd, tmp.c_str(), 0);
        throw std::runtime_error(shown + ": cannot rename into place: " + std::strerror(e));
    }
    ::fsync(dirfd);
    return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

void write_file_atomic(const std::string& path, const std::string& content) {
    namespace fs = std::filesystem;
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw std::runtime_error(path + ": cannot create directory: " + ec.message());
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) throw std::runtime_error(path + ": cannot open its directory: " + std::strerror(errno));
    try {
        write_file_atomic_at(dfd, p.filename().string(), content, path);
    } catch (...) {
        ::close(dfd);
        throw;
    }
    ::close(dfd);
}

}  // namespace conform

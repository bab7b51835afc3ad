// Coverage counted, and written as JSON or a table (run/coverage.h).
#include "run/coverage.h"

#include <fmt/format.h>

#include <ostream>
#include <sstream>

#include "gen/gen.h"
#include "run/select.h"

namespace conform::run {

namespace {

// counts[dimension][class]: how many cases of an (op, impl) reach the class.
using Counts = std::vector<std::vector<int>>;

Counts empty_counts() {
    Counts c;
    for (const auto& d : select::dimensions())
        c.emplace_back(d.classes.size(), 0);
    return c;
}

// One line per dimension: "theta   1e4 31 | 5e5 27 | >=1e6 40 | other EMPTY".
void print_op(std::ostream& os, Op op, const std::vector<std::string>& impls, const CoverageCell& cell) {
    std::string names;
    for (const auto& n : impls)
        names += (names.empty() ? "" : ", ") + n;
    os << fmt::format("\n{} / {}  ({} case{})\n", to_string(op), names, cell.cases, cell.cases == 1 ? "" : "s");
    const auto& dims = select::dimensions();
    for (size_t d = 0; d < dims.size(); ++d) {
        std::string row;
        if (!dims[d].relevant(op)) {
            row = "n/a";
        } else {
            for (size_t k = 0; k < dims[d].classes.size(); ++k) {
                const int n = cell.counts[d][k];
                row += (k ? " | " : "") + dims[d].classes[k] + " " + (n ? std::to_string(n) : std::string("EMPTY"));
            }
        }
        os << fmt::format("  {:<13} {}\n", dims[d].name, row);
    }
}

}  // namespace

Coverage count_coverage(const Plan& plan, const ImplSet& impls) {
    Coverage cov;
    for (const OpPlan& p : plan.ops) {
        std::vector<Case> cases;
        for (const auto& pick : p.picks) cases.push_back(gen::materialize(pick.spec));
        cov.property += static_cast<int>(cases.size());
        for (const Case& c : plan.fixtures.cases)
            if (c.op == p.op) cases.push_back(c);
        // Each case's classes once, whatever the implementations (a decode
        // with an FP8 cache runs the reference for them).
        std::vector<std::vector<std::vector<int>>> classes;
        for (const Case& c : cases) classes.push_back(select::classes_of(c));
        for (const auto& s : impls.impls) {
            if (!s.impl->implements(p.op)) continue;  // not offered at all: no cell to fill
            CoverageCell cell{p.op, s.name, 0, empty_counts()};
            for (size_t i = 0; i < cases.size(); ++i) {
                if (!s.impl->supports(p.op, cases[i].config).ok) continue;
                ++cell.cases;
                const auto& cls = classes[i];
                for (size_t d = 0; d < cls.size(); ++d)
                    for (int k : cls[d])
                        ++cell.counts[d][k];
            }
            cov.cells.push_back(std::move(cell));
        }
    }
    // ---- what is empty ---------------------------------------------------------------------
    const auto& dims = select::dimensions();
    for (const CoverageCell& c : cov.cells)
        for (size_t d = 0; d < dims.size(); ++d)
            if (dims[d].relevant(c.op))
                for (size_t k = 0; k < dims[d].classes.size(); ++k)
                    if (c.counts[d][k] == 0) cov.empty.push_back({c.op, c.impl, dims[d].name, dims[d].classes[k]});
    return cov;
}

nlohmann::json coverage_json(const Plan& plan, const Coverage& cov) {
    const Selection& o = plan.selection;
    const select::Shard& shard = o.shard;
    const auto& dims = select::dimensions();
    nlohmann::json j;
    j["schema"] = "conform-coverage/1";
    j["seed"] = o.seed;
    j["cases_per_op"] = o.case_id.empty() ? o.cases : 1;
    j["dtype"] = to_string(o.dtype);
    if (!o.params.empty()) j["params"] = o.params;
    if (shard.active()) j["shard"] = {{"index", shard.index}, {"total", shard.total}};
    j["fixtures"] = plan.fixtures.files;
    auto& jd = j["dimensions"] = nlohmann::json::array();
    for (const auto& d : dims) {
        std::vector<std::string> on;
        for (Op op : d.ops)
            on.push_back(to_string(op));
        jd.push_back({{"name", d.name}, {"classes", d.classes}, {"ops", on}});
    }
    auto& jc = j["cells"] = nlohmann::json::array();
    for (const CoverageCell& c : cov.cells) {
        nlohmann::json row = {{"op", to_string(c.op)}, {"impl", c.impl}, {"cases", c.cases}};
        for (size_t d = 0; d < dims.size(); ++d) {
            if (!dims[d].relevant(c.op)) {
                row["reached"][dims[d].name] = nullptr;  // not applicable to this op
                continue;
            }
            for (size_t k = 0; k < dims[d].classes.size(); ++k)
                row["reached"][dims[d].name][dims[d].classes[k]] = c.counts[d][k];
        }
        jc.push_back(row);
    }
    auto& je = j["empty"] = nlohmann::json::array();
    for (const auto& e : cov.empty)
        je.push_back({{"op", to_string(e.op)}, {"impl", e.impl}, {"dimension", e.dimension}, {"class", e.cls}});
    j["full"] = cov.empty.empty();
    return j;
}

std::string coverage_table(const Plan& plan, const Coverage& cov) {
    const Selection& o = plan.selection;
    const select::Shard& shard = o.shard;
    const FixtureSelection& fixtures = plan.fixtures;
    const auto& cells = cov.cells;
    std::ostringstream os;
    os << fmt::format(
        "coverage: seed {}, {} property case{} per op{}, dtype {}; {} fixture case{} from {} "
        "file{}{}\n",
        o.seed, o.case_id.empty() ? o.cases : 1, (o.case_id.empty() ? o.cases : 1) == 1 ? "" : "s",
        !o.params.empty() ? " matching --params '" + o.params + "'" : std::string(), to_string(o.dtype),
        fixtures.cases.size(), fixtures.cases.size() == 1 ? "" : "s", fixtures.files.size(),
        fixtures.files.size() == 1 ? "" : "s",
        shard.active() ? fmt::format("; shard {}/{} ({} property)", shard.index, shard.total, cov.property)
                       : std::string());
    // Implementations that reach the same cells share one table.
    // (An op's cells are consecutive, one per implementation that implements it.)
    for (size_t i = 0; i < cells.size();) {
        std::vector<std::string> same;
        const size_t first = i;
        size_t n = 0;
        while (first + n < cells.size() && cells[first + n].op == cells[first].op) ++n;
        std::vector<bool> taken(n, false);
        for (size_t a = 0; a < n; ++a) {
            if (taken[a]) continue;
            same = {cells[first + a].impl};
            for (size_t b = a + 1; b < n; ++b)
                if (!taken[b] && cells[first + b].counts == cells[first + a].counts &&
                    cells[first + b].cases == cells[first + a].cases) {
                    same.push_back(cells[first + b].impl);
                    taken[b] = true;
                }
            print_op(os, cells[first].op, same, cells[first + a]);
        }
        i += n;
    }
    os << "\n";
    if (cov.empty.empty()) {
        os << "coverage: every cell that applies is reached (n/a: the dimension does not apply to the op)\n";
    } else {
        os << fmt::format("coverage: {} empty cell{} (no case reached them):\n", cov.empty.size(),
                          cov.empty.size() == 1 ? "" : "s");
        for (const auto& e : cov.empty)
            os << fmt::format("  {} / {}: {} {}\n", to_string(e.op), e.impl, e.dimension, e.cls);
    }
    return os.str();
}

}  // namespace conform::run

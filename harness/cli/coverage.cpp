// conform coverage: which trap dimensions a run reaches, per op and
// implementation — from the cases the gate would run with the same flags
// (the same draws, --params, shard and fixture files), with nothing executed.
// An implementation counts a case only where it supports() it, as in the gate.
#include <fmt/format.h>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "gen/gen.h"
#include "registry.h"
#include "run/select.h"

namespace conform::cli {

namespace {

struct Opts {
    SelectionFlags sf;
    GateOptions g;
    bool no_default_fixtures = false;
    bool json = false;
    bool require_full = false;
    config::ConfigOptions model_flags;  // --preset / --config / overrides, as in the gate
};

// counts[dimension][class]: how many cases of an (op, impl) reach the class.
using Counts = std::vector<std::vector<int>>;

struct Cell {
    Op op;
    std::string impl;
    int cases = 0;
    Counts counts;
};

Counts empty_counts() {
    Counts c;
    for (const auto& d : select::dimensions())
        c.emplace_back(d.classes.size(), 0);
    return c;
}

// One line per dimension: "theta   1e4 31 | 5e5 27 | >=1e6 40 | other EMPTY".
void print_op(std::ostream& os, Op op, const std::vector<std::string>& impls, const Cell& cell) {
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

int run(const Opts& in) {
    GateOptions o = in.g;
    o.default_fixtures = !in.no_default_fixtures;
    // As main.cpp does for the gate: property cases pinned to the model's
    // block, its widths scaled down; the repo's fixtures only when named.
    if (!apply_model_flags(in.model_flags, o) || !apply_selection_flags(in.sf, o)) return kUsage;
    BlockConfig pinned;
    if (o.model) {
        pinned = config::scale_down(o.model->block, o.model_scale_down);
        gen::pin_config(&pinned);
    }

    // ---- implementations, as the gate picks them (in-repo only) ----------------------
    struct Selected {
        std::string name;
        std::unique_ptr<Implementation> impl;
    };
    std::vector<Selected> impls;
    std::vector<std::string> names = o.impls;
    if (names.empty())
        for (const auto& e : implementations())
            names.push_back(e.name);
    for (const auto& n : names) {
        const ImplEntry* e = find_implementation(n);
        if (!e) {
            std::cerr << "conform: coverage: unknown implementation '" << n << "' (see `conform list`)\n";
            return kUsage;
        }
        const Availability a = e->available();
        if (!a.available) {
            if (o.impls_explicit) {
                std::cerr << "conform: implementation '" << n << "' is unavailable on this machine: " << a.reason
                          << "\n";
                return kUnavailable;
            }
            if (!in.json) std::cout << "skipping " << n << ": " << a.reason << "\n";
            continue;
        }
        ImplOptions io;
        io.dtype = o.dtype;
        try {
            impls.push_back({n, e->create(io)});  // asked what it supports, never run
        } catch (const std::exception& ex) {
            std::cerr << "conform: implementation '" << n << "' cannot run: " << ex.what() << "\n";
            return o.impls_explicit ? kUnavailable : kUsage;
        }
    }
    if (impls.empty()) {
        std::cerr << "conform: no implementation available to run\n";
        return kUnavailable;
    }

    // ---- the cases, as the gate selects them -------------------------------------------
    std::vector<Op> ops = o.ops;
    if (ops.empty()) ops.assign(kAllOps.begin(), kAllOps.end());
    std::optional<gen::CaseSpec> single;
    if (!o.case_id.empty()) {
        std::string err;
        single = gen::parse_case_id(o.case_id, &err);
        if (!single) {
            std::cerr << "conform: --case: " << err << "\n";
            return kUsage;
        }
        ops = {single->op};
    }
    FixtureSelection fixtures;
    try {
        fixtures = select_fixtures(o, ops);
    } catch (const std::exception& e) {
        std::cerr << "conform: " << e.what() << "\n";
        return kUsage;
    }
    const select::ParamFilter params(o.params);
    const select::Shard shard{o.shard_index, o.shard_total};

    std::vector<Cell> cells;  // op-major, impls in order
    int property = 0, matched = 0;
    for (Op op : ops) {
        std::vector<Case> cases;
        if (!single) {
            const select::PropertySelection ps = select::select_property(op, o.seed, o.cases, params, shard);
            matched += ps.matched;
            for (const auto& p : ps.picks)
                cases.push_back(gen::materialize(p.spec));
        } else if (const std::string id = gen::canonical_id(*single); params.matches(id)) {
            ++matched;
            if (select::in_shard(id, shard)) cases.push_back(gen::materialize(*single));
        }
        property += static_cast<int>(cases.size());
        for (const Case& c : fixtures.cases)
            if (c.op == op) cases.push_back(c);
        for (const auto& s : impls) {
            Cell cell{op, s.name, 0, empty_counts()};
            for (const Case& c : cases) {
                if (!s.impl->supports(op, c.config).ok) continue;
                ++cell.cases;
                const auto cls = select::classes_of(c);
                for (size_t d = 0; d < cls.size(); ++d)
                    for (int k : cls[d])
                        ++cell.counts[d][k];
            }
            cells.push_back(std::move(cell));
        }
    }
    if (params.active() && matched == 0 && fixtures.before_shard == 0) {
        std::cerr << "conform: --params '" << o.params << "' selects no case of the selected ops\n";
        return kUsage;
    }

    // ---- what is empty ---------------------------------------------------------------------
    const auto& dims = select::dimensions();
    struct Empty {
        Op op;
        std::string impl, dimension, cls;
    };
    std::vector<Empty> empty;
    for (const Cell& c : cells)
        for (size_t d = 0; d < dims.size(); ++d)
            if (dims[d].relevant(c.op))
                for (size_t k = 0; k < dims[d].classes.size(); ++k)
                    if (c.counts[d][k] == 0) empty.push_back({c.op, c.impl, dims[d].name, dims[d].classes[k]});

    if (in.json) {
        nlohmann::json j;
        j["schema"] = "conform-coverage/1";
        j["seed"] = o.seed;
        j["cases_per_op"] = o.case_id.empty() ? o.cases : 1;
        j["dtype"] = to_string(o.dtype);
        if (params.active()) j["params"] = o.params;
        if (shard.active()) j["shard"] = {{"index", shard.index}, {"total", shard.total}};
        j["fixtures"] = fixtures.files;
        auto& jd = j["dimensions"] = nlohmann::json::array();
        for (const auto& d : dims) {
            std::vector<std::string> on;
            for (Op op : d.ops)
                on.push_back(to_string(op));
            jd.push_back({{"name", d.name}, {"classes", d.classes}, {"ops", on}});
        }
        auto& jc = j["cells"] = nlohmann::json::array();
        for (const Cell& c : cells) {
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
        for (const auto& e : empty)
            je.push_back({{"op", to_string(e.op)}, {"impl", e.impl}, {"dimension", e.dimension}, {"class", e.cls}});
        j["full"] = empty.empty();
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << fmt::format(
            "coverage: seed {}, {} property case{} per op{}, dtype {}; {} fixture case{} from {} "
            "file{}{}\n",
            o.seed, o.case_id.empty() ? o.cases : 1, (o.case_id.empty() ? o.cases : 1) == 1 ? "" : "s",
            params.active() ? " matching --params '" + o.params + "'" : std::string(), to_string(o.dtype),
            fixtures.cases.size(), fixtures.cases.size() == 1 ? "" : "s", fixtures.files.size(),
            fixtures.files.size() == 1 ? "" : "s",
            shard.active() ? fmt::format("; shard {}/{} ({} property)", shard.index, shard.total, property)
                           : std::string());
        // Implementations that reach the same cells share one table.
        for (size_t i = 0; i < cells.size();) {
            std::vector<std::string> same;
            std::vector<bool> taken(impls.size(), false);
            const size_t first = i;
            for (size_t a = 0; a < impls.size(); ++a) {
                if (taken[a]) continue;
                same = {cells[first + a].impl};
                for (size_t b = a + 1; b < impls.size(); ++b)
                    if (!taken[b] && cells[first + b].counts == cells[first + a].counts &&
                        cells[first + b].cases == cells[first + a].cases) {
                        same.push_back(cells[first + b].impl);
                        taken[b] = true;
                    }
                print_op(std::cout, cells[first].op, same, cells[first + a]);
            }
            i += impls.size();
        }
        std::cout << "\n";
        if (empty.empty()) {
            std::cout << "coverage: every cell that applies is reached (n/a: the dimension does not apply to the op)\n";
        } else {
            std::cout << fmt::format("coverage: {} empty cell{} (no case reached them):\n", empty.size(),
                                     empty.size() == 1 ? "" : "s");
            for (const auto& e : empty)
                std::cout << fmt::format("  {} / {}: {} {}\n", to_string(e.op), e.impl, e.dimension, e.cls);
        }
    }
    return in.require_full && !empty.empty() ? kNonconformance : kConform;
}

}  // namespace

Command add_coverage(CLI::App& app) {
    auto o = std::make_shared<Opts>();
    CLI::App* sub = app.add_subcommand(
        "coverage",
        "which trap dimensions (layouts, theta, positions, qk_norm, GQA shapes, widths, RoPE scaling, partial rotary) the "
        "gate's cases reach, per op and implementation; nothing is run");
    sub->add_option("--impl", o->sf.impls, "implementations, comma-separated, or 'all' (default: every available one)");
    sub->add_option("--op", o->sf.ops, "ops, comma-separated, or 'all'");
    sub->add_option("--cases", o->g.cases, "property cases per op (default 100)")->check(CLI::NonNegativeNumber);
    sub->add_option("--seed", o->sf.seed, "seed for property cases (default: the gate's)");
    sub->add_option("--dtype", o->sf.dtype, "dtype: f32, bf16, f16 (what implementations support can depend on it)");
    sub->add_option("--params", o->g.params, "only cases whose canonical id matches this regex, as in the gate");
    sub->add_option("--shard", o->sf.shard,
                    "only shard INDEX/TOTAL, as in the gate (or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS)");
    sub->add_option("--case", o->g.case_id, "one property case by canonical id, as in the gate");
    sub->add_option("--fixtures", o->g.fixtures, "fixture files or directories, as in the gate")->delimiter(',');
    sub->add_flag("--no-default-fixtures", o->no_default_fixtures, "leave out the repo's fixtures/, as in the gate");
    sub->add_option("--fixture-case", o->g.fixture_case, "only fixture cases whose group has this name");
    sub->add_flag("--json", o->json, "print the coverage as JSON (schema conform-coverage/1)");
    sub->add_flag("--require-full", o->require_full, "exit 1 when a cell that applies to its op is empty");
    config::add_config_options(*sub, o->model_flags);
    return {sub, [o] { return run(*o); }};
}

}  // namespace conform::cli

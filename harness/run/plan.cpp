#include "run/plan.h"

#include <algorithm>
#include <filesystem>

#include "h5/fixture.h"
#include "plugin/isolate.h"
#include "registry.h"

namespace conform::run {

// ---- implementations ---------------------------------------------------------------

Chosen* ImplSet::find(const std::string& name) {
    for (auto& c : impls)
        if (c.name == name) return &c;
    return nullptr;
}

ImplSet choose_implementations(const ImplRequest& r) {
    ImplSet set;
    try {
        plugin::LoadOptions lo;
        lo.isolate = r.isolation != ImplRequest::Isolation::none;
        set.plugins = plugin::load_plugins(r.impl_libs, lo);
    } catch (const plugin::PluginError& e) {
        throw InputError(std::string("--impl-lib ") + e.what());
    }
    std::vector<std::string> names = r.names;
    // Given libraries, the run is about them: the in-repo ones only when named.
    if (names.empty())
        for (const auto& p : set.plugins) names.push_back(p.entry.name);
    if (names.empty())
        for (const auto& e : implementations()) names.push_back(e.name);
    for (const auto& n : names) {
        const plugin::Plugin* from_lib = plugin::find_plugin(set.plugins, n);
        const ImplEntry* e = from_lib ? &from_lib->entry : find_implementation(n);
        if (!e) {
            std::string known = "see `conform list`";
            if (!set.plugins.empty()) {
                known += "; the --impl-lib libraries provide:";
                for (const auto& p : set.plugins) known += " " + p.entry.name;
            }
            throw InputError("unknown implementation '" + n + "' (" + known + ")");
        }
        const Availability a = e->available();
        if (!a.available) {
            if (r.names_explicit)
                throw UnavailableError("implementation '" + n + "' is unavailable on this machine: " + a.reason);
            set.skipped.push_back(n + ": " + a.reason);
            continue;
        }
        std::unique_ptr<Implementation> impl;
        try {
            impl = e->create(r.options);
        } catch (const std::exception& ex) {
            const std::string why = "implementation '" + n + "' cannot run: " + ex.what();
            if (r.names_explicit) throw UnavailableError(why);
            throw InputError(why);
        }
        if (!from_lib && r.isolation == ImplRequest::Isolation::all) impl = isolate::isolated(std::move(impl));
        set.impls.push_back({n, std::move(impl), from_lib ? " --impl-lib " + from_lib->path : std::string()});
    }
    return set;
}

// ---- cases -------------------------------------------------------------------------

std::string default_fixture_dir() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool here = fs::is_directory("fixtures", ec);
#ifdef CONFORM_FIXTURES_DIR
    if (fs::is_directory(CONFORM_FIXTURES_DIR, ec))
        return here && fs::equivalent("fixtures", CONFORM_FIXTURES_DIR, ec) ? "fixtures" : CONFORM_FIXTURES_DIR;
#endif
    return here ? "fixtures" : "";
}

namespace {

FixtureSelection select_fixtures(const Selection& o, const std::vector<Op>& ops) {
    FixtureSelection sel;
    // A --case replay is exactly one case; the regression set would blur it.
    // A run of plugins, or pinned to a model, is about that: the set joins
    // when named (--fixtures fixtures).
    sel.paths = o.fixtures;
    sel.by_default = sel.paths.empty() && o.default_fixtures && o.case_id.empty() && !o.plugins_only && !o.pin;
    if (sel.by_default) {
        const std::string d = default_fixture_dir();
        if (!d.empty()) sel.paths.push_back(d);
    }
    const select::ParamFilter params(o.params);
    bool named_case_found = false;
    for (const auto& p : sel.paths) {
        const std::vector<std::string> found = h5::fixture_files(p);
        if (found.empty() && !sel.by_default) throw InputError(p + ": no fixture files (*.h5, *.hdf5) below it");
        for (const auto& f : found) {
            sel.files.push_back(f);
            for (Case& c : h5::read_fixture(f)) {
                if (std::find(ops.begin(), ops.end(), c.op) == ops.end() ||
                    (!o.fixture_case.empty() && c.group != o.fixture_case))
                    continue;
                named_case_found = true;
                if (!params.matches(select::params_text(c))) continue;
                ++sel.before_shard;
                if (select::in_shard(select::fixture_key(c), o.shard)) sel.cases.push_back(std::move(c));
            }
        }
    }
    if (!o.fixture_case.empty() && !named_case_found) {
        std::string where;
        for (const auto& p : sel.paths) where += (where.empty() ? "" : ", ") + p;
        throw InputError("--fixture-case: no case '" + o.fixture_case + "' of the selected ops in " +
                         (where.empty() ? "(no fixtures given)" : where));
    }
    return sel;
}

}  // namespace

int Plan::fixture_cases(Op op) const {
    return static_cast<int>(std::count_if(fixtures.cases.begin(), fixtures.cases.end(),
                                          [op](const Case& c) { return c.op == op; }));
}

Plan make_plan(const Selection& s) {
    Plan plan;
    plan.selection = s;
    std::vector<Op> ops = s.ops;
    if (ops.empty()) ops.assign(kAllOps.begin(), kAllOps.end());
    std::optional<gen::CaseSpec> single;
    if (!s.case_id.empty()) {
        std::string err;
        single = gen::parse_case_id(s.case_id, &err);
        if (!single) throw InputError("--case: " + err);
        ops = {single->op};
    }
    plan.fixtures = select_fixtures(s, ops);
    plan.total_cases = static_cast<int>(plan.fixtures.cases.size());

    const select::ParamFilter params(s.params);
    int matched = 0;
    for (Op op : ops) {
        OpPlan p{op, gen::Stream{op, s.seed, s.pin}, {}, {}, 0, 0};
        if (!single) {
            select::PropertySelection ps = select::select_property(p.stream, s.cases, params, s.shard);
            p.picks = std::move(ps.picks);
            p.outside = std::move(ps.outside);
            p.matched = ps.matched;
            p.drawn = ps.drawn;
        } else if (const std::string id = gen::canonical_id(*single); params.matches(id)) {
            p.matched = p.drawn = 1;
            if (select::in_shard(id, s.shard)) p.picks.push_back({0, *single, id});
        }
        matched += p.matched;
        plan.total_cases += static_cast<int>(p.picks.size());
        plan.ops.push_back(std::move(p));
    }
    // A filter that selects nothing must not let a gate pass having run nothing.
    if (params.active() && matched == 0 && plan.fixtures.before_shard == 0)
        throw InputError("--params '" + s.params +
                         "' selects no case of the selected ops (case ids look like "
                         "'rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,...)'; see `conform coverage`)");
    return plan;
}

const std::vector<std::string>& run_identity_fields() {
    static const std::vector<std::string> f = {"seed", "cases_per_op", "dtype", "impls",
                                               "ops",  "params",       "fixtures", "config"};
    return f;
}

}  // namespace conform::run

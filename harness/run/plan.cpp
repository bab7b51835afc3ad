#include "run/plan.h"

#include <algorithm>
#include <filesystem>

#include <unistd.h>

#include "core/phases.h"
#include "h5/fixture.h"
#include "registry.h"

namespace conform::run {

// ---- implementations ---------------------------------------------------------------

Chosen* ImplSet::find(const std::string& name) {
    for (auto& c : impls)
        if (c.name == name) return &c;
    return nullptr;
}

uint64_t default_plugin_memory() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const uint64_t half = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 2 : 0;
    const uint64_t cap = uint64_t(16) << 30;
    return half > 0 && half < cap ? half : cap;
}

namespace {

worker::WorkerSpec spec_for(const ImplRequest& r, worker::WorkerSpec::Kind kind, const std::string& target) {
    worker::WorkerSpec w;
    w.kind = kind;
    w.target = target;
    w.call_timeout_s = r.call_timeout_s;
    w.limits.memory_bytes = r.worker_memory ? r.worker_memory
                                            : (kind == worker::WorkerSpec::Kind::command ? 0 : default_plugin_memory());
    w.limits.cpu_seconds = r.worker_cpu_s;
    w.seed = r.seed;
    w.repeat_fraction = r.repeat_fraction;
    return w;
}

std::unique_ptr<worker::WorkerImpl> start_worker(const worker::WorkerSpec& spec, DType dtype, bool named) {
    try {
        return worker::WorkerImpl::start(spec, dtype);
    } catch (const worker::StartError& e) {
        if (e.bad_input) throw InputError(e.what());
        (void)named;
        throw UnavailableError(e.what());
    }
}

}  // namespace

ImplSet choose_implementations(const ImplRequest& r) {
    ImplSet set;
    // Workers first: their names come from their hello.
    std::vector<std::unique_ptr<worker::WorkerImpl>> workers;
    auto add_worker = [&](worker::WorkerSpec::Kind kind, const std::string& target) {
        auto w = start_worker(spec_for(r, kind, target), r.options.dtype, true);
        const std::string& n = w->hello().name;
        if (find_implementation(n))
            throw InputError(w->spec().flag() + ": its name '" + n +
                             "' is an in-repo implementation's; give it another name (its hello, or the plugin's table)");
        for (const auto& o : workers)
            if (o->hello().name == n)
                throw InputError(w->spec().flag() + ": its name '" + n + "' is also the name of " + o->spec().flag());
        workers.push_back(std::move(w));
    };
    std::vector<std::string> libs_seen;  // the same file named twice is loaded once
    for (const auto& lib : r.impl_libs) {
        std::error_code ec;
        const std::string real = std::filesystem::weakly_canonical(lib, ec).string();
        if (std::find(libs_seen.begin(), libs_seen.end(), real) != libs_seen.end()) continue;
        libs_seen.push_back(real);
        add_worker(worker::WorkerSpec::Kind::plugin, lib);
    }
    for (const auto& cmd : r.impl_cmds) add_worker(worker::WorkerSpec::Kind::command, cmd);
    for (const auto& fds : r.impl_fds) add_worker(worker::WorkerSpec::Kind::attached, fds);

    std::vector<std::string> names = r.names;
    // Given workers, the run is about them: the in-repo ones only when named.
    if (names.empty())
        for (const auto& w : workers) names.push_back(w->hello().name);
    if (names.empty())
        for (const auto& e : implementations())
            if (!e.by_name) names.push_back(e.name);
    for (const auto& n : names) {
        auto wit = std::find_if(workers.begin(), workers.end(), [&](const auto& w) { return w && w->hello().name == n; });
        if (wit != workers.end()) {
            worker::WorkerImpl* raw = wit->get();
            const std::string flags = " " + raw->spec().flag();
            set.impls.push_back({n, std::move(*wit), flags, raw});
            continue;
        }
        const ImplEntry* e = find_implementation(n);
        if (!e) {
            std::string known = "see `conform list`";
            if (!workers.empty()) {
                known += "; the workers given are:";
                for (const auto& w : workers)
                    if (w) known += " " + w->hello().name;
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
        if (r.isolate) {
            worker::WorkerSpec spec = spec_for(r, worker::WorkerSpec::Kind::builtin, n);
            auto w = start_worker(spec, r.options.dtype, r.names_explicit);
            worker::WorkerImpl* raw = w.get();
            set.impls.push_back({n, std::move(w), " --isolate", raw});
            continue;
        }
        try {
            set.impls.push_back({n, e->create(r.options), "", nullptr});
        } catch (const std::exception& ex) {
            // (e.g. a dtype it does not run: scalar is float32 only)
            if (r.names_explicit) throw UnavailableError("implementation '" + n + "' cannot run: " + ex.what());
            set.skipped.push_back(n + ": " + ex.what());
        }
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
    // A run pinned to a model is about that model: the set (of other
    // models) joins when named (--fixtures fixtures). Workers and plugins
    // get it like every implementation.
    sel.paths = o.fixtures;
    sel.by_default = sel.paths.empty() && o.default_fixtures && o.case_id.empty() && !o.pin;
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
            std::vector<Case> cases;
            {
                phases::Scope read("read fixtures");
                cases = h5::read_fixture(f);
            }
            for (Case& c : cases) {
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
    // Layer-major, so that a run holds one layer of a checkpoint at a time.
    std::vector<int64_t> layers = {-1};
    if (single && single->layer >= 0) {
        if (!s.real)
            throw InputError("--case: '" + s.case_id + "' is a case of layer " + std::to_string(single->layer) +
                             " of a checkpoint: replay it with --weights PATH (and the flags its replay line gives)");
        if (single->model_inputs != s.real->model_inputs())
            throw InputError("--case: '" + s.case_id + "' takes " + (single->model_inputs ? "the model's" : "drawn") +
                             " inputs: replay it " + (single->model_inputs ? "with" : "without") + " --inputs model");
        single->real = s.real->slot(single->layer);  // InputError for a layer the checkpoint lacks
        layers = {single->layer};
    } else if (single && s.real) {
        throw InputError("--case: '" + s.case_id + "' has no layer=N: it is not a case of --weights " +
                         s.real->options().path);
    } else if (s.real) {
        layers = s.real->layers();
    }
    std::vector<std::pair<int64_t, Op>> streams;
    for (int64_t layer : layers)
        for (Op op : ops) streams.emplace_back(layer, op);
    for (const auto& [layer, op] : streams) {
        // Another draw per layer after the first: with drawn inputs, an op
        // without weights (rope, attention) would otherwise repeat the same cases.
        const uint64_t seed = layer > 0 ? s.seed ^ (0x9E3779B97F4A7C15ull * static_cast<uint64_t>(layer)) : s.seed;
        // A checkpoint's layer takes its own config (a sliding or a full layer: ModelConfig::layer_block).
        std::optional<BlockConfig> pin = s.pin;
        if (layer >= 0 && pin) pin = s.real->model().pattern.layer(*pin, layer);
        gen::Stream stream{op, seed, pin, layer >= 0 ? s.real->slot(layer) : nullptr, s.max_rows};
        OpPlan p{op, layer, std::move(stream), {}, {}, 0, 0, {}};
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
    // Nor a selection without a case (--cases 0 and no fixture): a gate that
    // ran nothing must not pass.
    if (matched == 0 && plan.fixtures.before_shard == 0)
        throw InputError("the selection has no case: " + std::to_string(s.cases) +
                         " property cases per op and no fixture case of the selected ops (--cases N, --fixtures PATH)");
    return plan;
}

void plan_for(Plan& plan, const ImplSet& impls) {
    const Selection& s = plan.selection;
    if (!s.case_id.empty()) return;  // one case, offered to each implementation that declares its twists
    const select::ParamFilter params(s.params);
    std::vector<OpPlan> out;
    for (OpPlan& p : plan.ops) {
        // The implementations by what they declare for this op, in the order they were named.
        std::vector<std::pair<TwistSet, std::vector<std::string>>> spaces;
        for (const Chosen& c : impls.impls) {
            const TwistSet declared = c.impl->twists(p.op);
            auto it = std::find_if(spaces.begin(), spaces.end(), [&](const auto& sp) { return sp.first == declared; });
            if (it == spaces.end()) spaces.push_back({declared, {c.name}});
            else it->second.push_back(c.name);
        }
        if (spaces.size() <= 1 && (spaces.empty() || spaces[0].first == p.stream.twists)) {
            out.push_back(std::move(p));
            continue;
        }
        for (auto& [declared, names] : spaces) {
            OpPlan q = p;
            q.impls = names;
            if (declared != p.stream.twists) {
                q.stream.twists = declared;
                select::PropertySelection ps = select::select_property(q.stream, s.cases, params, s.shard);
                q.picks = std::move(ps.picks);
                q.outside = std::move(ps.outside);
                q.matched = ps.matched;
                q.drawn = ps.drawn;
            }
            out.push_back(std::move(q));
        }
    }
    plan.ops = std::move(out);
    plan.total_cases = static_cast<int>(plan.fixtures.cases.size());
    for (const OpPlan& p : plan.ops) plan.total_cases += static_cast<int>(p.picks.size());
}

}  // namespace conform::run

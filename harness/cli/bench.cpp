// conform bench: flags → bench::Request → bench::run → the table or JSON
// (harness/bench/bench.h says what is measured and how it is checked).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <thread>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "config/presets.h"
#include "registry.h"
#include "run/plan.h"
#include "worker/client.h"

namespace conform::cli {

namespace {

struct Options {
    std::string impls;  // default simd,torch (torch and the plugins with --impl-lib)
    std::string ops = "all";
    config::ConfigOptions config;  // default: the tinyllama-1.1b preset
    std::string tokens = "1,64,512";
    std::string dtypes = "f32,bf16";
    int64_t context = 512;
    double min_time = 1.0;
    int min_reps = 5;
    int max_reps = 200;
    int threads = 0;
    WorkerFlags workers;
    double settle_ms = 2;
    std::string simd_target;
    bool json = false;
};

int run_bench(const Options& o) {
    config::ModelConfig model;
    try {
        model = config::resolve_config(o.config, config::find_preset("tinyllama-1.1b")->model());
    } catch (const config::ConfigError& e) {
        std::cerr << "conform bench: " << e.what() << "\n";
        return kUsage;
    }
    std::vector<Op> ops;
    if (o.ops == "all") ops.assign(kAllOps.begin(), kAllOps.end());
    for (const auto& name : o.ops == "all" ? std::vector<std::string>{} : split_list(o.ops)) {
        auto op = parse_op(name);
        if (!op) {
            std::cerr << "conform bench: --op: unknown op '" << name << "'\n";
            return kUsage;
        }
        ops.push_back(*op);
    }
    std::vector<int64_t> tokens;
    for (const auto& t : split_list(o.tokens)) {
        try {
            tokens.push_back(std::stoll(t));
        } catch (const std::exception&) {
            tokens.push_back(0);
        }
        if (tokens.back() <= 0) {
            std::cerr << "conform bench: --tokens: expected positive counts, found '" << t << "'\n";
            return kUsage;
        }
    }
    std::vector<DType> dtypes;
    for (const auto& d : split_list(o.dtypes)) {
        auto dt = parse_dtype(d);
        if (!dt || *dt == DType::f16) {
            std::cerr << "conform bench: --dtype: expected f32 or bf16, found '" << d << "'\n";
            return kUsage;
        }
        dtypes.push_back(*dt);
    }
    // Workers (--impl-lib, --impl-cmd, --impl-fd): each a process, timed per round trip.
    run::ImplRequest wr;
    apply_worker_flags(o.workers, wr);
    wr.names = {"-"};        // only the workers: no in-repo implementation is made here
    wr.repeat_fraction = 0;  // bench checks every output itself; a repeated call would be timed
    std::vector<std::shared_ptr<worker::WorkerImpl>> workers;
    {
        run::ImplRequest only = wr;
        only.names.clear();
        if (only.has_workers()) {
            run::ImplSet set = run::choose_implementations(only);
            for (auto& c : set.impls)
                if (c.worker) {
                    c.impl.release();
                    workers.emplace_back(c.worker);
                }
        }
    }
    auto find_worker = [&](const std::string& n) -> std::shared_ptr<worker::WorkerImpl> {
        for (const auto& w : workers)
            if (w->hello().name == n) return w;
        return nullptr;
    };
    // Given only workers, the workers against torch.
    std::string impl_list = o.impls;
    if (impl_list.empty()) {
        impl_list = "simd,torch";
        if (!workers.empty()) {
            impl_list = "torch";
            for (const auto& w : workers) impl_list += "," + w->hello().name;
        }
    }
    const std::vector<std::string> impls = split_list(impl_list == "all" ? "simd,torch,scalar" : impl_list);
    // torch, scalar (through the interface), plugins, and every implementation with a bench op.
    std::string benched = "torch, scalar";
    for (const auto& e : implementations())
        if (e.bench) benched += ", " + e.name;
    for (const auto& i : impls) {
        const ImplEntry* e = find_implementation(i);
        if (i != "torch" && i != "scalar" && !(e && e->bench) && !find_worker(i)) {
            std::cerr << "conform bench: --impl: '" << i << "' is not benchmarked (" << benched
                      << (workers.empty() ? "" : ", or a worker of --impl-lib / --impl-cmd / --impl-fd") << ")\n";
            return kUsage;
        }
    }
    bench::Request r;
    r.model = model;
    r.ops = ops;
    r.tokens = tokens;
    r.dtypes = dtypes;
    r.impls = impls;
    r.workers = workers;
    r.context = o.context;
    r.min_time = o.min_time;
    r.min_reps = o.min_reps;
    r.max_reps = o.max_reps;
    r.threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    r.settle_ms = o.settle_ms;
    r.simd_target = o.simd_target;
    bench::Result res;
    try {
        res = bench::run(r, o.json ? std::cerr : std::cout);
    } catch (const bench::Unavailable& e) {
        std::cerr << "conform bench: " << e.what() << "\n";
        return kUnavailable;
    }
    if (o.json)
        std::cout << bench::to_json(r, res).dump(2) << "\n";
    else
        std::cout << bench::table(r, res);
    const std::vector<std::string> bad = bench::problems(res);
    for (const std::string& p : bad) std::cerr << "conform bench: " << p << "\n";
    return bad.empty() ? kConform : kNonconformance;
}

}  // namespace

Command add_bench(CLI::App& app) {
    auto o = std::make_shared<Options>();
    CLI::App* sub = app.add_subcommand(
        "bench",
        "time each op per implementation against LibTorch f32, with the machine's ceilings measured alongside");
    sub->add_option("--impl", o->impls,
                    "simd, torch, scalar, cuda, a plugin's name, comma-separated, or all (default simd,torch; with "
                    "--impl-lib: torch and the plugins)");
    add_worker_flags(*sub, o->workers, false);
    sub->add_option("--op", o->ops, "ops, comma-separated, or all (default all; decode is one token after --context)");
    // --preset, --config, --d-model, ... (config/options.h); default the tinyllama-1.1b preset
    config::add_config_options(*sub, o->config);
    sub->add_option("--tokens", o->tokens, "token counts T, comma-separated (default 1,64,512)");
    sub->add_option("--dtype", o->dtypes, "simd storage dtypes, comma-separated (default f32,bf16; torch is f32)");
    sub->add_option("--context", o->context, "decode, and attention at T=1: tokens already cached (default 512)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--min-time", o->min_time, "seconds of timed rounds per op and T, at least (default 1)");
    sub->add_option("--min-reps", o->min_reps, "timed rounds per op and T, at least (default 5)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--max-reps", o->max_reps, "timed rounds per op and T, at most (default 200)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--threads", o->threads, "threads for every implementation (default: every core)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--simd-target", o->simd_target, "simd: this compiled Highway target instead of the best");
    sub->add_option("--settle-ms", o->settle_ms, "pause before each timed run, in ms (default 2)")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--json", o->json, "print the results as JSON (schema conform-bench/1) instead of the table");
    return {sub, [o] { return run_bench(*o); }};
}

}  // namespace conform::cli

// conform bench: flags → bench::resolve → bench::run → the table or JSON
// (harness/bench/bench.h says what is measured and how it is checked).
#include <iostream>
#include <memory>

#include "bench/bench.h"
#include "cli/commands.h"
#include "cli/flags.h"

namespace conform::cli {

namespace {

struct Options {
    bench::Flags f;
    bool json = false;
};

int run_bench(const Options& o) {
    const std::optional<bench::Request> r = bench::resolve(o.f, std::cerr);
    if (!r) return kUsage;
    bench::Result res;
    try {
        res = bench::run(*r, o.json ? std::cerr : std::cout);
    } catch (const bench::Unavailable& e) {
        std::cerr << "conform bench: " << e.what() << "\n";
        return kUnavailable;
    }
    if (o.json)
        std::cout << bench::to_json(*r, res).dump(2) << "\n";
    else
        std::cout << bench::table(*r, res);
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
    sub->add_option("--impl", o->f.impls,
                    "simd, torch, scalar, cuda, a plugin's name, comma-separated, or all (default simd,torch; with "
                    "--impl-lib: torch and the plugins)");
    add_worker_flags(*sub, o->f.workers, false);
    sub->add_option("--op", o->f.ops, "ops, comma-separated, or all (default all but paged_attention; decode is one token after --context; "
                    "paged_attention a decode batch of T sequences of --context keys, by name only)");
    // --preset, --config, --d-model, ... (config/options.h); default the tinyllama-1.1b preset
    config::add_config_options(*sub, o->f.config);
    sub->add_option("--tokens", o->f.tokens, "token counts T, comma-separated (default 1,64,512)");
    sub->add_option("--dtype", o->f.dtypes, "simd storage dtypes, comma-separated (default f32,bf16; torch is f32)");
    sub->add_option("--context", o->f.context, "decode, paged_attention, and attention at T=1: tokens already cached (default 512)")
        ->check(nonnegative());
    sub->add_option("--min-time", o->f.min_time, "seconds of timed rounds per op and T, at least (default 1)");
    sub->add_option("--min-reps", o->f.min_reps, "timed rounds per op and T, at least (default 5)")
        ->check(positive());
    sub->add_option("--max-reps", o->f.max_reps, "timed rounds per op and T, at most (default 200)")
        ->check(positive());
    sub->add_option("--threads", o->f.threads, "threads for every implementation (default: every core; at most the CPUs this process may use)")
        ->check(machine_threads());
    sub->add_option("--simd-target", o->f.simd_target, "simd: this compiled Highway target instead of the best");
    sub->add_option("--settle-ms", o->f.settle_ms, "pause before each timed run, in ms (default 2)")
        ->check(nonnegative());
    sub->add_flag("--json", o->json, "print the results as JSON (schema conform-bench/1) instead of the table");
    return {sub, [o] { return run_bench(*o); }};
}

}  // namespace conform::cli

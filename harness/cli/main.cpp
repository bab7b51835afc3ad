// conform — the command. Parsing and wiring only; the work is in the libraries.
#include <CLI/CLI.hpp>
#include <iostream>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "registry.h"

using namespace conform;
using namespace conform::cli;

namespace {

constexpr uint64_t kDefaultSeed = 20261129;

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"conform — differential conformance testing of Llama-family decoder blocks against a LibTorch reference"};
    app.require_subcommand(0, 1);

    std::string impl_list, op_list, seed_str, dtype_str = "f32";
    GateOptions g;
    app.add_option("--impl", impl_list, "implementations, comma-separated, or 'all' (default: every available one)");
    app.add_option("--op", op_list, "ops, comma-separated, or 'all': rmsnorm,rope,qk_norm,attention,swiglu,block,decode");
    app.add_option("--cases", g.cases, "property cases per op (default 100)")->check(CLI::NonNegativeNumber);
    app.add_option("--seed", seed_str, "seed for property cases, or 'random' (default: a fixed seed, printed)");
    app.add_option("--dtype", dtype_str, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    app.add_option("--out", g.out, "directory for reports (default reports/)");
    app.add_flag("--json", g.json, "print the JSON report on stdout instead of the table");
    app.add_flag("--quiet", g.quiet, "no progress or summary lines beyond the table");
    app.add_option("--case", g.case_id, "replay one property case by its canonical id, e.g. 'rope(T=7,...)'");
    app.add_option("--simd-target", g.simd_target,
                   "simd: run this compiled Highway target instead of the best one (see `conform list`)");
    app.add_option("--threads", g.threads, "threads per implementation (default: theirs; simd uses every core)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--fixtures", g.fixtures,
                   "fixture files or directories (HDF5, fixtures/SCHEMA.md; directories recursively), comma-separated "
                   "or repeated; replaces the default fixtures/")
        ->delimiter(',');
    bool no_default_fixtures = false;
    app.add_flag("--no-default-fixtures", no_default_fixtures, "do not run the repo's fixtures/ regression set");
    app.add_option("--fixture-case", g.fixture_case, "run only the fixture case(s) whose group has this name");
    app.add_option("--save-failures", g.save_failures,
                   "write each failing property case, shrunk, as a one-case fixture into DIR");
    app.add_flag("--force", g.force, "let --save-failures overwrite existing files");
    app.add_option("--impl-lib", g.impl_libs,
                   "an out-of-tree implementation to test (a shared library built against conform/plugin.h; "
                   "repeatable). Its name is usable in --impl; without --impl only the plugins run")
        ->allow_extra_args(false);
    CLI::Option* isolate = app.add_flag_callback(
        "--isolate", [&g] { g.isolation = GateOptions::Isolation::all; },
        "run every implementation call in a child process, so a crash fails the case (the default for --impl-lib)");
    app.add_flag_callback(
           "--no-isolate", [&g] { g.isolation = GateOptions::Isolation::none; },
           "run plugin calls in this process: faster, but a crash in the plugin ends conform")
        ->excludes(isolate);

    // Subcommands, in the order `conform --help` lists them.
    std::vector<Command> commands = {
        add_list(app),
        add_generate(app),
        add_mutants(app),
        add_bench(app),
    };

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        const int rc = app.exit(e);
        return rc == 0 ? kConform : kUsage;
    }

    for (const auto& c : commands)
        if (c.app->parsed()) return c.run();
    g.default_fixtures = !no_default_fixtures;

    if (!impl_list.empty() && impl_list != "all") {
        g.impls = split(impl_list);
        g.impls_explicit = true;
    }
    if (!op_list.empty() && op_list != "all") {
        for (const auto& name : split(op_list)) {
            auto op = parse_op(name);
            if (!op) {
                std::cerr << "conform: --op: unknown op '" << name << "' (ops: rmsnorm, rope, qk_norm, attention, swiglu, block, decode)\n";
                return kUsage;
            }
            g.ops.push_back(*op);
        }
    }
    auto dt = parse_dtype(dtype_str);
    if (!dt) {
        std::cerr << "conform: --dtype: unknown dtype '" << dtype_str << "' (f32, bf16, f16)\n";
        return kUsage;
    }
    g.dtype = *dt;
    if (seed_str.empty()) {
        g.seed = kDefaultSeed;
    } else if (seed_str == "random") {
        g.seed = std::random_device{}() & 0xFFFFFFFFu;
    } else {
        try {
            size_t used = 0;
            g.seed = std::stoull(seed_str, &used);
            if (used != seed_str.size()) throw std::invalid_argument("trailing");
        } catch (const std::exception&) {
            std::cerr << "conform: --seed: expected a number or 'random', found '" << seed_str << "'\n";
            return kUsage;
        }
    }
    return run_gate(g);
}

// conform — the command. Parsing and wiring only; the work is in the libraries.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "registry.h"
#include "report/formats.h"

using namespace conform;
using namespace conform::cli;

int main(int argc, char** argv) {
    CLI::App app{"conform — differential conformance testing of Llama-family decoder blocks against a LibTorch reference"};
    app.require_subcommand(0, 1);

    SelectionFlags sf;
    GateOptions g;
    app.add_option("--impl", sf.impls, "implementations, comma-separated, or 'all' (default: every available one)");
    app.add_option("--op", sf.ops, "ops, comma-separated, or 'all': rmsnorm,rope,qk_norm,attention,swiglu,block,decode");
    app.add_option("--cases", g.cases, "property cases per op (default 100)")->check(CLI::NonNegativeNumber);
    app.add_option("--seed", sf.seed, "seed for property cases, or 'random' (default: a fixed seed, printed)");
    app.add_option("--dtype", sf.dtype, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    app.add_option("--params", g.params,
                   "only cases whose canonical id matches this regex (e.g. 'layout=interleaved'); property cases "
                   "are drawn until --cases match");
    app.add_option("--shard", sf.shard,
                   "run shard INDEX/TOTAL of the cases (0-based; or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS); "
                   "`conform merge-reports` joins the shards' reports");
    app.add_option("--out", g.out, "directory for reports (default reports/)");
    std::string report_list;
    app.add_option("--report", report_list,
                   "report formats written to --out, comma-separated: json (conform.json), junit (conform.xml), md "
                   "(conform.md), html (conform.html), or all (default json)");
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

    // --preset / --config / overrides: property cases in that model's
    // conventions and head geometry. d_model and ffn are divided (by a power
    // of two, to d_model <= 256) so that 100 cases per op stay fast; the
    // repo's fixtures, of other models, then run only when named (--fixtures).
    config::ConfigOptions model_flags;
    config::add_config_options(app, model_flags,
                               "Property cases then take the model's conventions (layout, theta, scaling, rotary dim, "
                               "QK-norm, eps) and heads, kv heads, head_dim; d_model and ffn are divided by a power "
                               "of two down to d_model <= 256 so that 100 cases stay fast; tokens, positions and "
                               "inputs are still drawn. The repo's fixtures then run only when named (--fixtures)");

    // Subcommands, in the order `conform --help` lists them.
    std::vector<Command> commands = {
        add_list(app),
        add_generate(app),
        add_mutants(app),
        add_bench(app),
        add_coverage(app),
        add_merge_reports(app),
        add_forward(app),
        add_anatomy(app),
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
    if (!report_list.empty()) {
        std::string err;
        auto formats = parse_report_formats(report_list, &err);
        if (!formats) {
            std::cerr << "conform: --report: " << err << "\n";
            return kUsage;
        }
        g.reports = *formats;
    }
    if (!apply_model_flags(model_flags, g) || !apply_selection_flags(sf, g)) return kUsage;
    return run_gate(g);
}

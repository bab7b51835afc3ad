// conform generate: flags → run::generate_fixture (harness/run/generate.h:
// golden fixture cases from our reference, in float64) → the line saying
// what was written.
#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/flags.h"
#include "config/presets.h"
#include "core/case.h"
#include "run/generate.h"

namespace conform::cli {

namespace {

struct GenerateOptions {
    run::GenerateRequest r;
    int64_t prefill = -1;
    bool list_presets = false;
    CLI::Option* o_prefill = nullptr;
    CLI::Option* o_scale_down = nullptr;
};

int run_generate(const GenerateOptions& o) {
    if (o.list_presets) {
        for (const auto& p : config::presets())
            std::cout << fmt::format("{:<16} {}\n{:<16}   {}\n", p.name, config::describe(p.config), "", p.source);
        return kConform;
    }
    run::GenerateRequest r = o.r;
    if (o.o_prefill->count()) r.prefill = o.prefill;
    r.scale_down_given = o.o_scale_down->count() > 0;
    run::Generated g;
    try {
        g = run::generate_fixture(r);
    } catch (const InputError& e) {
        std::cerr << "conform generate: " << e.what() << "\n";
        return kUsage;
    }
    std::cout << fmt::format("generate: wrote {} ({} {} case{}, {}, {:.1f} KiB)\n", r.out, r.cases, r.op,
                             r.cases == 1 ? "" : "s", g.described, g.kib);
    return kConform;
}

}  // namespace

Command add_generate(CLI::App& app) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App* sub = app.add_subcommand("generate", "write golden fixture cases from the reference (float64, every block tap)");
    sub->add_option("--op", o->r.op, "the op: " + op_names());
    // --preset NAME, --config FILE, --d-model, --heads (rope, qk_norm: heads in x), ... (config/options.h)
    config::add_config_options(*sub, o->r.config);
    sub->add_flag("--presets", o->list_presets, "list the presets and exit");
    sub->add_option("--weights", o->r.weights,
                    "a checkpoint (HF safetensors, GGUF): the cases take --layer's real weights and its full sizes");
    sub->add_option("--layer", o->r.layer, "with --weights: the layer (default 0)")->check(nonnegative());
    sub->add_option("--inputs", o->r.inputs,
                    "with --weights: drawn (default) or model (the layer's real residual stream and activations)");
    o->o_scale_down = sub->add_option("--scale-down", o->r.scale_down, "divide d_model and ffn_dim by K (files stay small; heads, head_dim, theta, eps kept)");
    sub->add_option("--tokens", o->r.tokens, "T: tokens (attention: queries) per case (default 4)");
    sub->add_option("--keys", o->r.keys, "attention: S keys, the queries being the last T (default T)");
    sub->add_option("--positions", o->r.start, "position of the first token (attention: first key) (default 0)");
    o->o_prefill = sub->add_option("--prefill", o->prefill, "decode: tokens processed together first (default T/2)");
    sub->add_option("--mag", o->r.mag, "input magnitude (default 1)");
    sub->add_option("--outliers", o->r.outliers, "input channels scaled x50 (default 0)");
    sub->add_option("--cases", o->r.cases, "cases in the file, seeds S, S+1, ... (default 1)");
    sub->add_option("--seed", o->r.seed, "seed of the first case's inputs (default 1)");
    sub->add_option("--description", o->r.description, "the cases' description attribute");
    sub->add_option("--out", o->r.out, "the file to write");
    sub->add_flag("--force", o->r.force, "overwrite --out if it exists");
    return {sub, [o] { return run_generate(*o); }};
}

}  // namespace conform::cli

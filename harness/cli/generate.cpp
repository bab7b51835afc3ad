// conform generate: golden fixture files from our reference, in float64.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "config/presets.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "run/golden.h"
#include "reference/reference.h"
#include "run/real.h"

namespace conform::cli {

namespace {

struct GenerateOptions {
    std::string op, out, description;
    config::ConfigOptions config;  // --preset, --config, and the flags overriding them
    int64_t scale_down = 1;
    int64_t tokens = 4, keys = 0, start = 0, prefill = -1, outliers = 0;
    double mag = 1.0;
    int cases = 1;
    uint64_t seed = 1;
    bool force = false, list_presets = false;
    std::string weights, inputs = "drawn";  // a checkpoint: the case takes --layer's real weights
    int64_t layer = 0;

    CLI::Option* o_prefill = nullptr;
    CLI::Option* o_scale_down = nullptr;
};

// The config sizes an op's inputs are built from (a superset of what the
// schema requires in the file: rope's x needs a head count to have a width).
// (The dims of its inputs, conform/op_info.h.)
std::vector<std::pair<const char*, int64_t BlockConfig::*>> sizes_needed(Op op) {
    using P = std::pair<const char*, int64_t BlockConfig::*>;
    const OpInfo& info = op_info(op);
    std::vector<P> v;
    if (info.has_dim(Dim::D)) v.push_back(P{"d-model", &BlockConfig::d_model});
    if (info.has_dim(Dim::N) || info.reads("n_heads")) v.push_back(P{"n-heads", &BlockConfig::n_heads});
    if (info.reads("n_kv_heads")) v.push_back(P{"n-kv-heads", &BlockConfig::n_kv_heads});
    if (info.reads("head_dim")) v.push_back(P{"head-dim", &BlockConfig::head_dim});
    if (info.has_dim(Dim::F)) v.push_back(P{"ffn-dim", &BlockConfig::ffn_dim});
    return v;
}

// The config as far as the op uses it: "H=2 hd=128 layout=neox theta=500000".
std::string describe_for(Op op, const BlockConfig& c) {
    if (op_info(op).uses(kResidual)) return config::describe(c);
    std::ostringstream s;
    auto add = [&](const std::string& kv) { s << (s.tellp() > 0 ? " " : "") << kv; };
    for (const auto& [flag, field] : sizes_needed(op)) {
        const std::string f = flag;
        const char* key = f == "d-model" ? "D" : f == "n-heads" ? "H" : f == "n-kv-heads" ? "KV" : f == "head-dim" ? "hd" : "F";
        add(std::string(key) + "=" + std::to_string(c.*field));
    }
    for (const auto& f : required_config(op)) {
        std::ostringstream v;
        if (f == "rope_layout") v << "layout=" << to_string(c.rope_layout);
        else if (f == "rope_theta") v << "theta=" << c.rope_theta;
        else if (f == "norm_eps") v << "eps=" << c.norm_eps;
        else continue;  // the sizes are above
        add(v.str());
    }
    if (op == Op::rope && c.rotary_dim > 0 && c.rotary_dim != c.head_dim) add("rotary=" + std::to_string(c.rotary_dim));
    if (op == Op::rope && c.rope_scaling.type != RopeScalingType::none)
        add("scaling=" + config::describe(c.rope_scaling));
    return s.str();
}

int run_generate(const GenerateOptions& o) {
    if (o.list_presets) {
        for (const auto& p : config::presets())
            std::cout << fmt::format("{:<16} {}\n{:<16}   {}\n", p.name, config::describe(p.config), "", p.source);
        return kConform;
    }
    auto usage = [](const std::string& msg) {
        std::cerr << "conform generate: " << msg << "\n";
        return int(kUsage);
    };
    if (o.op.empty()) return usage("--op is required (" + op_names() + ")");
    if (o.out.empty()) return usage("--out FILE is required");
    const auto op = parse_op(o.op);
    if (!op) return usage("--op: unknown op '" + o.op + "' (ops: " + op_names() + ")");

    // ---- the config: preset, then --config, scaled, then the flags given -------------
    if (o.scale_down < 1) return usage("--scale-down must be >= 1");
    // ---- the cases' shape, checked before any weight is read
    const int64_t T = o.tokens;
    const int64_t S = o.keys > 0 ? o.keys : T;
    if (T < 1) return usage("--tokens must be >= 1");
    if (o.start < 0) return usage("--positions must be >= 0");
    if (*op == Op::attention && S < T) return usage("--keys must be >= --tokens (the queries are the last keys)");
    const int64_t prefill = o.o_prefill->count() ? o.prefill : T / 2;
    if (*op == Op::decode && (prefill < 0 || prefill > T)) return usage("--prefill must be in [0, --tokens]");
    if (o.cases < 1) return usage("--cases must be >= 1");

    std::error_code ec;
    if (!o.force && std::filesystem::exists(o.out, ec))
        return usage(o.out + ": exists (use --force to overwrite)");

    config::ModelConfig model;
    // A checkpoint: its configuration at full size, and one layer's weights
    // (and, with --inputs model, its real activations) in every case.
    std::shared_ptr<run::RealModel> real;
    std::shared_ptr<const gen::RealLayer> slot;
    if (o.inputs != "drawn" && o.inputs != "random" && o.inputs != "model")
        return usage("--inputs: expected drawn or model, found '" + o.inputs + "'");
    if (!o.weights.empty()) {
        if (o.o_scale_down->count()) return usage("--scale-down: --weights fixes the sizes");
        run::RealOptions ro;
        ro.path = o.weights;
        ro.layers = std::to_string(o.layer);
        ro.model_inputs = o.inputs == "model";
        ro.n_tokens = std::max<int64_t>(o.tokens, o.keys);
        ro.start = o.start;
        ro.overrides = o.config;
        try {
            real = run::RealModel::open(ro, nullptr);
            real->load(o.layer);
            slot = real->slot(o.layer);
        } catch (const InputError& e) {
            return usage(e.what());
        }
        model = real->model();
    } else {
        if (o.inputs == "model") return usage("--inputs model: only with --weights PATH");
        try {
            model = config::resolve_config(o.config, {}, false);
        } catch (const config::ConfigError& e) {
            return usage(e.what());
        }
    }
    BlockConfig cfg = real ? model.block : config::scale_down(model.block, o.scale_down);
    // --scale-down divides the preset's or file's widths, not a width given as a flag.
    if (!real && o.config.o_d_model->count()) cfg.d_model = o.config.d_model;
    if (!real && o.config.o_ffn->count()) cfg.ffn_dim = o.config.ffn;
    const std::string preset = o.config.o_preset->count() ? o.config.preset : std::string();
    std::string origin = model.name.empty() ? "custom" : model.name;
    if (o.scale_down > 1) origin += fmt::format(" (d_model, ffn_dim / {})", o.scale_down);
    if (real) origin += fmt::format(" layer {}{}", o.layer, o.inputs == "model" ? " (model inputs)" : "");
    if (!op_info(*op).uses(kHeads)) cfg.n_kv_heads = cfg.n_heads;  // heads in x only
    for (const auto& [flag, field] : sizes_needed(*op))
        if (cfg.*field <= 0)
            return usage(fmt::format("--op {} needs --{} (or a --preset or --config)", o.op, flag));

    // ---- the cases: inputs drawn as property cases are, golden outputs from the reference
    std::vector<h5::FixtureCase> out;
    try {
        for (int i = 0; i < o.cases; ++i) {
            gen::CaseSpec s = gen::spec_at(*op, cfg, T, S, o.start, o.seed + static_cast<uint64_t>(i));
            s.prefill = *op == Op::decode ? prefill : 0;
            s.mag = o.mag;
            s.outliers = o.outliers;
            if (slot) {
                s.layer = o.layer;
                s.real = slot;
                s.model_inputs = slot->model_inputs;
                if (s.model_inputs) s.mag = 1, s.outliers = 0;  // the stream is what it is
            }
            h5::FixtureCase fc;
            fc.c = gen::materialize(s);
            fc.c.group = "case_" + std::to_string(i);
            fc.c.description = !o.description.empty()
                                   ? o.description
                                   : fmt::format("{} {}: {}, T={}{}, first position {}", origin, o.op,
                                                 describe_for(*op, cfg), T,
                                                 *op == Op::attention ? fmt::format(" S={}", S) : std::string(),
                                                 *op == Op::attention ? s.kpos : s.pos);
            validate_case(fc.c);
            fc.c.expected = h5::golden_expected(fc.c);
            fc.attrs["producer"] = "conform generate (expected: LibTorch " + ref::version() + " reference, float64)";
            if (!preset.empty()) fc.attrs["preset"] = preset;
            if (o.config.o_file->count()) fc.attrs["config"] = o.config.file;
            if (real) {
                fc.attrs["weights"] = o.weights;
                fc.attrs["layer"] = o.layer;
                fc.attrs["inputs"] = o.inputs;
            }
            fc.attrs["seed"] = static_cast<int64_t>(s.seed);
            // The inputs are exactly the property case with this id: `conform
            // --case ID` runs the same tensors without the file.
            fc.attrs["case_id"] = fc.c.id;
            out.push_back(std::move(fc));
        }
        h5::write_fixture(o.out, out, o.force);
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    const auto bytes = std::filesystem::file_size(o.out, ec);
    std::cout << fmt::format("generate: wrote {} ({} {} case{}, {}, {:.1f} KiB)\n", o.out, o.cases, o.op,
                             o.cases == 1 ? "" : "s", describe_for(*op, cfg), ec ? 0.0 : double(bytes) / 1024.0);
    return kConform;
}

}  // namespace

Command add_generate(CLI::App& app) {
    auto o = std::make_shared<GenerateOptions>();
    CLI::App* sub = app.add_subcommand("generate", "write golden fixture cases from the reference (float64, every block tap)");
    sub->add_option("--op", o->op, "the op: " + op_names());
    // --preset NAME, --config FILE, --d-model, --heads (rope, qk_norm: heads in x), ... (config/options.h)
    config::add_config_options(*sub, o->config);
    sub->add_flag("--presets", o->list_presets, "list the presets and exit");
    sub->add_option("--weights", o->weights,
                    "a checkpoint (HF safetensors, GGUF): the cases take --layer's real weights and its full sizes");
    sub->add_option("--layer", o->layer, "with --weights: the layer (default 0)")->check(CLI::NonNegativeNumber);
    sub->add_option("--inputs", o->inputs,
                    "with --weights: drawn (default) or model (the layer's real residual stream and activations)");
    o->o_scale_down = sub->add_option("--scale-down", o->scale_down, "divide d_model and ffn_dim by K (files stay small; heads, head_dim, theta, eps kept)");
    sub->add_option("--tokens", o->tokens, "T: tokens (attention: queries) per case (default 4)");
    sub->add_option("--keys", o->keys, "attention: S keys, the queries being the last T (default T)");
    sub->add_option("--positions", o->start, "position of the first token (attention: first key) (default 0)");
    o->o_prefill = sub->add_option("--prefill", o->prefill, "decode: tokens processed together first (default T/2)");
    sub->add_option("--mag", o->mag, "input magnitude (default 1)");
    sub->add_option("--outliers", o->outliers, "input channels scaled x50 (default 0)");
    sub->add_option("--cases", o->cases, "cases in the file, seeds S, S+1, ... (default 1)");
    sub->add_option("--seed", o->seed, "seed of the first case's inputs (default 1)");
    sub->add_option("--description", o->description, "the cases' description attribute");
    sub->add_option("--out", o->out, "the file to write");
    sub->add_flag("--force", o->force, "overwrite --out if it exists");
    return {sub, [o] { return run_generate(*o); }};
}

}  // namespace conform::cli

// conform generate's fixture file (run/generate.h).
#include "run/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <sstream>

#include "config/hf_config.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "reference/reference.h"
#include "run/golden.h"
#include "run/real.h"

namespace conform::run {

std::vector<std::pair<const char*, int64_t BlockConfig::*>> sizes_needed(Op op) {
    using P = std::pair<const char*, int64_t BlockConfig::*>;
    const OpInfo& info = op_info(op);
    std::vector<P> v;
    if (info.has_dim(Dim::D)) v.push_back(P{"d-model", &BlockConfig::d_model});
    if (info.has_dim(Dim::N) || info.reads("n_heads")) v.push_back(P{"n-heads", &BlockConfig::n_heads});
    if (info.reads("n_kv_heads")) v.push_back(P{"n-kv-heads", &BlockConfig::n_kv_heads});
    if (info.reads("head_dim")) v.push_back(P{"head-dim", &BlockConfig::head_dim});
    if (info.has_dim(Dim::F)) v.push_back(P{"ffn-dim", &BlockConfig::ffn_dim});
    if (info.reads("kv_lora_rank")) {
        v.push_back(P{"kv-lora-rank", &BlockConfig::kv_lora_rank});
        v.push_back(P{"qk-nope-head-dim", &BlockConfig::qk_nope_head_dim});
        v.push_back(P{"qk-rope-head-dim", &BlockConfig::qk_rope_head_dim});
        v.push_back(P{"v-head-dim", &BlockConfig::v_head_dim});
    }
    return v;
}

// The config as far as the op uses it: "H=2 hd=128 layout=neox theta=500000".
std::string describe_for(Op op, const BlockConfig& c) {
    if (op_info(op).uses(kResidual)) return config::describe(c);
    std::ostringstream s;
    auto add = [&](const std::string& kv) { s << (s.tellp() > 0 ? " " : "") << kv; };
    for (const auto& [flag, field] : sizes_needed(op)) {
        const std::string f = flag;
        const char* key = f == "d-model"            ? "D"
                          : f == "n-heads"          ? "H"
                          : f == "n-kv-heads"       ? "KV"
                          : f == "head-dim"         ? "hd"
                          : f == "kv-lora-rank"     ? "dc"
                          : f == "qk-nope-head-dim" ? "dn"
                          : f == "qk-rope-head-dim" ? "dr"
                          : f == "v-head-dim"       ? "dv"
                                                    : "F";
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

Generated generate_fixture(const GenerateRequest& o) {
    if (o.op.empty()) throw InputError("--op is required (" + op_names() + ")");
    if (o.out.empty()) throw InputError("--out FILE is required");
    const auto op = parse_op(o.op);
    if (!op) throw InputError("--op: unknown op '" + o.op + "' (ops: " + op_names() + ")");

    // ---- the config: preset, then --config, scaled, then the flags given -------------
    if (o.scale_down < 1) throw InputError("--scale-down must be >= 1");
    // ---- the cases' shape, checked before any weight is read
    const int64_t T = o.tokens;
    const int64_t S = o.keys > 0 ? o.keys : T;
    if (T < 1) throw InputError("--tokens must be >= 1");
    if (o.start < 0) throw InputError("--positions must be >= 0");
    if (*op == Op::attention && S < T) throw InputError("--keys must be >= --tokens (the queries are the last keys)");
    const int64_t prefill = o.prefill ? *o.prefill : T / 2;
    if (*op == Op::decode && (prefill < 0 || prefill > T)) throw InputError("--prefill must be in [0, --tokens]");
    if (o.cases < 1) throw InputError("--cases must be >= 1");

    std::error_code ec;
    if (!o.force && std::filesystem::exists(o.out, ec))
        throw InputError(o.out + ": exists (use --force to overwrite)");

    config::ModelConfig model;
    // A checkpoint: its configuration at full size, and one layer's weights
    // (and, with --inputs model, its real activations) in every case.
    std::shared_ptr<RealModel> real;
    std::shared_ptr<const gen::RealLayer> slot;
    if (o.inputs != "drawn" && o.inputs != "random" && o.inputs != "model")
        throw InputError("--inputs: expected drawn or model, found '" + o.inputs + "'");
    if (!o.weights.empty()) {
        if (o.scale_down_given) throw InputError("--scale-down: --weights fixes the sizes");
        RealOptions ro;
        ro.path = o.weights;
        ro.layers = std::to_string(o.layer);
        ro.model_inputs = o.inputs == "model";
        ro.n_tokens = std::max<int64_t>(o.tokens, o.keys);
        ro.start = o.start;
        ro.overrides = o.config;
        real = RealModel::open(ro, nullptr);
        real->load(o.layer);
        slot = real->slot(o.layer);
        model = real->model();
    } else {
        if (o.inputs == "model") throw InputError("--inputs model: only with --weights PATH");
        try {
            model = config::resolve_config(o.config, {}, false);
        } catch (const config::ConfigError& e) {
            throw InputError(e.what());
        }
        if (const std::string why = config::unmodelled_for(model, *op); !why.empty()) throw InputError("--op " + o.op + ": " + why);
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
            throw InputError(fmt::format("--op {} needs --{} (or a --preset or --config)", o.op, flag));

    // ---- the cases: inputs drawn as property cases are, golden outputs from the reference
    std::vector<h5::FixtureCase> out;
    try {
        for (int i = 0; i < o.cases; ++i) {
            gen::CaseSpec s = gen::spec_at(*op, cfg, T, S, o.start, o.seed + static_cast<uint64_t>(i));
            s.prefill = *op == Op::decode ? prefill : 0;
            s.mag = o.mag;
            s.outliers = o.outliers;
            // Bounded before a tensor is drawn, as a case id is (`conform --case`):
            // a width or a length given as a flag may be far past any model's.
            // (Other faults are the case checker's to name, by field, below.)
            if (std::string why; !slot && !gen::parse_case_id(gen::canonical_id(s), &why) &&
                                 why.find("too large") != std::string::npos)
                throw InputError("--op " + o.op + ": " + why.substr(why.find("': ") + 3) + " (" +
                                 describe_for(*op, cfg) + fmt::format(", T={}, S={})", s.T, s.S));
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
        throw InputError(e.what());
    }
    const auto bytes = std::filesystem::file_size(o.out, ec);
    return {describe_for(*op, cfg), ec ? 0.0 : double(bytes) / 1024.0};
}


}  // namespace conform::run

// Dispatch: a Case in, named float64 tensors out.
#include "reference/reference.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "reference/torch_ops.h"

namespace conform::ref {

Precision precision_of(DType d) {
    switch (d) {
        case DType::f32: return Precision::f32;
        case DType::bf16: return Precision::bf16;
        case DType::f16: return Precision::f16;
    }
    return Precision::f32;
}

const char* to_string(Precision p) {
    switch (p) {
        case Precision::f64: return "f64";
        case Precision::f32: return "f32";
        case Precision::bf16: return "bf16";
        case Precision::f16: return "f16";
    }
    return "?";
}

bool Variant::faithful() const { return describe().empty(); }

Variant Variant::with_config(const BlockConfig& meant, const BlockConfig& computed) {
    Variant v;
    v.config = computed;
    // Every field that differs, as "name=value" (the config's table names them).
    std::map<std::string, std::string> was;
    for_each_field(meant, [&](const ConfigField& f, const auto& x) {
        std::ostringstream o;
        if constexpr (is_named_enum<std::decay_t<decltype(x)>>) o << to_string(x);
        else o << x;
        was[f.name] = o.str();
    });
    for_each_field(computed, [&](const ConfigField& f, const auto& x) {
        std::ostringstream o;
        if constexpr (is_named_enum<std::decay_t<decltype(x)>>) o << to_string(x);
        else o << x;
        if (was[f.name] != o.str()) v.edited += (v.edited.empty() ? "" : ", ") + std::string(f.name) + "=" + o.str();
    });
    if (v.edited.empty()) v.edited = "the config as it was";
    return v;
}

std::string Variant::describe() const {
    std::ostringstream o;
    auto sep = [&]() -> std::ostringstream& {
        if (o.tellp() > 0) o << ", ";
        return o;
    };
    if (config) sep() << "config " << edited;
    if (layout) sep() << "rope_layout=" << to_string(*layout);
    if (theta) sep() << "rope_theta=" << *theta;
    if (rope_angle_bf16) sep() << "rope angles rounded to bf16";
    if (rope_cos_sin_bf16) sep() << "rope cos/sin rounded to bf16";
    if (rope_inv_freq_bf16) sep() << "rope inv_freq rounded to bf16";
    if (rope_positions_f16) sep() << "rope positions rounded to f16";
    if (rope_pos_from_start) sep() << "rope positions = positions[0] + row";
    if (scaling) sep() << "rope_scaling=" << to_string(scaling->type) << "(factor " << scaling->factor << ")";
    if (rope_pos_shift) sep() << "positions shifted by " << rope_pos_shift;
    if (decode_pos_shift) sep() << "decode positions shifted by " << decode_pos_shift;
    if (scaling_type) sep() << "rope_scaling type=" << to_string(*scaling_type);
    if (dynamic_at_scaled_context) sep() << "dynamic NTK base at seq_len = original_max_position * factor";
    if (rope_twice) sep() << "rope applied twice";
    if (v_rotated) sep() << "v rotated";
    if (k_unrotated) sep() << "decode keys cached unrotated";
    switch (qk_norm) {
        case QkNorm::as_config: break;
        case QkNorm::on_unit_weights: sep() << "qk_norm on (unit weights)"; break;
        case QkNorm::after_rope: sep() << "qk_norm after rope"; break;
        case QkNorm::all_heads: sep() << "qk_norm over all heads at once"; break;
    }
    if (gqa_tiled) sep() << "kv heads tiled (h % n_kv)";
    switch (qkv_bias) {
        case QkvBias::as_config: break;
        case QkvBias::after_rope: sep() << "q and k biases added after rope"; break;
    }
    switch (mask) {
        case Mask::causal: break;
        case Mask::none: sep() << "no causal mask"; break;
        case Mask::strict: sep() << "mask k_pos < q_pos"; break;
        case Mask::plus_one: sep() << "mask k_pos <= q_pos + 1"; break;
        case Mask::index_tail: sep() << "mask by index (j <= i + S - T)"; break;
        case Mask::index_top: sep() << "mask by index (j <= i)"; break;
    }
    if (score_dims) sep() << "scores over the first " << score_dims << " dims";
    if (softmax_tile) sep() << "softmax over " << softmax_tile << "-key " << (softmax_tile_local ? "splits merged" : "tiles")
                            << " without rescaling";
    if (kv_ring) sep() << "a decode step sees the last " << kv_ring << " keys";
    if (softcap_after_mask) sep() << "soft-cap after the mask (masked keys at -cap)";
    if (sinks == Sinks::per_kv_head) sep() << "sinks read per kv head (sinks[h / group])";
    if (sinks == Sinks::scaled) sep() << "the sink logit times the score scale";
    switch (window) {
        case Window::as_config: break;
        case Window::from_first_query: sep() << "the window's edge from the first query"; break;
        case Window::by_page: sep() << "the window widened to whole pages of " << window_page; break;
        case Window::decode_only: sep() << "the window applied to one-query calls only"; break;
        case Window::prefill_only: sep() << "the window applied to calls of more than one query only"; break;
    }
    if (scale) sep() << "scale=" << *scale;
    if (softmax_no_max) sep() << "softmax without max subtraction";
    if (empty_row_nan) sep() << "NaN for a query that sees no key";
    if (rms_eps_outside) sep() << "rmsnorm eps outside sqrt";
    if (rms_mean_abs) sep() << "rmsnorm mean|x|";
    if (rms_tail_skipped) sep() << "rmsnorm's sum without the last n % 8 elements";
    if (swiglu_gate_on_up) sep() << "activation on the up branch";
    if (moe_weights_from_choice) sep() << "routing weights from scores + e_bias";
    if (moe_down_bias_after_weight) sep() << "down bias after the routing weight";
    if (moe_group_mask_zero) sep() << "groups not kept filled with 0";
    if (moe_router_bf16) sep() << "router in bf16";
    if (moe_swiglu_no_clamp) sep() << "SwiGLU without its clamps";
    if (moe_shared_twice) sep() << "shared expert added twice";
    if (gelu_gate) sep() << "exact (erf) gelu gate";
    if (gelu_f16_table) sep() << "gelu through a float16 table (ggml)";
    if (layer_norm) sep() << "layernorm (mean subtracted)";
    if (post_norm) sep() << "post-norm";
    if (sandwich == Sandwich::after_residual) sep() << "sandwich norms after the residual add";
    if (residual_missing) sep() << "attention residual missing";
    if (paged_block_table_ignored) sep() << "block table ignored (pages consecutive from each sequence's first)";
    if (paged_queries_at_start) sep() << "queries at their sequence's start (top-left)";
    if (paged_sequences_packed) sep() << "sequences packed (boundaries ignored)";
    if (paged_last_page_len_ignored) sep() << "last pages read whole";
    if (paged_partial_page_dropped) sep() << "a last partial page dropped";
    if (lse_base2) sep() << "lse in base 2";
    if (lse_max_dropped) sep() << "lse without the row max added back";
    if (paged_split_unrescaled) sep() << "each page a split, merged without rescaling to the common max";
    if (mla_w_uk_transposed) sep() << "w_uk read per head as if stored [qk_nope, kv_lora_rank]";
    if (mla_w_uv_missing) sep() << "w_uv never applied";
    if (paged_one_slot_past) sep() << "a partial last page read one slot past its length";
    if (paged_sink_per_page) sep() << "the sink added once per page";
    if (paged_lse_without_sink) sep() << "lse without the sink";
    if (paged_first_page_empty_nan) sep() << "NaN where the first page has no visible key (split merge from -inf)";
    switch (kv_fp8) {
        case KvFp8::faithful: break;
        case KvFp8::scale_ignored: sep() << "FP8 cache scales taken as 1"; break;
        case KvFp8::k_scale_for_v: sep() << "FP8 cache: V with K's scale"; break;
        case KvFp8::per_tensor_read: sep() << "FP8 cache: per-head scales read per tensor"; break;
        case KvFp8::truncated: sep() << "FP8 cache written with truncation"; break;
        case KvFp8::unsaturated: sep() << "FP8 cache written without saturation"; break;
        case KvFp8::dequant_twice: sep() << "FP8 cache dequantised twice"; break;
        case KvFp8::reciprocal_scale: sep() << "FP8 cache written through the scale's reciprocal"; break;
        case KvFp8::read_divides: sep() << "FP8 cache read as code / scale"; break;
    }
    return o.str();
}

std::string version() { return TORCH_VERSION; }

namespace {
int configured_threads = 1;  // what set_threads() asked for: a large case's count

// Debian's LibTorch 1.13 runs its bf16 matmuls through oneDNN 2.6, which
// picks AMX tiles (tdpbf16ps) wherever CPUID lists them, without asking the
// kernel for the tile state first (Linux ≥ 5.16 wants arch_prctl
// ARCH_REQ_XCOMP_PERM; oneDNN asks only from 2.7): on a Sapphire Rapids
// machine a bf16 baseline died of SIGILL (`--dtype bf16 --seed 12`). Capped
// below AMX before oneDNN first reads it, unless the user set it.
[[maybe_unused]] const bool onednn_isa_capped = [] {
    setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE_BF16", 0);
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_BF16", 0);
    return true;
}();

// The BLAS's own thread count, where the BLAS LibTorch loaded is OpenBLAS.
// Looked up, not linked: which BLAS LibTorch loads is the system's choice
// (Debian's alternatives), and only OpenBLAS is known to spin.
void set_blas_threads(int n) {
    using SetThreads = void (*)(int);
    static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (set) set(n);
}
}  // namespace

void set_threads(int n) {
    if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    configured_threads = n;
    torch::set_num_threads(n);
    set_blas_threads(n);
}

void threads_for(const Case& c) {
    // Under 2^18 input elements (every drawn case but full-size layers and
    // the longest attention; a 4096-wide layer's one weight is 2^24).
    int64_t elements = 0;
    for (const auto& [name, t] : c.inputs) elements += t.numel();
    const int want = elements >= (int64_t{1} << 18) ? configured_threads : 1;
    if (torch::get_num_threads() == want) return;
    torch::set_num_threads(want);
    set_blas_threads(want);
}

torch::Tensor float_view(const Tensor& t) {
    return torch::from_blob(const_cast<float*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat32);
}

namespace {

torch::Dtype torch_dtype(Precision p) {
    switch (p) {
        case Precision::f64: return torch::kFloat64;
        case Precision::f32: return torch::kFloat32;
        case Precision::bf16: return torch::kBFloat16;
        case Precision::f16: return torch::kFloat32;  // computed in f32, rounded to f16 at the edges (CPU LibTorch has no f16 GEMM)
    }
    return torch::kFloat64;
}

}  // namespace

torch::Tensor as_precision(const torch::Tensor& f32, Precision p) {
    if (p == Precision::f16) return f32.to(torch::kFloat16).to(torch::kFloat32);
    return f32.to(torch_dtype(p));
}

namespace {

torch::Tensor to_torch(const Tensor& t, Precision p) { return as_precision(float_view(t).clone(), p); }

torch::Tensor to_torch(const std::vector<int64_t>& v) {
    return torch::from_blob(const_cast<int64_t*>(v.data()), {static_cast<int64_t>(v.size())}, torch::kInt64).clone();
}

DTensor to_dtensor(torch::Tensor t, Precision p) {
    if (p == Precision::f16) t = t.to(torch::kFloat16);
    t = t.to(torch::kFloat64).contiguous();
    DTensor d;
    d.shape = t.sizes().vec();
    if (d.shape.size() == 1) d.shape.insert(d.shape.begin(), 1);
    d.data.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    return d;
}

}  // namespace

NamedD run(const Case& c, const Options& o) {
    torch::NoGradGuard no_grad;
    const auto dt = torch_dtype(o.precision);
    const auto acc = dt == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    Ctx ctx{dt, acc, o.order, o.variant, o.act_quant, o.route_taken};
    auto in = [&](const std::string& n) { return to_torch(c.in(n), o.precision); };
    auto pos = [&](const std::string& n) { return to_torch(c.pos(n)); };
    // A twist's bug as a config edit: the same op on the same tensors, another config.
    const BlockConfig& cfg = o.variant.config ? *o.variant.config : c.config;

    NamedD out;
    auto put = [&](const std::string& name, const torch::Tensor& t) { out[name] = to_dtensor(t, o.precision); };
    switch (c.op) {
        case Op::rmsnorm: put("out", rmsnorm(in("x"), in("weight").reshape({-1}), cfg.norm_eps, cfg.norm_plus_one, ctx)); break;
        case Op::rope: put("out", rope(in("x"), pos("positions"), rope_params(cfg), ctx)); break;
        case Op::qk_norm:
            put("out", qk_norm(in("x"), in("weight"), cfg.head_dim, cfg.norm_eps, cfg.norm_plus_one, ctx));
            break;
        case Op::attention:
            put("out", attention(in("q"), in("k"), in("v"), pos("q_positions"), pos("k_positions"),
                                 attention_params(cfg), cfg.attn_sinks ? in("sinks") : torch::Tensor(), ctx));
            break;
        case Op::swiglu: put("out", swiglu(in("x"), in("w1"), in("w3"), in("w2"), cfg.hidden_act, ctx)); break;
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts: {
            // A twist's tensor only where it is on (its bug, a config edit, may turn it off).
            auto opt = [&](const char* n) { return c.inputs.count(n) ? in(n) : torch::Tensor(); };
            // The experts as stored, each chosen one converted when used (MoeTensors::expert_weight).
            auto stored = [&](const char* n) { return c.inputs.count(n) ? float_view(c.in(n)) : torch::Tensor(); };
            MoeTensors w{opt("w_router"), opt("router_bias"), opt("e_bias"), stored("w13"), stored("w2"),
                         opt("b13"),      opt("b2"),          opt("ws13"),   opt("ws2"),    opt("ws_gate"),
                         [&o](const torch::Tensor& slice) { return as_precision(slice, o.precision); }};
            const auto x = in("x");
            const auto route = c.op == Op::moe_experts ? in("route") : moe_route(x, w, cfg, ctx);
            if (c.op == Op::moe) put("route", route);
            put("out", c.op == Op::moe_route ? route : moe_experts(x, route, w, cfg, ctx));
            break;
        }
        case Op::paged_attention: {
            // The pool stays where it is: each sequence's rows are gathered from it and converted alone.
            auto [y, lse] = paged_attention(in("q"), float_view(c.in("k_cache")), float_view(c.in("v_cache")),
                                            o.precision, paged_seqs(c, cfg), cfg,
                                            cfg.attn_sinks ? in("sinks") : torch::Tensor(), ctx);
            put("out", y);
            put("lse", lse);
            break;
        }
        case Op::mla_attention: {
            auto [y, lse] = mla_attention(in("q"), float_view(c.in("ckv_cache")), float_view(c.in("kpe_cache")),
                                          in("w_kv_b"), o.precision, paged_seqs(c, cfg), cfg, ctx);
            put("out", y);
            put("lse", lse);
            break;
        }
        case Op::block:
        case Op::decode: {
            std::map<std::string, torch::Tensor> w;
            // decode's inputs (the block's and an FP8 cache's scales) for both:
            // a decode case is also judged as the block over its tokens, with its cache.
            for (const auto& name : float_inputs(Op::decode, cfg)) w[name] = in(name);
            const int64_t T = c.in("x").rows();
            auto taps = block(w, pos("positions"), cfg, c.op == Op::decode ? c.prefill : T, ctx);
            if (c.op == Op::decode && !o.decode_taps) {
                put("out", taps.at("out"));
            } else {
                for (const auto& [name, t] : taps) put(name, t);
            }
            break;
        }
    }
    return out;
}

}  // namespace conform::ref

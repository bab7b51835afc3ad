// conform/config.h — the block's configuration and one parameter struct per
// op. Every convention that real checkpoints disagree on is an explicit field
// (rope layout, theta, eps, qk_norm, qkv_bias, sliding_window, norm_plus_one,
// sandwich_norm, nope, hidden_act, kv_cache_dtype): no implementation may assume a default.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace conform {

// Which dimensions RoPE rotates together.
//   neox:        pairs (x[i], x[i + d/2])   — HF rotate_half, ggml NEOX (HF Llama/Qwen checkpoints)
//   interleaved: pairs (x[2i], x[2i + 1])   — Meta view_as_complex, ggml NORMAL (Meta/GGUF Llama)
enum class RopeLayout { neox, interleaved };

enum class DType { f32, bf16, f16 };

inline const char* to_string(RopeLayout l) { return l == RopeLayout::neox ? "neox" : "interleaved"; }
inline std::optional<RopeLayout> parse_rope_layout(std::string_view s) {
    if (s == "neox") return RopeLayout::neox;
    if (s == "interleaved") return RopeLayout::interleaved;
    return std::nullopt;
}
inline const char* to_string(DType d) {
    switch (d) {
        case DType::f32: return "f32";
        case DType::bf16: return "bf16";
        case DType::f16: return "f16";
    }
    return "?";
}
inline std::optional<DType> parse_dtype(std::string_view s) {
    if (s == "f32" || s == "float32") return DType::f32;
    if (s == "bf16" || s == "bfloat16") return DType::bf16;
    if (s == "f16" || s == "float16") return DType::f16;
    return std::nullopt;
}

// How the rotary frequencies are rescaled for long context (HF
// transformers modeling_rope_utils.py). Every field is explicit: the config
// loader resolves HF's defaults, implementations never assume one.
//   none:    inv_freq[i] = theta^(-2i / rd)                     (rd = rotary dim)
//   linear:  inv_freq /= factor
//   llama3:  wavelength 2pi/inv_freq split by original_max_position / {low,high}_freq_factor:
//            short waves kept, long waves / factor, a smooth blend between
//   yarn:    per-dim ramp between inv_freq and inv_freq / factor, ramp ends from
//            beta_fast / beta_slow rotations over original_max_position (floor / ceil
//            to whole dims unless truncate is false);
//            cos and sin multiplied by attention_factor
//   dynamic: NTK-aware base: with L = max(positions of the call) + 1, if
//            L > original_max_position, theta' = theta * (factor*L/orig - (factor-1))^(rd/(rd-2));
//            inside the original context it is exactly the unscaled RoPE.
//            "The call" is the whole sequence: decode() uses all T positions, so
//            decode equals block() (an engine recomputing per step would not).
enum class RopeScalingType { none, linear, llama3, yarn, dynamic };

inline const char* to_string(RopeScalingType t) {
    switch (t) {
        case RopeScalingType::none: return "none";
        case RopeScalingType::linear: return "linear";
        case RopeScalingType::llama3: return "llama3";
        case RopeScalingType::yarn: return "yarn";
        case RopeScalingType::dynamic: return "dynamic";
    }
    return "?";
}
inline std::optional<RopeScalingType> parse_rope_scaling_type(std::string_view s) {
    if (s == "none" || s == "default") return RopeScalingType::none;
    if (s == "linear") return RopeScalingType::linear;
    if (s == "llama3") return RopeScalingType::llama3;
    if (s == "yarn") return RopeScalingType::yarn;
    if (s == "dynamic") return RopeScalingType::dynamic;
    return std::nullopt;
}

// The KV cache's storage (vLLM's kv_cache_dtype; "auto" there is none
// here): the values as given, or FP8 with a scale (conform/dtype.h has the
// formats). OCP FP8: e4m3 is E4M3FN (max 448, no infinity), e5m2 is IEEE-like
// (max 57344).
enum class KvCacheDtype { none, fp8_e4m3, fp8_e5m2 };

inline const char* to_string(KvCacheDtype d) {
    switch (d) {
        case KvCacheDtype::none: return "none";
        case KvCacheDtype::fp8_e4m3: return "fp8_e4m3";
        case KvCacheDtype::fp8_e5m2: return "fp8_e5m2";
    }
    return "?";
}
inline std::optional<KvCacheDtype> parse_kv_cache_dtype(std::string_view s) {
    if (s == "none" || s == "auto") return KvCacheDtype::none;
    if (s == "fp8_e4m3" || s == "fp8" || s == "e4m3") return KvCacheDtype::fp8_e4m3;
    if (s == "fp8_e5m2" || s == "e5m2") return KvCacheDtype::fp8_e5m2;
    return std::nullopt;
}

// A mixture-of-experts router's scores (HF's modeling files; docs/moe.md).
// l = x @ w_router (+ router_bias), per token [E]; the top-k of the scores
// (+ e_bias) are chosen, and their scores are the weights:
//   softmax: softmax(l) over all E (Mixtral, Qwen2/3-MoE, OLMoE, DeepSeek-V2);
//            gpt-oss's softmax over the top-k logits is this with norm_topk_prob
//   sigmoid: sigmoid(l) (DeepSeek-V3/R1, Kimi-K2, GLM-4.5); Llama 4's sigmoid
//            of the top-k logits is this, sigmoid being monotone
enum class MoeScoring { softmax, sigmoid };

inline const char* to_string(MoeScoring s) { return s == MoeScoring::softmax ? "softmax" : "sigmoid"; }
inline std::optional<MoeScoring> parse_moe_scoring(std::string_view s) {
    if (s == "softmax") return MoeScoring::softmax;
    if (s == "sigmoid") return MoeScoring::sigmoid;
    return std::nullopt;
}

// Grouped top-k's group score (DeepSeek's n_group / topk_group): the sum of
// a group's two best selection scores (V3, R1, Kimi-K2) or its best (V2).
enum class MoeGroupScore { top2_sum, max };

inline const char* to_string(MoeGroupScore g) { return g == MoeGroupScore::top2_sum ? "top2_sum" : "max"; }
inline std::optional<MoeGroupScore> parse_moe_group_score(std::string_view s) {
    if (s == "top2_sum") return MoeGroupScore::top2_sum;
    if (s == "max") return MoeGroupScore::max;
    return std::nullopt;
}

// What an implementation does to the activations of a weight product
// before it (y = x @ W): nothing, or llama.cpp's blocks — Q8_0 (blocks of 32,
// an f16 scale; the vec_dot_type of Q4_0/Q5_x/Q8_0 weights) or Q8_K (blocks
// of 256, an f32 scale; that of the K-quants). An implementation declares it
// per op (Implementation::activation_quant); the judge's low-precision
// baselines then quantise as it does (conform/dtype.h has the formats).
enum class ActQuant { none, q8_0, q8_k };

inline const char* to_string(ActQuant q) {
    switch (q) {
        case ActQuant::none: return "none";
        case ActQuant::q8_0: return "q8_0";
        case ActQuant::q8_k: return "q8_k";
    }
    return "?";
}
inline std::optional<ActQuant> parse_act_quant(std::string_view s) {
    if (s == "none") return ActQuant::none;
    if (s == "q8_0") return ActQuant::q8_0;
    if (s == "q8_k") return ActQuant::q8_k;
    return std::nullopt;
}

// The FFN gate's activation: act(x @ w1) * (x @ w3), then @ w2.
//   silu:      a * sigmoid(a)                                   (Llama's SwiGLU; HF "silu")
//   gelu_tanh: 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3)))  (Gemma's GeGLU; HF "gelu_pytorch_tanh",
//              torch's gelu(approximate="tanh"), ggml_gelu) = a * sigmoid(2 sqrt(2/pi) (a + 0.044715 a^3))
// Exact GELU (erf; HF "gelu") is no model's FFN here: a kernel computing it
// for gelu_tanh is the bug diagnosis names (gelu_erf_for_tanh).
enum class HiddenAct { silu, gelu_tanh };

inline const char* to_string(HiddenAct a) { return a == HiddenAct::silu ? "silu" : "gelu_tanh"; }
inline std::optional<HiddenAct> parse_hidden_act(std::string_view s) {
    if (s == "silu" || s == "swish") return HiddenAct::silu;
    if (s == "gelu_tanh" || s == "gelu_pytorch_tanh") return HiddenAct::gelu_tanh;
    return std::nullopt;
}

struct RopeScaling {
    RopeScalingType type = RopeScalingType::none;
    double factor = 1.0;                // linear, llama3, yarn, dynamic
    double low_freq_factor = 1.0;       // llama3
    double high_freq_factor = 4.0;      // llama3
    int64_t original_max_position = 0;  // llama3, yarn, dynamic (tokens of the pre-training context)
    double beta_fast = 32.0;            // yarn
    double beta_slow = 1.0;             // yarn
    double attention_factor = 1.0;      // yarn: multiplies cos and sin (1 for every other type)
    bool truncate = true;               // yarn: the ramp's ends floor / ceil (HF's default); false: as found (gpt-oss)

    bool operator==(const RopeScaling& o) const {
        return type == o.type && factor == o.factor && low_freq_factor == o.low_freq_factor &&
               high_freq_factor == o.high_freq_factor && original_max_position == o.original_max_position &&
               beta_fast == o.beta_fast && beta_slow == o.beta_slow && attention_factor == o.attention_factor &&
               truncate == o.truncate;
    }
    bool operator!=(const RopeScaling& o) const { return !(*this == o); }
};

struct BlockConfig {
    int64_t d_model = 0;     // D: width of the residual stream
    int64_t n_heads = 0;     // H: query heads
    int64_t n_kv_heads = 0;  // KV: key/value heads; H % KV == 0 (GQA group = H / KV)
    int64_t head_dim = 0;    // hd: need not equal D / H (Qwen3)
    int64_t ffn_dim = 0;     // F: SwiGLU hidden width
    RopeLayout rope_layout = RopeLayout::neox;
    double rope_theta = 10000.0;
    bool qk_norm = false;    // Qwen3: per-head RMSNorm on q and k, before RoPE
    bool qkv_bias = false;   // Qwen2: q = h @ wq + bq, k = h @ wk + bk, v = h @ wv + bv (o_proj has no bias)
    double norm_eps = 1e-5;
    RopeScaling rope_scaling{};  // none unless the model scales RoPE
    int64_t rotary_dim = 0;      // dims of each head that RoPE rotates (the first ones); 0 = all head_dim
    int64_t page_size = 0;       // paged_attention: slots per page of the KV cache (P); 0 where no op pages
    // Sliding-window attention: key j visible to query i iff
    //   q_pos[i] - sliding_window < k_pos[j] <= q_pos[i]
    // (the query sees W keys, its own included), as HF transformers' sliding_window,
    // llama.cpp's n_swa (masked iff q - k >= n_swa) and Mistral mean it;
    // FlashAttention's window_size left = W - 1. 0: full causal.
    int64_t sliding_window = 0;
    // Chunked attention (Llama 4's attention_chunk_size, its RoPE layers):
    // key j visible to query i iff k_pos[j] <= q_pos[i] and both lie in the
    // same chunk of C positions, floor(k_pos / C) == floor(q_pos / C) — a
    // query at the start of a chunk sees its own key only, however long the
    // context. Not a sliding window of C (which always sees C keys). With a
    // window as well, both apply. 0: none.
    int64_t attention_chunk_size = 0;
    // Logit soft-capping (Gemma 2's attn_logit_softcapping, Grok): each score
    // s = q·k / sqrt(hd) becomes cap · tanh(s / cap) before the mask and the
    // softmax, so every logit lies in (-cap, cap). 0: none.
    double attn_logit_softcapping = 0.0;
    // The attention's score scale: s = (q·k) · attn_scale. 0: 1 / sqrt(head_dim)
    // (Llama). Gemma 2 and 3 take query_pre_attn_scalar^-1/2 (Gemma 2 27B:
    // 144^-1/2 = 1/12 with head_dim 128, where engines that kept
    // 1/sqrt(head_dim) ran another model); Granite's attention_multiplier.
    double attn_scale = 0.0;
    // Attention sinks (gpt-oss): a learned logit per query head, input
    // `sinks` [1, H], that joins each row's softmax denominator and has no
    // value: p_j = exp(s_j) / (exp(sink_h) + sum_i exp(s_i)), out = sum_j p_j v_j.
    // (Not StreamingLLM's kept first tokens, which are ordinary keys.) Never capped.
    bool attn_sinks = false;
    // Gemma's RMSNorm (Gemma 1, 2, 3: GemmaRMSNorm): every RMSNorm of the
    // model scales by (1 + w), not w — y = x / rms(x) * (1 + w), the weight
    // stored as its offset from one (zero-initialised) and the 1 + w taken in
    // float32. attn_norm, ffn_norm, q_norm and k_norm alike, and the final norm.
    bool norm_plus_one = false;
    // Gemma 2 and 3's sandwich norms: each sublayer's output is RMSNormed
    // (its own weight) before the residual add,
    //   h   = x + rmsnorm(attn @ wo, attn_post_norm)   HF post_attention_layernorm
    //   out = h + rmsnorm(ffn_out, ffn_post_norm)      HF post_feedforward_layernorm
    // beside the pre-norms attn_norm (input_layernorm) and ffn_norm
    // (pre_feedforward_layernorm). Not the original Transformer's post-norm,
    // which normalises the residual stream itself. norm_plus_one applies to
    // them as to every norm. The block's one definition: conform/ops.h.
    bool sandwich_norm = false;
    // NoPE: the layer leaves q and k unrotated (q_rot = q, k_rot = k after
    // any QK-norm) — SmolLM3's every 4th layer and Llama 4's no_rope_layers
    // (HF: use_rope = no_rope_layers[layer] == 1). Its attention is causal by
    // position all the same. A model's NoPE layers are its LayerPattern's
    // (harness/config/presets.h); the block has the switch. block, decode.
    bool nope = false;
    // The FFN's gate activation (HF hidden_act / Gemma's hidden_activation):
    // SwiGLU (silu) or GeGLU (gelu_tanh), in swiglu, block and decode.
    HiddenAct hidden_act = HiddenAct::silu;
    // An FP8 KV cache (paged_attention): K and V are quantised once, as an
    // engine writes its cache (vLLM reshape_and_cache_flash), and attention
    // reads them dequantised:
    //   code = fp8(k / k_scale)   the division in float32, then round to
    //                             nearest even, saturating at the format's max
    //   k'   = code * k_scale     likewise v with v_scale
    // with k_scale, v_scale inputs [1, 1] (per tensor) or [1, KV] (per kv
    // head, kv_scale_per_head: head g's columns use scale[g]). The attention
    // is then over k', v' exactly as without a cache dtype.
    KvCacheDtype kv_cache_dtype = KvCacheDtype::none;
    bool kv_scale_per_head = false;

    // ---- a mixture-of-experts FFN (moe, moe_route, moe_experts; docs/moe.md) ----
    // Each token is routed to K of E experts, each a SwiGLU of width Fe over
    // its own weights; out = sum over its k of weight_k * expert_k(x) (+ a shared expert).
    int64_t n_experts = 0;          // E
    int64_t n_experts_per_tok = 0;  // K (HF num_experts_per_tok, top_k)
    int64_t moe_ffn_dim = 0;        // Fe: one expert's hidden width (HF moe_intermediate_size)
    // The router (MoeScoring above). router_bias: l = x @ w_router + router_bias
    // (gpt-oss). selection_bias: e_bias [E] is added to the scores for the
    // choice only; the weights come from the unbiased scores (DeepSeek-V3's
    // e_score_correction_bias).
    MoeScoring moe_scoring = MoeScoring::softmax;
    bool moe_router_bias = false;
    bool moe_selection_bias = false;
    // Grouped top-k: the E experts in n_group groups of E / n_group; each
    // group scored (MoeGroupScore) on the selection scores; the top
    // topk_group groups kept, the others' experts out of the choice (as if
    // -inf). 0: no groups.
    int64_t moe_n_group = 0;
    int64_t moe_topk_group = 0;
    MoeGroupScore moe_group_score = MoeGroupScore::top2_sum;
    // The weights of the chosen k: renormalised to sum 1 (HF norm_topk_prob;
    // DeepSeek divides by sum + 1e-20), then times routed_scaling_factor (0: 1).
    bool moe_norm_topk_prob = false;
    double moe_routed_scaling_factor = 0.0;
    // Llama 4: the weight multiplies the expert's input, expert(w * x), not
    // its output (for SwiGLU not the same function).
    bool moe_weight_on_input = false;
    // The experts' gate and up projections as one [D, 2 Fe] matrix per
    // expert, w13: gate columns then up columns (vLLM's packing), or
    // interleaved gate, up, gate, up, ... (gpt-oss's gate_up_proj).
    bool moe_gate_up_interleaved = false;
    // gpt-oss's clamped SwiGLU: g = min(gate, L), u = clamp(up, -L, L),
    // act = g * sigmoid(1.702 g) * (u + 1). 0: silu(gate) * up.
    double moe_swiglu_limit = 0.0;
    // Per-expert biases (gpt-oss): b13 [E, 2 Fe] on gate/up, b2 [E, D] on
    // the down projection, added before the routing weight.
    bool moe_expert_bias = false;
    // A shared expert every token takes, unweighted: a SwiGLU of width
    // shared_ffn_dim over ws13 [D, 2 Fs] and ws2 [Fs, D] (DeepSeek's
    // n_shared_experts * moe_intermediate_size, Llama 4's); 0: none. With
    // shared_gate (Qwen2-MoE), times sigmoid(x @ ws_gate) per token.
    int64_t moe_shared_ffn_dim = 0;
    bool moe_shared_gate = false;

    // ---- multi-head latent attention (mla_attention; docs/mla.md) ----
    // DeepSeek-V2/V3's attention: each token caches one latent c_kv of
    // kv_lora_rank values and one RoPE'd key k_pe of qk_rope_head_dim values
    // that every head shares; kv_b_proj maps the latent to each head's
    // no-RoPE key (qk_nope_head_dim) and its value (v_head_dim). A head's
    // query is [q_nope | q_pe], qk_nope_head_dim + qk_rope_head_dim wide.
    int64_t kv_lora_rank = 0;      // dc (V3: 512)
    int64_t qk_nope_head_dim = 0;  // dn (V3: 128)
    int64_t qk_rope_head_dim = 0;  // dr (V3: 64)
    int64_t v_head_dim = 0;        // dv (V3: 128)
    int64_t mla_qk_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }

    int64_t q_width() const { return n_heads * head_dim; }
    int64_t rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
    int64_t kv_width() const { return n_kv_heads * head_dim; }
    int64_t group() const { return n_kv_heads > 0 ? n_heads / n_kv_heads : 0; }
};

// Chunked attention's test (BlockConfig::attention_chunk_size): whether key
// position k and query position q lie in the same chunk of `chunk`
// positions (floor division, so negative positions chunk as HF's would).
// chunk <= 0: always. The CUDA kernels call it too.
#if defined(__CUDACC__)
#define CONFORM_HOST_DEVICE __host__ __device__
#else
#define CONFORM_HOST_DEVICE
#endif
CONFORM_HOST_DEVICE inline int64_t chunk_of(int64_t pos, int64_t chunk) {
    return pos >= 0 ? pos / chunk : -((-pos - 1) / chunk) - 1;
}
CONFORM_HOST_DEVICE inline bool same_chunk(int64_t k, int64_t q, int64_t chunk) {
    return chunk <= 0 || chunk_of(k, chunk) == chunk_of(q, chunk);
}

// q·k's multiplier: the config's attn_scale, or 1 / sqrt(head_dim).
inline double score_scale(double attn_scale, int64_t head_dim) {
    return attn_scale > 0 ? attn_scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

// ---- the config's fields, once ---------------------------------------------
// Every field of BlockConfig, with its name in each format that carries one:
// `name` in the keyed formats (worker JSON, the report's config; a
// "rope_scaling.x" name nests under "rope_scaling"), `h5` in fixture
// attributes (fixtures/SCHEMA.md; their older spellings kept), `id` in case
// ids. A RoPE scaling parameter also says which scaling types take it: the
// formats that carry only what applies (ids, fixtures, the report) and
// those that carry every field (worker JSON) read it here. Each codec is one
// loop over for_each_field with an overload per field type (int64_t, double,
// bool, and the named enums: RopeLayout, RopeScalingType, KvCacheDtype, HiddenAct); which ops read a field is their row
// in conform/op_info.h. A core field is a member above and one line in
// for_each_field (conform/twists.h); a twist is a member and its row there.
struct ConfigField {
    const char* name;
    const char* h5;
    const char* id;
    uint32_t scaling_types = 0;  // a rope_scaling parameter: bit (1 << type) for each type that takes it
    // A served variant's switch or size (qkv_bias, sliding_window): absent means off, so a
    // format writes it only when it is on and files from before it still
    // read as what they were. An op that reads it does not require it.
    bool optional = false;

    bool is_scaling_param() const { return scaling_types != 0; }
    bool applies(RopeScalingType t) const { return (scaling_types >> static_cast<unsigned>(t)) & 1u; }
};

// The enum-valued fields, written as their names in every format.
template <class V>
constexpr bool is_named_enum =
    std::is_same_v<V, RopeLayout> || std::is_same_v<V, RopeScalingType> || std::is_same_v<V, KvCacheDtype> ||
    std::is_same_v<V, HiddenAct> || std::is_same_v<V, MoeScoring> || std::is_same_v<V, MoeGroupScore>;
inline std::optional<RopeLayout> parse_named(std::string_view s, RopeLayout) { return parse_rope_layout(s); }
inline std::optional<RopeScalingType> parse_named(std::string_view s, RopeScalingType) { return parse_rope_scaling_type(s); }
inline std::optional<KvCacheDtype> parse_named(std::string_view s, KvCacheDtype) { return parse_kv_cache_dtype(s); }
inline std::optional<HiddenAct> parse_named(std::string_view s, HiddenAct) { return parse_hidden_act(s); }
inline std::optional<MoeScoring> parse_named(std::string_view s, MoeScoring) { return parse_moe_scoring(s); }
inline std::optional<MoeGroupScore> parse_named(std::string_view s, MoeGroupScore) { return parse_moe_group_score(s); }

namespace config_fields {
constexpr uint32_t bit(RopeScalingType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kScaled = bit(RopeScalingType::linear) | bit(RopeScalingType::llama3) | bit(RopeScalingType::yarn) |
                             bit(RopeScalingType::dynamic);
}  // namespace config_fields

// for_each_field(config, f): every field, the core's below and each twist's
// (conform/twists.h, which holds it).

// ---- one parameter struct per op ------------------------------------------

struct RmsNormParams {
    double eps = 1e-5;  // y = x * rsqrt(mean(x^2) + eps) * w   (eps inside the sqrt)
    bool plus_one = false;  // BlockConfig::norm_plus_one: * (1 + w) instead of * w (Gemma)
    const BlockConfig* config = nullptr;  // the config it was made from (rmsnorm_params), for an implementation that takes calls whole
};

struct RopeParams {
    int64_t head_dim = 0;  // x has n * head_dim columns
    RopeLayout layout = RopeLayout::neox;
    double theta = 10000.0;  // inv_freq[i] = theta^(-2i / rotary_dim), before scaling
    RopeScaling scaling{};
    // The first rotary_dim dims of each head are rotated (pairs formed inside
    // them by `layout`), the rest pass through unchanged. 0 = all head_dim.
    int64_t rotary_dim = 0;
    int64_t rotary() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
    const BlockConfig* config = nullptr;  // the config it was made from (rope_params), for an implementation that takes calls whole
};

struct QkNormParams {
    int64_t head_dim = 0;  // RMSNorm over each head's head_dim slice, weight [head_dim]
    double eps = 1e-5;
    bool plus_one = false;  // BlockConfig::norm_plus_one: * (1 + w) instead of * w (Gemma 3's q_norm, k_norm)
    const BlockConfig* config = nullptr;  // the config it was made from (qk_norm_params), for an implementation that takes calls whole
};

struct SwigluParams {
    // BlockConfig::hidden_act: the gate's activation, silu (SwiGLU) or gelu_tanh (GeGLU).
    HiddenAct act = HiddenAct::silu;
    const BlockConfig* config = nullptr;  // the config it was made from (swiglu_params), for an implementation that takes calls whole
};

// An attention's variant (FlashInfer's AttentionVariantBase): which keys a
// query sees beyond causality (its LogitsMask: the sliding window, the
// chunk), what a score becomes before the softmax (its LogitsTransform: the
// scale, the soft-cap), and the sinks in the softmax's denominator. One
// struct, host and device: the attention ops' params, the SIMD jobs and the
// CUDA args each embed it (inherit it), and every kernel asks it.
struct AttentionVariant {
    // BlockConfig::sliding_window: key j visible to query i iff also k_pos[j] > q_pos[i] - W (0: none).
    int64_t sliding_window = 0;
    // BlockConfig::attention_chunk_size: and both in the same chunk of C positions (same_chunk; 0: none).
    int64_t chunk = 0;
    double softcap = 0.0;  // > 0: a visible score s becomes softcap * tanh(s / softcap), before the softmax
    double scale = 0.0;    // BlockConfig::attn_scale: scores are (q·k) · scale; 0: 1 / sqrt(head_dim)
    // BlockConfig::attn_sinks: head h's sink logit sinks[h] joins its softmax's
    // denominator (no value). nullptr: none. [n_heads], the caller's memory (a
    // CUDA kernel's args: the device's).
    const float* sinks = nullptr;

    // The mask beyond causality: whether the window and the chunk leave key position k to a query at q.
    CONFORM_HOST_DEVICE bool in_window(int64_t k, int64_t q) const {
        return (sliding_window <= 0 || k > q - sliding_window) && same_chunk(k, q, chunk);
    }
    // The whole mask: causal by position, then the window and the chunk.
    CONFORM_HOST_DEVICE bool visible(int64_t k, int64_t q) const { return k <= q && in_window(k, q); }
    // The first key position a query at q >= 0 sees, where keys lie at 0, 1, ... (a paged sequence's).
    CONFORM_HOST_DEVICE int64_t first_key(int64_t q) const {
        int64_t first = sliding_window > 0 && q - sliding_window + 1 > 0 ? q - sliding_window + 1 : 0;
        if (chunk > 0 && chunk_of(q, chunk) * chunk > first) first = chunk_of(q, chunk) * chunk;
        return first;
    }
    // q·k's multiplier: the config's attn_scale, or 1 / sqrt(head_dim).
    double score_scale(int64_t head_dim) const { return conform::score_scale(scale, head_dim); }
};

inline AttentionVariant attention_variant(const BlockConfig& c) {
    AttentionVariant v;
    v.sliding_window = c.sliding_window;
    v.chunk = c.attention_chunk_size;
    v.softcap = c.attn_logit_softcapping;
    v.scale = c.attn_scale;
    return v;  // sinks: the call's tensor, where the config has them
}

struct AttentionParams : AttentionVariant {
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;  // query head h reads kv head h / (n_heads / n_kv_heads)
    int64_t head_dim = 0;    // scale = 1 / sqrt(head_dim) unless `scale` says otherwise
    const BlockConfig* config = nullptr;  // the config it was made from (attention_params)

    AttentionParams(int64_t h = 0, int64_t kv = 0, int64_t hd = 0, const AttentionVariant& v = {})
        : AttentionVariant(v), n_heads(h), n_kv_heads(kv), head_dim(hd) {}
    double score_scale() const { return AttentionVariant::score_scale(head_dim); }
};

// paged_attention: attention over each sequence's keys, which live in a paged
// cache (FlashInfer's layout, conform/interface.h PagedIndex).
struct PagedAttentionParams : AttentionVariant {
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;  // query head h reads kv head h / (n_heads / n_kv_heads)
    int64_t head_dim = 0;
    int64_t page_size = 0;   // P: the cache's rows are pages of P slots, page p at rows [p*P, (p+1)*P)
    // BlockConfig::kv_cache_dtype: k_cache and v_cache hold K and V as the
    // engine writes them; the kernel quantises them (the cache write) and
    // attends over the dequantised values. The scales are the caller's memory,
    // n_kv_scales of each: 1 (per tensor) or n_kv_heads (per kv head).
    KvCacheDtype kv_cache_dtype = KvCacheDtype::none;
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
    int64_t n_kv_scales = 0;
    const BlockConfig* config = nullptr;  // the config it was made from (paged_attention_params)
    double score_scale() const { return AttentionVariant::score_scale(head_dim); }

    // kv head g's scale for K or V: its own, or the tensor's one.
    float kv_scale(bool is_v, int64_t kv_head) const {
        return (is_v ? v_scale : k_scale)[n_kv_scales > 1 ? kv_head : 0];
    }
};

// mla_attention: attention over each sequence's latent cache (paged as
// PagedIndex says), its keys and values through kv_b_proj (conform/interface.h).
struct MlaParams : AttentionVariant {
    int64_t n_heads = 0;
    int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    int64_t page_size = 0;  // P: ckv_cache and kpe_cache rows are pages of P slots, page p at rows [p*P, (p+1)*P)
    const BlockConfig* config = nullptr;  // the config it was made from (mla_params)
    int64_t qk_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
    // The model's scale, 1/sqrt(qk_nope + qk_rope) (times YaRN's mscale^2: attn_scale),
    // whichever width a kernel multiplies in (the absorbed form's is kv_lora_rank + qk_rope).
    double score_scale() const { return AttentionVariant::score_scale(qk_dim()); }
};

inline RmsNormParams rmsnorm_params(const BlockConfig& c) { return {c.norm_eps, c.norm_plus_one, &c}; }
inline RopeParams rope_params(const BlockConfig& c) {
    return {c.head_dim, c.rope_layout, c.rope_theta, c.rope_scaling, c.rotary_dim, &c};
}
inline QkNormParams qk_norm_params(const BlockConfig& c) { return {c.head_dim, c.norm_eps, c.norm_plus_one, &c}; }
inline SwigluParams swiglu_params(const BlockConfig& c) { return {c.hidden_act, &c}; }
inline AttentionParams attention_params(const BlockConfig& c) {
    AttentionParams p(c.n_heads, c.n_kv_heads, c.head_dim, attention_variant(c));
    p.config = &c;
    return p;
}
// What a paged batch's params (paged_attention's, mla_attention's) take alike from the config.
template <class Params>
Params paged_params(const BlockConfig& c) {
    Params p;
    static_cast<AttentionVariant&>(p) = attention_variant(c);
    p.n_heads = c.n_heads;
    p.page_size = c.page_size;
    p.config = &c;
    return p;
}
inline PagedAttentionParams paged_attention_params(const BlockConfig& c) {
    auto p = paged_params<PagedAttentionParams>(c);
    p.n_kv_heads = c.n_kv_heads;
    p.head_dim = c.head_dim;
    p.kv_cache_dtype = c.kv_cache_dtype;
    p.n_kv_scales = c.kv_cache_dtype == KvCacheDtype::none ? 0 : c.kv_scale_per_head ? c.n_kv_heads : 1;
    return p;
}
inline MlaParams mla_params(const BlockConfig& c) {
    auto p = paged_params<MlaParams>(c);
    p.kv_lora_rank = c.kv_lora_rank;
    p.qk_nope_head_dim = c.qk_nope_head_dim;
    p.qk_rope_head_dim = c.qk_rope_head_dim;
    p.v_head_dim = c.v_head_dim;
    return p;
}

}  // namespace conform

// The twists' rows and for_each_field, which the config's codecs loop over.
#include "conform/twists.h"

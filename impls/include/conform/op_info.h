// conform/op_info.h — every fact about an op, in one record per op (PyTorch's
// OpInfo, ggml's test_case): its inputs and outputs by schema name and shape,
// the conventions its result depends on, the config fields it reads, its
// tolerance row, and the reach of its generator. Everything in the harness
// that asks "which ops use RoPE?", "what does rope consume?", "how close must
// attention be?" looks it up here; nothing restates it.
//
// The row also holds the op's one piece of behaviour the contract can own:
// how it is called on an Implementation (`invoke`). The judge (a Case's
// tensors), conform-worker (a request's) and bench (its input sets) differ
// only in where the tensors are, which CallTensors says; none of them
// switches on the op.
//
// A new op is one row below plus its kernels: ARCHITECTURE.md lists the files.
//
// Header-only, on the interface alone: implementations may read it too.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conform/config.h"
#include "conform/interface.h"
#include "conform/ops.h"

namespace conform {

// What an op's result depends on: what a kernel can get wrong, and so what
// diagnosis tries, generators vary, coverage counts and plugins must be told.
enum Convention : uint32_t {
    kRope = 1u << 0,      // rotary embedding: layout, theta, scaling, rotary_dim
    kHeads = 1u << 1,     // query heads grouped over kv heads (MHA / GQA / MQA)
    kCausal = 1u << 2,    // a causal mask by position, softmax, 1/sqrt(head_dim)
    kRmsNorm = 1u << 3,   // RMSNorm: eps inside the root, a weight per channel
    kQkNorm = 1u << 4,    // Qwen3's per-head RMSNorm of q and k (the block: iff config.qk_norm)
    kSwiglu = 1u << 5,    // silu(x @ w1) * (x @ w3), then @ w2
    kResidual = 1u << 6,  // the residual stream: h = x + ..., out = h + ...
    kKvCache = 1u << 7,   // decode: tokens one at a time through a cache of rotated k and v
    kPaged = 1u << 8,     // a batch of ragged sequences over a paged KV cache (PagedIndex)
    kQkvBias = 1u << 9,   // Qwen2's projection biases (the block: iff config.qkv_bias)
    kWindow = 1u << 10,   // sliding-window attention (config.sliding_window > 0)
    kSoftcap = 1u << 11,  // logit soft-capping (config.attn_logit_softcapping > 0)
    kSinks = 1u << 12,    // attention sinks (config.attn_sinks: input sinks [1, H])
    kNormPlusOne = 1u << 13,  // Gemma's RMSNorm: * (1 + w) (config.norm_plus_one)
    kFp8Cache = 1u << 14,     // an FP8 KV cache (config.kv_cache_dtype: inputs k_scale, v_scale)
    kGeglu = 1u << 15,        // Gemma's GeGLU: the FFN gate through gelu_tanh, not silu (config.hidden_act)
    kAttnScale = 1u << 16,    // a score scale other than 1/sqrt(head_dim) (config.attn_scale: query_pre_attn_scalar)
    kSandwichNorm = 1u << 17, // each sublayer's output normed before the residual add (config.sandwich_norm: Gemma 2/3)
    kNope = 1u << 18,         // a layer without RoPE (config.nope: SmolLM3's, Llama 4's NoPE layers)
    kChunk = 1u << 19,        // chunked attention (config.attention_chunk_size: Llama 4)
};

// The dims a tensor shape is made of. A dim the config fixes (D, F, Q, KVW,
// hd for the block) is checked against it; one it does not (T, S, and D, F, N
// for the single ops) is bound by the first tensor that has it.
enum class Dim {
    one,  // 1: a vector stored [1, n]
    T,    // rows: tokens / queries
    S,    // keys (attention)
    D,    // d_model
    F,    // ffn_dim
    Q,    // n_heads * head_dim
    KVW,  // n_kv_heads * head_dim
    N,    // any whole number of heads: n * head_dim (rope, qk_norm)
    hd,   // head_dim
    H,    // n_heads (paged_attention's lse: one per row and head)
    B,    // sequences in a batch
    B1,   // B + 1 (an indptr)
    NP,   // pages listed by a batch's kv_indices
    KVS,  // an FP8 cache's scales: 1 (per tensor) or n_kv_heads (config.kv_scale_per_head)
};

// When an input is there: always, or only where the config turns its twist on.
enum class Present { always, qk_norm, qkv_bias, attn_sinks, kv_fp8, sandwich_norm };

struct TensorSpec {
    const char* name;  // schema name (fixtures/SCHEMA.md)
    Dim rows, cols;
    Present when = Present::always;  // q_norm, k_norm iff config.qk_norm; bq, bk, bv iff config.qkv_bias
    // A paged cache: only the rows the batch's sequences own are inputs; the
    // rest hold poison (NaN) on purpose and are not checked.
    bool pool = false;
    // An output that is -inf where a row sees no key (lse); finite elsewhere.
    bool neg_inf_when_empty = false;

    bool present(const BlockConfig& c) const {
        switch (when) {
            case Present::always: return true;
            case Present::qk_norm: return c.qk_norm;
            case Present::qkv_bias: return c.qkv_bias;
            case Present::attn_sinks: return c.attn_sinks;
            case Present::kv_fp8: return c.kv_cache_dtype != KvCacheDtype::none;
            case Present::sandwich_norm: return c.sandwich_norm;
        }
        return true;
    }
};

// int64 positions: one per row of the tensors with that many rows; or, for
// paged_attention, int64 index arrays (indptrs, page ids, last-page lengths),
// checked against each other (core/case.cpp) rather than one per row.
struct PositionSpec {
    const char* name;
    Dim n;
    bool increasing = false;  // one sequence: strictly increasing (the block's tokens)
    bool index = false;       // an index array, not positions
};

// The tolerance model's per-op numbers (harness/compare/tolerance.h says how
// they are used): k, the multiple of the low-precision baseline's error, and
// the NMSE backstops per dtype.
struct ToleranceRow {
    double k;
    double nmse_f32, nmse_bf16, nmse_f16;
};

// How far the op's generator reaches (harness/gen/gen.cpp draws within it,
// most cases far smaller: the sizes are skewed toward cheap cases).
struct GenReach {
    int64_t rows;          // T of most cases (attention: keys S; queries T <= S)
    int64_t rows_max;      // the longest (a steady fraction of long cases)
    int64_t head_dim_max;  // 0: the op has no heads
};

// Where one call's tensors are, by schema name (fixtures/SCHEMA.md).
struct CallTensors {
    virtual ~CallTensors() = default;
    // An input; data == nullptr where the call has none (q_norm, k_norm without
    // QK-norm; bq, bk, bv without projection biases).
    virtual View in(const char* name) = 0;
    virtual Positions pos(const char* name) = 0;
    // An output buffer; data == nullptr where it was not asked for (a block
    // tap). "out" is always asked for.
    virtual MutView out(const char* name) = 0;
    // decode: the tokens taken in one forward before the one-at-a-time steps.
    virtual int64_t prefill() = 0;
};

// paged_attention's index arrays, by their schema names.
inline PagedIndex paged_index(CallTensors& t) {
    return {t.pos("qo_indptr"), t.pos("kv_indptr"), t.pos("kv_indices"), t.pos("kv_last_page_len")};
}

// An op called on an implementation; returns the outputs written ("out" for
// every op; the block: also the taps it reports, see wrote()).
using Invoke = TapSet (*)(Implementation&, const BlockConfig&, CallTensors&);

// Each op's call, as its row names it.
namespace calls {

inline TapSet out_only() {
    TapSet s;
    s.add(Tap::out);
    return s;
}

inline BlockWeights block_weights(CallTensors& t) {
    BlockWeights w;
    w.attn_norm = t.in("attn_norm");
    w.wq = t.in("wq");
    w.wk = t.in("wk");
    w.wv = t.in("wv");
    w.wo = t.in("wo");
    w.ffn_norm = t.in("ffn_norm");
    w.w1 = t.in("w1");
    w.w3 = t.in("w3");
    w.w2 = t.in("w2");
    w.q_norm = t.in("q_norm");
    w.k_norm = t.in("k_norm");
    w.bq = t.in("bq");
    w.bk = t.in("bk");
    w.bv = t.in("bv");
    w.sinks = t.in("sinks");
    w.attn_post_norm = t.in("attn_post_norm");
    w.ffn_post_norm = t.in("ffn_post_norm");
    // decode's FP8 cache (data nullptr without one); a decode case localised
    // through block() brings them too, and its block then has the cache.
    w.k_scale = t.in("k_scale");
    w.v_scale = t.in("v_scale");
    return w;
}

inline TapSet rmsnorm(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.rmsnorm(t.in("x"), t.in("weight"), rmsnorm_params(c), t.out("out"));
    return out_only();
}
inline TapSet rope(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.rope(t.in("x"), t.pos("positions"), rope_params(c), t.out("out"));
    return out_only();
}
inline TapSet qk_norm(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.qk_norm(t.in("x"), t.in("weight"), qk_norm_params(c), t.out("out"));
    return out_only();
}
inline TapSet attention(Implementation& i, const BlockConfig& c, CallTensors& t) {
    AttentionParams p = attention_params(c);
    p.sinks = t.in("sinks").data;  // nullptr without sinks
    i.attention(t.in("q"), t.in("k"), t.in("v"), t.pos("q_positions"), t.pos("k_positions"), p, t.out("out"));
    return out_only();
}
inline TapSet swiglu(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.swiglu(t.in("x"), t.in("w1"), t.in("w3"), t.in("w2"), swiglu_params(c), t.out("out"));
    return out_only();
}
inline TapSet block(Implementation& i, const BlockConfig& c, CallTensors& t) {
    BlockOutputs bo;
    for (Tap tap : kAllTaps) bo[tap] = t.out(to_string(tap));
    TapSet written = i.block(t.in("x"), block_weights(t), t.pos("positions"), c, bo);
    written.add(Tap::out);
    return written;
}
inline TapSet decode(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.decode(t.in("x"), block_weights(t), t.pos("positions"), t.prefill(), c, t.out("out"));
    return out_only();
}

inline TapSet paged_attention(Implementation& i, const BlockConfig& c, CallTensors& t) {
    PagedAttentionParams p = paged_attention_params(c);
    p.sinks = t.in("sinks").data;  // nullptr without sinks
    p.k_scale = t.in("k_scale").data;  // nullptr without an FP8 cache
    p.v_scale = t.in("v_scale").data;
    i.paged_attention(t.in("q"), t.in("k_cache"), t.in("v_cache"), paged_index(t), p, t.out("out"), t.out("lse"));
    return out_only();
}

}  // namespace calls

// Whether a call that returned `written` wrote the output `name`: "out"
// always; a block tap when it reported it.
inline bool wrote(TapSet written, std::string_view name) {
    if (name == "out" || name == "lse") return true;  // lse: paged_attention's second output, always asked for
    for (Tap t : kAllTaps)
        if (name == to_string(t)) return written.has(t);
    return false;
}

// One row: {op, formula, conventions, inputs, positions, outputs, config
// fields, tolerance {k, nmse f32, nmse bf16, nmse f16}, generator reach, its call}.
struct OpInfo {
    Op op;                // its name is to_string(op) (ops.h)
    const char* formula;  // what it computes, as the PyTorch line
    uint32_t conventions;
    std::vector<TensorSpec> inputs;      // float inputs, in schema order
    std::vector<PositionSpec> positions;  // int64 position inputs
    std::vector<TensorSpec> outputs;     // "out"; the block: every tap in data-flow order (ops.h)
    std::vector<const char*> config;     // config fields it reads (a fixture must carry them)
    ToleranceRow tolerance;
    GenReach reach;
    Invoke invoke;  // the op called on an Implementation (calls:: above)

    bool uses(uint32_t c) const { return (conventions & c) == c; }
    bool reads(std::string_view field) const {
        for (const char* f : config)
            if (field == f) return true;
        return false;
    }
    // Whether an input's shape has dim d (rmsnorm's D, swiglu's F).
    bool has_dim(Dim d) const {
        for (const TensorSpec& t : inputs)
            if (t.rows == d || t.cols == d) return true;
        return false;
    }
    // Outputs with heads ([rows, heads * head_dim]): locations are (token, head, dim).
    bool has_heads(const TensorSpec& t) const { return t.cols == Dim::Q || t.cols == Dim::KVW || t.cols == Dim::N; }
    const TensorSpec* input(std::string_view name) const {
        for (const TensorSpec& t : inputs)
            if (name == t.name) return &t;
        return nullptr;
    }
    const TensorSpec* output(std::string_view name) const {
        for (const TensorSpec& t : outputs)
            if (name == t.name) return &t;
        return nullptr;
    }
};

// The table, in kAllOps order.
inline const std::vector<OpInfo>& op_table() {
    using D = Dim;
    // The block's (and decode's) inputs: x and one layer's weights, stored [in, out].
    const std::vector<TensorSpec> block_inputs = {
        {"x", D::T, D::D},   {"attn_norm", D::one, D::D}, {"wq", D::D, D::Q},  {"wk", D::D, D::KVW},
        {"wv", D::D, D::KVW}, {"wo", D::Q, D::D},          {"ffn_norm", D::one, D::D}, {"w1", D::D, D::F},
        {"w3", D::D, D::F},  {"w2", D::F, D::D},          {"q_norm", D::one, D::hd, Present::qk_norm},
        {"k_norm", D::one, D::hd, Present::qk_norm},    {"bq", D::one, D::Q, Present::qkv_bias},
        {"bk", D::one, D::KVW, Present::qkv_bias},       {"bv", D::one, D::KVW, Present::qkv_bias},
        {"sinks", D::one, D::H, Present::attn_sinks},
        {"attn_post_norm", D::one, D::D, Present::sandwich_norm}, {"ffn_post_norm", D::one, D::D, Present::sandwich_norm}};
    // decode's: the block's, and an FP8 cache's scales (paged_attention's, Dim::KVS).
    std::vector<TensorSpec> decode_inputs = block_inputs;
    decode_inputs.push_back({"k_scale", D::one, D::KVS, Present::kv_fp8});
    decode_inputs.push_back({"v_scale", D::one, D::KVS, Present::kv_fp8});
    const std::vector<const char*> block_config = {"d_model",    "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                                                   "rope_layout", "rope_theta", "qk_norm",  "norm_eps", "qkv_bias", "sliding_window", "attention_chunk_size",
                                                   "attn_logit_softcapping", "attn_scale", "attn_sinks", "norm_plus_one", "sandwich_norm", "nope", "hidden_act"};
    std::vector<const char*> decode_config = block_config;
    decode_config.push_back("kv_cache_dtype");
    decode_config.push_back("kv_scale_per_head");
    static const std::vector<OpInfo> table = {
        {Op::rmsnorm, "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w if plus_one else w)",
         kRmsNorm | kNormPlusOne,
         {{"x", D::T, D::D}, {"weight", D::one, D::D}},
         {},
         {{"out", D::T, D::D}},
         {"norm_eps", "norm_plus_one"},
         {2.0, 1e-9, 1e-4, 1e-5},
         {33, 33, 0},
         calls::rmsnorm},
        {Op::rope, "x * cos + rotate_half(x) * sin  (neox; interleaved: pairs (2i, 2i+1))", kRope,
         {{"x", D::T, D::N}},
         {{"positions", D::T}},
         {{"out", D::T, D::N}},
         {"head_dim", "rope_layout", "rope_theta"},
         {2.0, 1e-9, 1e-4, 1e-5},
         {33, 33, 256},
         calls::rope},
        {Op::qk_norm, "rmsnorm(x.view(T, n, hd), w[hd]).view(T, n * hd)", kRmsNorm | kQkNorm | kNormPlusOne,
         {{"x", D::T, D::N}, {"weight", D::one, D::hd}},
         {},
         {{"out", D::T, D::N}},
         {"head_dim", "norm_eps", "norm_plus_one"},
         {2.0, 1e-9, 1e-4, 1e-5},
         {33, 33, 256},
         calls::qk_norm},
        {Op::attention,
         "softmax([softcap?(q @ repeat_interleave(k, H/KV).T * (attn_scale or 1/sqrt(hd))) + causal(q_pos, k_pos, "
         "window, chunk), sinks?])[..., :S] @ v",
         kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale,
         {{"q", D::T, D::Q}, {"k", D::S, D::KVW}, {"v", D::S, D::KVW}, {"sinks", D::one, D::H, Present::attn_sinks}},
         {{"q_positions", D::T}, {"k_positions", D::S}},
         {{"out", D::T, D::Q}},
         {"n_heads", "n_kv_heads", "head_dim", "sliding_window", "attention_chunk_size", "attn_logit_softcapping", "attn_scale",
          "attn_sinks"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {48, 2100, 256},
         calls::attention},
        {Op::swiglu, "(act(x @ w1) * (x @ w3)) @ w2, act = F.silu | F.gelu(approximate='tanh') (GeGLU)",
         kSwiglu | kGeglu,
         {{"x", D::T, D::D}, {"w1", D::D, D::F}, {"w3", D::D, D::F}, {"w2", D::F, D::D}},
         {},
         {{"out", D::T, D::D}},
         {"hidden_act"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {17, 17, 0},
         calls::swiglu},
        {Op::block,
         "h = x + post?(attention(rope?(qk_norm?(rmsnorm(x) @ wq + bq?, @ wk + bk?)), @ wv + bv?) @ wo); "
         "out = h + post?(swiglu(rmsnorm(h)))  (post?: sandwich_norm's rmsnorm(., attn_post_norm / ffn_post_norm))",
         kRope | kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale | kRmsNorm | kNormPlusOne | kQkNorm | kQkvBias |
             kSwiglu | kGeglu | kResidual | kSandwichNorm | kNope,
         block_inputs,
         {{"positions", D::T, true}},
         {{"attn_in", D::T, D::D},
          {"q", D::T, D::Q},
          {"k", D::T, D::KVW},
          {"v", D::T, D::KVW},
          {"q_rot", D::T, D::Q},
          {"k_rot", D::T, D::KVW},
          {"attn", D::T, D::Q},
          {"h", D::T, D::D},
          {"ffn_in", D::T, D::D},
          {"ffn_out", D::T, D::D},
          {"out", D::T, D::D}},
         block_config,
         {2.0, 1e-8, 1e-3, 1e-4},
         {20, 512, 256},
         calls::block},
        {Op::decode,
         "block() over the prefill, then one token at a time through the KV cache; an FP8 cache: "
         "attention reads fp8(k_rot / k_scale) * k_scale, likewise v",
         kRope | kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale | kRmsNorm | kNormPlusOne | kQkNorm | kQkvBias |
             kSwiglu | kGeglu | kResidual | kKvCache | kFp8Cache | kSandwichNorm | kNope,
         decode_inputs,
         {{"positions", D::T, true}},
         {{"out", D::T, D::D}},
         decode_config,
         {2.0, 1e-8, 1e-3, 1e-4},
         {12, 340, 256},
         calls::decode},
        {Op::paged_attention,
         "per sequence b: attention(q[qo_indptr[b]:qo_indptr[b+1]], its pages' k and v, causal bottom-right), "
         "lse = logsumexp([scores, sinks?]); an FP8 cache: k, v = fp8(k / k_scale) * k_scale, likewise v",
         kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale | kPaged | kFp8Cache,
         {{"q", D::T, D::Q},
          {"k_cache", D::S, D::KVW, Present::always, true},
          {"v_cache", D::S, D::KVW, Present::always, true},
          {"sinks", D::one, D::H, Present::attn_sinks},
          {"k_scale", D::one, D::KVS, Present::kv_fp8},
          {"v_scale", D::one, D::KVS, Present::kv_fp8}},
         {{"qo_indptr", D::B1, false, true},
          {"kv_indptr", D::B1, false, true},
          {"kv_indices", D::NP, false, true},
          {"kv_last_page_len", D::B, false, true}},
         {{"out", D::T, D::Q}, {"lse", D::T, D::H, Present::always, false, true}},
         {"n_heads", "n_kv_heads", "head_dim", "page_size", "sliding_window", "attention_chunk_size", "attn_logit_softcapping",
          "attn_scale", "attn_sinks", "kv_cache_dtype", "kv_scale_per_head"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {600, 8200, 256},
         calls::paged_attention},
    };
    return table;
}

// A dim's size where the config fixes it (D, F, Q, KVW, hd; 1); -1 where a
// tensor binds it (T, S, N).
inline int64_t config_dim(Dim d, const BlockConfig& c) {
    switch (d) {
        case Dim::one: return 1;
        case Dim::D: return c.d_model;
        case Dim::F: return c.ffn_dim;
        case Dim::Q: return c.q_width();
        case Dim::KVW: return c.kv_width();
        case Dim::hd: return c.head_dim;
        case Dim::H: return c.n_heads;
        case Dim::KVS: return c.kv_scale_per_head ? c.n_kv_heads : 1;
        default: return -1;
    }
}

inline const OpInfo& op_info(Op op) {
    for (const OpInfo& i : op_table())
        if (i.op == op) return i;
    throw std::logic_error("op_info: an op without a row");
}

// The block's tap buffers are [T, tap_cols(tap, c)] (ops.h says what each holds).
inline int64_t tap_cols(Tap t, const BlockConfig& c) {
    return config_dim(op_info(Op::block).outputs[static_cast<size_t>(t)].cols, c);
}

// The ops whose result depends on every convention in `c`, in kAllOps order.
// The ops with weight products (y = x @ W): those an implementation may
// declare an activation quantisation for (Implementation::activation_quant).
inline bool has_weight_products(Op op) { return op_info(op).uses(kSwiglu); }

inline std::vector<Op> ops_using(uint32_t c) {
    std::vector<Op> out;
    for (const OpInfo& i : op_table())
        if (i.uses(c)) out.push_back(i.op);
    return out;
}

// "rmsnorm, rope, qk_norm, attention, swiglu, block, decode, paged_attention", for messages.
inline std::string op_names() {
    std::string s;
    for (const OpInfo& i : op_table()) s += (s.empty() ? "" : ", ") + std::string(to_string(i.op));
    return s;
}

}  // namespace conform

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
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "conform/config.h"
#include "conform/interface.h"
#include "conform/ops.h"
#include "conform/twists.h"

namespace conform {

// The conventions (Convention: kRope, kHeads, ...) are conform/twists.h's.

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
    E,    // n_experts (a mixture of experts)
    ED,   // n_experts * d_model: the experts' stacked [D, .] matrices
    EFe,  // n_experts * moe_ffn_dim: the experts' stacked [Fe, D] matrices
    Fe2,  // 2 * moe_ffn_dim: an expert's gate and up, side by side
    FS,   // moe_shared_ffn_dim: the shared expert's width
    FS2,  // 2 * moe_shared_ffn_dim
    QM,   // n_heads * (qk_nope_head_dim + qk_rope_head_dim): latent attention's queries, [q_nope | q_pe] per head
    C,    // kv_lora_rank: the latent c_kv
    R,    // qk_rope_head_dim: the RoPE'd key k_pe every head shares
    KVB,  // n_heads * (qk_nope_head_dim + v_head_dim): kv_b_proj's output, [k_nope | v] per head
    VO,   // n_heads * v_head_dim: latent attention's output
};

struct TensorSpec {
    const char* name;  // schema name (fixtures/SCHEMA.md)
    Dim rows, cols;
    // A paged cache: only the rows the batch's sequences own are inputs; the
    // rest hold poison (NaN) on purpose and are not checked.
    bool pool = false;
    // An output that is -inf where a row sees no key (lse); finite elsewhere.
    bool neg_inf_when_empty = false;

    // Whether the input is there: always, but a twist's tensor (its row's
    // `tensors`: q_norm, bq, sinks, k_scale, ...) only where the twist is on.
    bool present(const BlockConfig& c) const {
        for (const Twist& t : twist_table())
            for (const char* n : t.tensors)
                if (std::string_view(n) == name) return twist_on(t, c);
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

// A call's tensors held by schema name (a typed method's arguments, a
// plugin's descriptors); a name not held is an empty view.
struct NamedTensors : CallTensors {
    std::map<std::string, View> ins;
    std::map<std::string, Positions> positions;
    std::map<std::string, MutView> outs;
    int64_t pre = 0;
    View in(const char* n) override {
        const auto it = ins.find(n);
        return it == ins.end() ? View{} : it->second;
    }
    Positions pos(const char* n) override {
        const auto it = positions.find(n);
        return it == positions.end() ? Positions{} : it->second;
    }
    MutView out(const char* n) override {
        const auto it = outs.find(n);
        return it == outs.end() ? MutView{} : it->second;
    }
    int64_t prefill() override { return pre; }
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

inline MoeWeights moe_weights(CallTensors& t) {
    MoeWeights w;
    w.w_router = t.in("w_router");
    w.router_bias = t.in("router_bias");
    w.e_bias = t.in("e_bias");
    w.w13 = t.in("w13");
    w.w2 = t.in("w2");
    w.b13 = t.in("b13");
    w.b2 = t.in("b2");
    w.ws13 = t.in("ws13");
    w.ws2 = t.in("ws2");
    w.ws_gate = t.in("ws_gate");
    return w;
}
inline TapSet moe(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.moe(t.in("x"), moe_weights(t), c, t.out("out"), t.out("route"));
    return out_only();
}
inline TapSet moe_route(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.moe_route(t.in("x"), moe_weights(t), c, t.out("out"));
    return out_only();
}
inline TapSet moe_experts(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.moe_experts(t.in("x"), t.in("route"), moe_weights(t), c, t.out("out"));
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

inline TapSet mla_attention(Implementation& i, const BlockConfig& c, CallTensors& t) {
    i.mla_attention(t.in("q"), t.in("ckv_cache"), t.in("kpe_cache"), t.in("w_kv_b"), paged_index(t), mla_params(c),
                    t.out("out"), t.out("lse"));
    return out_only();
}

}  // namespace calls

// Whether a call that returned `written` wrote the output `name`: "out"
// always; a block tap when it reported it.
inline bool wrote(TapSet written, std::string_view name) {
    // lse: paged_attention's second output, route: moe's; both always asked for
    if (name == "out" || name == "lse" || name == "route") return true;
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
    std::vector<const char*> config;     // core config fields it reads (a fixture must carry them; twists: reads())
    ToleranceRow tolerance;
    GenReach reach;
    Invoke invoke;  // the op called on an Implementation (calls:: above)

    bool uses(uint32_t c) const { return (conventions & c) == c; }
    // Whether it reads a config field: a core field in its list, or a twist's
    // whose convention it uses (conform/twists.h).
    bool reads(std::string_view field) const {
        for (const char* f : config)
            if (field == f) return true;
        const Twist* t = find_twist(field);
        return t && reads(*t);
    }
    bool reads(const Twist& t) const { return uses(t.convention); }
    // Whether an input's shape has dim d (rmsnorm's D, swiglu's F).
    bool has_dim(Dim d) const {
        for (const TensorSpec& t : inputs)
            if (t.rows == d || t.cols == d) return true;
        return false;
    }
    // Outputs with heads ([rows, heads * head_dim]): locations are (token, head, dim).
    bool has_heads(const TensorSpec& t) const { return t.cols == Dim::Q || t.cols == Dim::KVW || t.cols == Dim::N; }
    // A paged op's cache tensors (TensorSpec::pool): paged_attention's k_cache and v_cache,
    // mla_attention's ckv_cache and kpe_cache. Every page-level check, relation and trace loops over them.
    std::vector<const char*> pools() const {
        std::vector<const char*> v;
        for (const TensorSpec& t : inputs)
            if (t.pool) v.push_back(t.name);
        return v;
    }
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
        {"w3", D::D, D::F},  {"w2", D::F, D::D},          {"q_norm", D::one, D::hd},
        {"k_norm", D::one, D::hd},    {"bq", D::one, D::Q},
        {"bk", D::one, D::KVW},       {"bv", D::one, D::KVW},
        {"sinks", D::one, D::H},
        {"attn_post_norm", D::one, D::D}, {"ffn_post_norm", D::one, D::D}};
    // decode's: the block's, and an FP8 cache's scales (paged_attention's, Dim::KVS).
    std::vector<TensorSpec> decode_inputs = block_inputs;
    decode_inputs.push_back({"k_scale", D::one, D::KVS});
    decode_inputs.push_back({"v_scale", D::one, D::KVS});
    // A mixture of experts' inputs: x, the router's (route: moe, moe_route) and the experts'
    // (experts: moe, moe_experts; moe_experts takes the route instead of the router).
    auto moe_inputs = [](bool route, bool experts) {
        std::vector<TensorSpec> v = {{"x", D::T, D::D}};
        if (route) {
            v.push_back({"w_router", D::D, D::E});
            v.push_back({"router_bias", D::one, D::E});
            v.push_back({"e_bias", D::one, D::E});
        } else {
            v.push_back({"route", D::T, D::E});
        }
        if (experts)
            for (TensorSpec t : std::vector<TensorSpec>{{"w13", D::ED, D::Fe2},
                                                        {"w2", D::EFe, D::D},
                                                        {"b13", D::E, D::Fe2},
                                                        {"b2", D::E, D::D},
                                                        {"ws13", D::D, D::FS2},
                                                        {"ws2", D::FS, D::D},
                                                        {"ws_gate", D::D, D::one}})
                v.push_back(t);
        return v;
    };
    // The core fields each op reads; a twist's field is read by the ops that use its convention (reads()).
    const std::vector<const char*> block_config = {"d_model",     "n_heads",    "n_kv_heads", "head_dim",
                                                   "ffn_dim",     "rope_layout", "rope_theta", "qk_norm", "norm_eps"};
    static const std::vector<OpInfo> table = {
        {Op::rmsnorm, "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1 + w if plus_one else w)",
         kRmsNorm | kNormPlusOne,
         {{"x", D::T, D::D}, {"weight", D::one, D::D}},
         {},
         {{"out", D::T, D::D}},
         {"norm_eps"},
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
         {"head_dim", "norm_eps"},
         {2.0, 1e-9, 1e-4, 1e-5},
         {33, 33, 256},
         calls::qk_norm},
        {Op::attention,
         "softmax([softcap?(q @ repeat_interleave(k, H/KV).T * (attn_scale or 1/sqrt(hd))) + causal(q_pos, k_pos, "
         "window, chunk), sinks?])[..., :S] @ v",
         kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale,
         {{"q", D::T, D::Q}, {"k", D::S, D::KVW}, {"v", D::S, D::KVW}, {"sinks", D::one, D::H}},
         {{"q_positions", D::T}, {"k_positions", D::S}},
         {{"out", D::T, D::Q}},
         {"n_heads", "n_kv_heads", "head_dim"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {48, 2100, 256},
         calls::attention},
        {Op::swiglu, "(act(x @ w1) * (x @ w3)) @ w2, act = F.silu | F.gelu(approximate='tanh') (GeGLU)",
         kSwiglu | kGeglu,
         {{"x", D::T, D::D}, {"w1", D::D, D::F}, {"w3", D::D, D::F}, {"w2", D::F, D::D}},
         {},
         {{"out", D::T, D::D}},
         {},
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
         block_config,
         {2.0, 1e-8, 1e-3, 1e-4},
         {12, 340, 256},
         calls::decode},
        {Op::paged_attention,
         "per sequence b: attention(q[qo_indptr[b]:qo_indptr[b+1]], its pages' k and v, causal bottom-right), "
         "lse = logsumexp([scores, sinks?]); an FP8 cache: k, v = fp8(k / k_scale) * k_scale, likewise v",
         kHeads | kCausal | kWindow | kChunk | kSoftcap | kSinks | kAttnScale | kPaged | kFp8Cache,
         {{"q", D::T, D::Q},
          {"k_cache", D::S, D::KVW, true},
          {"v_cache", D::S, D::KVW, true},
          {"sinks", D::one, D::H},
          {"k_scale", D::one, D::KVS},
          {"v_scale", D::one, D::KVS}},
         {{"qo_indptr", D::B1, false, true},
          {"kv_indptr", D::B1, false, true},
          {"kv_indices", D::NP, false, true},
          {"kv_last_page_len", D::B, false, true}},
         {{"out", D::T, D::Q}, {"lse", D::T, D::H, false, true}},
         {"n_heads", "n_kv_heads", "head_dim", "page_size"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {600, 8200, 256},
         calls::paged_attention},
        {Op::moe,
         "route = top-k(scores(x @ w_router + router_bias?) + e_bias?, groups?) weights (renorm?, * rsf?); "
         "out = sum_e route[:, e] * (act(x @ w13_e + b13_e?) @ w2_e + b2_e?) + shared?(x)",
         kMoeRoute | kMoeExperts,
         moe_inputs(true, true),
         {},
         {{"route", D::T, D::E}, {"out", D::T, D::D}},
         {"d_model", "n_experts", "n_experts_per_tok", "moe_ffn_dim"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {17, 64, 0},
         calls::moe},
        {Op::moe_route,
         "out[t, e] = the weight token t gives expert e: scores(x @ w_router + router_bias?), top-k of scores + "
         "e_bias? within the top groups?, renorm?, * rsf?; 0 for the experts not chosen",
         kMoeRoute,
         moe_inputs(true, false),
         {},
         {{"out", D::T, D::E}},
         {"d_model", "n_experts", "n_experts_per_tok"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {17, 64, 0},
         calls::moe_route},
        {Op::moe_experts,
         "out = sum over e with route[:, e] != 0 of route[:, e] * (act(x @ w13_e + b13_e?) @ w2_e + b2_e?) "
         "(expert_e(route * x): weight_on_input) + shared?(x)",
         kMoeExperts,
         moe_inputs(false, true),
         {},
         {{"out", D::T, D::D}},
         {"d_model", "n_experts", "n_experts_per_tok", "moe_ffn_dim"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {17, 64, 0},
         calls::moe_experts},
        {Op::mla_attention,
         "per sequence b and head h: k = [ckv @ w_kv_b[:, h, :dn] | kpe], v = ckv @ w_kv_b[:, h, dn:] (its pages' "
         "rows); out[:, h] = softmax(q[:, h] @ k.T * (attn_scale or 1/sqrt(dn + dr)), causal bottom-right) @ v, "
         "lse = logsumexp(scores)  (absorbed: q_nope @ w_uk.T against ckv, then @ w_uv: the same function)",
         kMla | kAttnScale | kPaged,
         {{"q", D::T, D::QM}, {"ckv_cache", D::S, D::C, true}, {"kpe_cache", D::S, D::R, true}, {"w_kv_b", D::C, D::KVB}},
         {{"qo_indptr", D::B1, false, true},
          {"kv_indptr", D::B1, false, true},
          {"kv_indices", D::NP, false, true},
          {"kv_last_page_len", D::B, false, true}},
         {{"out", D::T, D::VO}, {"lse", D::T, D::H, false, true}},
         {"n_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "page_size"},
         {2.0, 1e-8, 5e-4, 5e-5},
         {300, 2100, 64},
         calls::mla_attention},
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
        case Dim::E: return c.n_experts;
        case Dim::ED: return c.n_experts * c.d_model;
        case Dim::EFe: return c.n_experts * c.moe_ffn_dim;
        case Dim::Fe2: return 2 * c.moe_ffn_dim;
        case Dim::FS: return c.moe_shared_ffn_dim;
        case Dim::FS2: return 2 * c.moe_shared_ffn_dim;
        case Dim::QM: return c.n_heads * c.mla_qk_dim();
        case Dim::C: return c.kv_lora_rank;
        case Dim::R: return c.qk_rope_head_dim;
        case Dim::KVB: return c.n_heads * (c.qk_nope_head_dim + c.v_head_dim);
        case Dim::VO: return c.n_heads * c.v_head_dim;
        default: return -1;
    }
}

inline const OpInfo& op_info(Op op) {
    for (const OpInfo& i : op_table())
        if (i.op == op) return i;
    throw std::logic_error("op_info: an op without a row");
}

// An op called on an implementation: whole where it takes calls whole
// (Implementation::call), else through the op's typed method (invoke).
// The judge, conform-worker and bench call through here.
inline TapSet call_op(Implementation& impl, Op op, const BlockConfig& c, CallTensors& t) {
    TapSet written;
    if (impl.call(op, c, t, written)) {
        written.add(Tap::out);
        return written;
    }
    return op_info(op).invoke(impl, c, t);
}

// Whether an op reads a twist, and the first twist on in c that `declared`
// does not allow (nullptr: the case is offered to an implementation declaring it).
inline const Twist* undeclared_twist(Op op, const BlockConfig& c, const TwistSet& declared) {
    return declared.refused(c, [&](const Twist& t) { return op_info(op).reads(t); });
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

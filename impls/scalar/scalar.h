// impls/scalar/scalar.h — the scalar implementation: plain float32 loops in the
// style of llama2.c's run.c.
//
// Every op is a free function over the contract's views, so the block, the
// Implementation wrapper (scalar_impl.cpp) and the mutants all run the same
// code. Each function checks the shapes of its views against its parameters
// and throws conform::ImplError naming the tensor, the expected and the found
// shape; none of them resizes or writes past an output.
//
// Arithmetic conventions, the same everywhere in this folder:
//   * every reduction has one float accumulator, summed in index order;
//   * no FMA contraction (CMakeLists passes -ffp-contract=off), so a product
//     followed by a sum rounds twice, like the reference's sequential order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <functional>

#include "conform/config.h"
#include "conform/impl.h"
#include "conform/tensor.h"

namespace conform::scalar {

// ---- ops (one .cpp each) ---------------------------------------------------

// out[T, N] = x[T, K] @ w[K, N]; one accumulator per output, k ascending.
void matmul(View x, View w, MutView out);
using MatMul = std::function<void(View x, View w, MutView out)>;
// out = x' @ w, x' = each row of x through q's blocks and back (conform/dtype.h
// act_quant_row): a weight product as a llama.cpp CPU kernel computes it (act_quant.cpp).
void matmul_act_quant(View x, View w, MutView out, ActQuant q);

// The scale both norms multiply by: 1 / sqrt(mean(x^2) + eps) over x[n].
float inv_rms(const float* x, int64_t n, float eps);
using InvRms = float (*)(const float* x, int64_t n, float eps);

// out[T, D] = x * inv_rms(x) * w          x[T, D], w[1, D]   (p.plus_one: * (1 + w))
void rmsnorm(View x, View w, const RmsNormParams& p, MutView out, InvRms scale = inv_rms);

// The row kernel behind rmsnorm and qk_norm: out[n] = x[n] * scale(x) * w[n]
// (plus_one: * (1 + w[n]), Gemma). out may alias x.
void rmsnorm_row(float* out, const float* x, const float* w, int64_t n, float eps, bool plus_one,
                 InvRms scale = inv_rms);

// RoPE's inverse frequencies inv_freq[rotary_dim / 2], in double, with p's
// scaling (HF modeling_rope_utils.py) for a sequence of seq_len tokens (the
// length only dynamic NTK looks at).
void rope_inv_freq(const RopeParams& p, int64_t seq_len, double* inv_freq);
// Dynamic NTK's base for seq_len tokens: theta itself while seq_len <= original_max_position.
double rope_dynamic_base(const RopeParams& p, double seq_len);
// What cos and sin are multiplied by: yarn's attention_factor, else 1.
double rope_attention_factor(const RopeParams& p);
// The length of the sequence a call's positions belong to: max(pos) + 1.
int64_t rope_seq_len(Positions pos);

// The angle RoPE rotates a pair by: pos * inv_freq, in double.
double rope_angle(int64_t pos, double inv_freq);
using RopeAngle = double (*)(int64_t pos, double inv_freq);
// cos and sin of the angle, times mscale, as float32.
void rope_trig(double angle, double mscale, float* c, float* s);
using RopeTrig = void (*)(double angle, double mscale, float* c, float* s);

// out[T, n*hd] = x with the first rotary_dim dims of every head rotated by its
// token's position, the rest copied   x[T, n*hd], pos[T]. Dynamic NTK uses
// seq_len = max(pos) + 1. out may alias x.
void rope(View x, Positions pos, const RopeParams& p, MutView out, RopeAngle angle = rope_angle,
          RopeTrig trig = rope_trig);

// out[T, n*hd] = rmsnorm of every head's hd slice with w[1, hd]; out may alias x.
void qk_norm(View x, View w, const QkNormParams& p, MutView out, InvRms scale = inv_rms);

// The conventions attention is made of, one field each; the defaults are the
// contract's. They are separate so that a mutant (impls/mutants/) can get
// exactly one of them wrong.
int64_t kv_head_grouped(int64_t h, int64_t n_heads, int64_t n_kv_heads);  // h / (H / KV)
bool causal(int64_t k_pos, int64_t q_pos);                                 // k_pos <= q_pos
double config_scale(const AttentionParams& p);  // p.scale (config.attn_scale), or 1 / sqrt(hd)
int64_t own_sink(int64_t h, int64_t n_heads, int64_t n_kv_heads);  // h
// Where a query's window test is asked: the call's first query position (a
// prefill chunk's), its number of query rows, and the paged cache's page size
// (0 outside one). The contract's test reads none of it.
struct WindowAt {
    int64_t q_first = 0, rows = 0, page = 0;
};
bool config_window(const AttentionParams& p, int64_t k_pos, int64_t q_pos, const WindowAt& at);  // p.in_window(k, q)
struct AttentionRules {
    int64_t (*kv_head)(int64_t h, int64_t n_heads, int64_t n_kv_heads) = kv_head_grouped;
    bool (*visible)(int64_t k_pos, int64_t q_pos) = causal;
    double (*scale)(const AttentionParams& p) = config_scale;
    bool subtract_max = true;  // softmax shifted by the row max, so exp never overflows
    float empty_row = 0.0f;    // the output of a row that sees no key
    // Visible by index instead of position, when set: key j to query t of T over S keys.
    bool (*visible_index)(int64_t j, int64_t t, int64_t S, int64_t T) = nullptr;
    int64_t score_dims = 0;    // q·k over this many leading dims of a head (0: head_dim)
    // > 0: the softmax runs over tiles of this many keys, online, and never
    // rescales its sums when the running max grows (a broken flash kernel).
    int64_t unrescaled_tile = 0;
    // With a soft-cap: masked keys read with logit -cap, as when tanh is taken
    // after a -inf mask (the bug softcap_after_mask).
    bool softcap_after_mask = false;
    // Whose sink logit head h's softmax adds (gpt-oss: its own, sinks[h]).
    int64_t (*sink_head)(int64_t h, int64_t n_heads, int64_t n_kv_heads) = own_sink;
    // An honest form, not a bug: the sink applied after the softmax through
    // its log-sum-exp, o *= exp(lse - logaddexp(lse, sink)), as a split-KV
    // kernel does after its merge (MagiAttention after FlashAttention-2).
    bool sink_after_lse = false;
    // The sliding window's (and the chunk's) test for key k_pos and query q_pos.
    bool (*in_window)(const AttentionParams& p, int64_t k_pos, int64_t q_pos, const WindowAt& at) = config_window;
    // The sink logit multiplied by the score scale, like a score (a bug: the
    // sink is a logit as it stands).
    bool sink_scaled = false;
    // The page size paged_attention runs its sequences over (WindowAt::page); 0 for a plain call.
    int64_t page = 0;
};

// out[T, H*hd] = softmax(q k^T / sqrt(hd), keys with k_pos <= q_pos) v
//   q[T, H*hd], k[S, KV*hd], v[S, KV*hd], q_pos[T], k_pos[S]
// A query row that sees no key at all gets zeros (see attention.cpp).
void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p, MutView out,
               const AttentionRules& rules = {});

// paged_attention's rules (paged_attention.cpp), each a seam a mutant breaks.
int64_t paged_kv_len(const PagedIndex& idx, int64_t P, int64_t b);         // (n_b - 1) * P + last_page_len
int64_t paged_row(const PagedIndex& idx, int64_t P, int64_t b, int64_t i);  // key i's cache row
int64_t paged_q_pos(int64_t j, int64_t q_len, int64_t kv_len);              // kv_len - q_len + j
// An FP8 cache (PagedAttentionParams::kv_cache_dtype): one value written
// into the cache and read back, each step a seam a mutant breaks.
float kv_scale(const PagedAttentionParams& p, bool is_v, int64_t kv_head);  // (is_v ? v_scale : k_scale)[head or 0]
float kv_write(float x, float scale, KvCacheDtype d);                        // fp8(x / scale): the code's value
float kv_read(float code, float scale);                                       // code * scale
struct KvCacheRules {
    bool quantise = true;  // the cache dtype honoured at all
    float (*scale)(const PagedAttentionParams& p, bool is_v, int64_t kv_head) = kv_scale;
    float (*write)(float x, float scale, KvCacheDtype d) = kv_write;
    float (*read)(float code, float scale) = kv_read;
};
struct PagedRules {
    int64_t (*kv_len)(const PagedIndex& idx, int64_t P, int64_t b) = paged_kv_len;
    int64_t (*row)(const PagedIndex& idx, int64_t P, int64_t b, int64_t i) = paged_row;
    int64_t (*q_pos)(int64_t j, int64_t q_len, int64_t kv_len) = paged_q_pos;
    double lse_scale = 1.0;    // lse multiplied by this (1 / ln 2: base 2)
    bool lse_adds_max = true;  // lse = m + log(sum exp(s - m)) (false: the max m not added back)
    bool write_empty = true;   // a row that sees no key gets out 0 and lse -inf
    AttentionRules attention;  // its kv_head and scale
    KvCacheRules cache;        // an FP8 cache's write and read
};

// Sequence b's keys and values, k_b and v_b [kv_len, KV*hd] (kv_len their rows), in key order as
// the rules read them: an FP8 cache written and read back.
void paged_gather(View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p, int64_t b,
                  const PagedRules& rules, MutView k_b, MutView v_b);
// out[T, H*hd], lse[T, H] of a batch over a paged cache (conform/interface.h).
void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                     MutView out, MutView lse, const PagedRules& rules = {});

// Multi-head latent attention over a paged latent cache (conform/interface.h;
// mla_attention.cpp), each rule a seam a mutant breaks.
double mla_scale(const MlaParams& p);  // attn_scale, or 1 / sqrt(dn + dr)
struct MlaRules {
    // by_rows: absorbed where a sequence has at most 4 new queries (decode,
    // multi-token prediction), MHA above (prefill), as engines choose.
    enum class Form { by_rows, mha, absorbed };
    Form form = Form::by_rows;
    double (*scale)(const MlaParams& p) = mla_scale;
    bool w_uk_transposed = false;  // each head's w_uk [dc, dn] read as if stored [dn, dc]
    bool w_uv_missing = false;     // w_uv never applied: a head's output its first dv latents (I[dc, dv]: zeros past dc)
    // A split-KV kernel (a split per page) whose merge adds its splits as they
    // are, each exponentiated against its own max, never rescaled by exp(m_i - m).
    bool split_merge_unrescaled = false;
    int64_t (*row)(const PagedIndex& idx, int64_t P, int64_t b, int64_t i) = paged_row;  // key i's cache row
};
// out[T, H*dv], lse[T, H] of a batch over a paged latent cache.
void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx, const MlaParams& p,
                   MutView out, MutView lse, const MlaRules& rules = {});

// out[T, D] = (act(x @ w1) * (x @ w3)) @ w2       x[T, D], w1/w3[D, F], w2[F, D]
// (the products through mm, the gate's activation act).
using Activation = float (*)(float);
float silu(float g);
float gelu_tanh(float g);
Activation activation(HiddenAct a);  // config.hidden_act's function
void swiglu(View x, View w1, View w3, View w2, MutView out, const MatMul& mm = matmul, Activation act = silu);

// A mixture of experts (conform/interface.h; docs/moe.md), in three files:
// moe_route.cpp (route[T, E]: each token's weight on each expert, 0 where not
// chosen), moe_experts.cpp (out[T, D] from a route), moe.cpp (both).
// Each rule a seam a mutant breaks (impls/mutants/moe.cpp).
struct MoeRules {
    bool weights_from_choice = false;     // the weights gathered from the biased choice scores
    bool down_bias_after_weight = false;  // b2 added after the routing weight: w * (a @ w2) + b2
    bool group_mask_zero = false;         // the groups not kept filled with 0.0, not -inf
    bool router_bf16 = false;             // the router's logits and scores held in bf16
    bool softmax_over_all = false;        // softmax scoring: the k weights not renormalised (over all E)
    bool swiglu_clamp_dropped = false;    // gpt-oss's SwiGLU without its clamps
    bool shared_twice = false;            // the shared expert added twice
};
void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route, const MoeRules& rules = {});
// One token's route from its router logits (x @ w_router + router_bias, [E];
// overwritten with its scores): the scoring, the choice, the weights into
// route[E]. moe_route's rule after the product; simd's router calls it after
// its own product.
void moe_route_row(float* logits, const MoeWeights& w, const BlockConfig& c, float* route, const MoeRules& rules = {});
void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out,
                 const MoeRules& rules = {});
void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route, const MoeRules& rules = {});
// The shapes of every weight the config has on, against it (moe_route's router, moe_experts' experts).
void check_moe_weights(const char* op, const MoeWeights& w, const BlockConfig& c, bool router, bool experts);

// ---- the block (block.cpp) and decoding it (decode.cpp) --------------------

// wqkv[D, (H + 2*KV)*hd] = [wq | wk | wv], concatenated column-wise, row by row,
// so that x @ wqkv = [x @ wq | x @ wk | x @ wv] bitwise.
void pack_qkv(View wq, View wk, View wv, MutView wqkv);

// One forward of the block over T tokens; writes out[Tap::out] and every tap
// whose buffer is non-null, and returns the set it wrote.
TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out);

// The first `prefill` tokens in one forward, then the others one at a time,
// through a KV cache of rotated k and unrotated v. out[T, D].
void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c, MutView out);

// ---- the implementation (scalar_impl.cpp, forward in block.cpp) -----------

struct RunState;  // forward.h: one forward's activations
struct KvCache;   // forward.h: rotated keys and values of every token so far

// The scalar implementation. Its op entry points call the free functions above;
// block() and decode() run forward(), which composes those same entry points
// and the protected stages below, so a class that overrides one of them
// changes the op and the block alike. That is the seam the mutants use
// (impls/mutants/): each derives from ScalarImpl and overrides one thing.
class ScalarImpl : public Implementation {
   public:
    explicit ScalarImpl(std::string name = "scalar") : name_(std::move(name)) {}

    std::string name() const override { return name_; }
    DType dtype() const override { return DType::f32; }
    Support supports(Op op, const BlockConfig& c) const override;
    // One sequence at a time, in key order: nothing else in the batch reaches its rows.
    // (Not mla_attention: a sequence's form follows its query count, so a chunk of a prefill is absorbed.)
    bool batch_invariant(Op op) const override { return op == Op::paged_attention; }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override;
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override;
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override;
    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override;
    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override;
    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override;
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override;
    void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx, const MlaParams& p,
                       MutView out, MutView lse) override;
    void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) override;
    void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route) override;
    void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) override;

   protected:
    // The block's own steps, in the order forward() takes them.

    // q += q_proj.bias, k += k_proj.bias, v += v_proj.bias when config.qkv_bias
    // (Qwen2): part of the projection, before QK-norm and RoPE.
    virtual void add_qkv_bias(MutView q, MutView k, MutView v, const BlockWeights& w, const BlockConfig& c);

    // q, k = self.q_norm(q), self.k_norm(k) when config.qk_norm, into q_normed,
    // k_normed. Returns what RoPE is to rotate: those, or q and k as they are.
    virtual std::pair<View, View> norm_qk(View q, View k, const BlockWeights& w, const BlockConfig& c,
                                          MutView q_normed, MutView k_normed);

    // q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    virtual void rotate_qk(View q, View k, Positions pos, const BlockWeights& w, const BlockConfig& c, MutView q_rot,
                           MutView k_rot);

    // One forward's new cache rows: self.cache_k[...] = k_rot; self.cache_v[...] = v.
    // k is the key before RoPE; decode_step says whether this forward is a
    // decode step (one token after the prefill) rather than the prefill.
    struct NewKv {
        View k, k_rot, v;
        Positions pos;
        bool decode_step = false;
    };
    virtual void cache_write(const NewKv& in, const BlockConfig& c, MutView k_rows, MutView v_rows);

    // An FP8 cache's write and read (decode with config.kv_cache_dtype, as
    // paged_attention's): forward() stores every row cache_write wrote as
    // read(write(x, scale), scale). A mutant with a cache bug overrides it.
    virtual KvCacheRules kv_cache_rules() const { return {}; }

    // h = x + attn_wo
    virtual void attention_residual(View x, View attn_wo, MutView h);
    // A sublayer's output as its residual add takes it: y itself, or (Gemma
    // 2/3's sandwich_norm) rmsnorm(y, w) written to `normed`.
    virtual View sublayer_norm(View y, View w, const BlockConfig& c, MutView normed);

    // The position decode() computes the token at pos at (itself).
    virtual int64_t decode_position(int64_t pos);

    // Every matrix product of the block and of swiglu: out = x @ w.
    virtual void product(View x, View w, MutView out);

    // A mixture of experts' rules (moe, moe_route, moe_experts); a mutant overrides them.
    virtual MoeRules moe_rules() const { return {}; }
    // Latent attention's rules (mla_attention); a mutant overrides them.
    virtual MlaRules mla_rules() const { return {}; }

    // The FFN gate's activation for config.hidden_act (swiglu, and so the block's FFN).
    virtual Activation gate_activation(HiddenAct a) const { return activation(a); }

    // The RoPE a call over a sequence of seq_len tokens applies: p, with
    // dynamic NTK resolved to its base for that length (type none, theta =
    // the scaled base), so that decode()'s one-token steps rotate with the
    // base of the whole call, as block() does. Every rotation goes through it.
    virtual RopeParams rope_for_call(const RopeParams& p, int64_t seq_len);

    // rope_for_call for a rotation at positions pos: the call's length is
    // decode()'s whole sequence while it runs, else max(pos) + 1.
    RopeParams call_rope(const RopeParams& p, Positions pos);

   private:
    void forward(View x, Positions pos, const BlockWeights& w, View wqkv, const BlockConfig& c, bool decode_step,
                 KvCache& cache, RunState& s);
    // The rows just cached through the FP8 cache, when the config has one.
    void cache_round_trip(const BlockWeights& w, const BlockConfig& c, MutView k_rows, MutView v_rows) const;

    std::string name_;
    int64_t call_len_ = 0;  // decode(): max(positions of the call) + 1 while it runs; 0 otherwise
};

// Throws ImplError unless options.dtype is f32; simd_target and threads are ignored.
std::unique_ptr<Implementation> make_scalar(const ImplOptions& options);
// scalar-q8_0, scalar-q8_k (act_quant.cpp): scalar with every weight
// product's activations quantised so, declared (Implementation::activation_quant).
std::unique_ptr<Implementation> make_scalar_act_quant(const ImplOptions& options, ActQuant q);

// ---- shape checks shared by the ops ----------------------------------------
namespace detail {

inline std::string shape_str(int64_t rows, int64_t cols) {
    return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// Throws "op: name must be [rows, cols], found [r, c]" (or "... has no data").
inline void expect_shape(const char* op, const char* name, int64_t rows, int64_t cols, const float* data,
                         int64_t want_rows, int64_t want_cols) {
    if (rows != want_rows || cols != want_cols)
        throw ImplError(std::string(op) + ": " + name + " must be " + shape_str(want_rows, want_cols) + ", found " +
                        shape_str(rows, cols));
    if (data == nullptr && rows * cols > 0)
        throw ImplError(std::string(op) + ": " + name + " " + shape_str(rows, cols) + " has no data");
}
inline void expect_shape(const char* op, const char* name, View t, int64_t want_rows, int64_t want_cols) {
    expect_shape(op, name, t.rows, t.cols, t.data, want_rows, want_cols);
}
inline void expect_shape(const char* op, const char* name, MutView t, int64_t want_rows, int64_t want_cols) {
    expect_shape(op, name, t.rows, t.cols, t.data, want_rows, want_cols);
}

inline void expect_positions(const char* op, const char* name, Positions p, int64_t want_n) {
    if (p.n != want_n)
        throw ImplError(std::string(op) + ": " + name + " must have " + std::to_string(want_n) +
                        " entries, found " + std::to_string(p.n));
    if (p.data == nullptr && p.n > 0) throw ImplError(std::string(op) + ": " + name + " has no data");
}

inline void expect(bool ok, const char* op, const std::string& what) {
    if (!ok) throw ImplError(std::string(op) + ": " + what);
}

// What every op needs from the config, whatever the implementation: RoPE
// pairs (head_dim and rotary_dim even), GQA groups (H a multiple of KV).
// Implementations add their own limits after it.
inline Support config_support(Op op, const BlockConfig& c) {
    const bool needs_rope = op_info(op).uses(kRope);
    const bool needs_gqa = op_info(op).uses(kHeads);
    if (needs_rope && (c.head_dim <= 0 || c.head_dim % 2 != 0))
        return Support::no("RoPE rotates pairs: head_dim must be positive and even, found " +
                           std::to_string(c.head_dim));
    if (needs_rope && (c.rotary() % 2 != 0 || c.rotary() > c.head_dim))
        return Support::no("rotary_dim must be even and at most head_dim = " + std::to_string(c.head_dim) +
                           ", found " + std::to_string(c.rotary_dim));
    if (op_info(op).uses(kPaged) && c.page_size <= 0)
        return Support::no("paged_attention needs page_size > 0, found " + std::to_string(c.page_size));
    if (needs_gqa && (c.n_kv_heads <= 0 || c.n_heads % c.n_kv_heads != 0))
        return Support::no("n_heads = " + std::to_string(c.n_heads) + " must be a multiple of n_kv_heads = " +
                           std::to_string(c.n_kv_heads));
    return Support::yes();
}

// Every block weight [in, out] against the config (scalar, simd and cuda share it).
inline void check_block_weights(const char* op, const BlockWeights& w, const BlockConfig& c) {
    const int64_t D = c.d_model, F = c.ffn_dim, Q = c.q_width(), KVW = c.kv_width();
    expect_shape(op, "attn_norm", w.attn_norm, 1, D);
    expect_shape(op, "wq", w.wq, D, Q);
    expect_shape(op, "wk", w.wk, D, KVW);
    expect_shape(op, "wv", w.wv, D, KVW);
    expect_shape(op, "wo", w.wo, Q, D);
    expect_shape(op, "ffn_norm", w.ffn_norm, 1, D);
    expect_shape(op, "w1", w.w1, D, F);
    expect_shape(op, "w3", w.w3, D, F);
    expect_shape(op, "w2", w.w2, F, D);
    if (c.qk_norm) {
        expect(w.q_norm.data != nullptr && w.k_norm.data != nullptr, op,
               "qk_norm is on but q_norm / k_norm were not given");
        expect_shape(op, "q_norm", w.q_norm, 1, c.head_dim);
        expect_shape(op, "k_norm", w.k_norm, 1, c.head_dim);
    }
    if (c.qkv_bias) {
        expect(w.bq.data != nullptr && w.bk.data != nullptr && w.bv.data != nullptr, op,
               "qkv_bias is on but bq / bk / bv were not given");
        expect_shape(op, "bq", w.bq, 1, Q);
        expect_shape(op, "bk", w.bk, 1, KVW);
        expect_shape(op, "bv", w.bv, 1, KVW);
    }
    if (c.attn_sinks) {
        expect(w.sinks.data != nullptr, op, "attn_sinks is on but sinks were not given");
        expect_shape(op, "sinks", w.sinks, 1, c.n_heads);
    }
    if (c.sandwich_norm) {
        expect(w.attn_post_norm.data != nullptr && w.ffn_post_norm.data != nullptr, op,
               "sandwich_norm is on but attn_post_norm / ffn_post_norm were not given");
        expect_shape(op, "attn_post_norm", w.attn_post_norm, 1, D);
        expect_shape(op, "ffn_post_norm", w.ffn_post_norm, 1, D);
    }
}

}  // namespace detail
}  // namespace conform::scalar

// harness/reference/reference.h — the LibTorch reference, seen from outside.
//
// This header is torch-free on purpose: only the .cpp files of this folder
// include LibTorch, so only they pay its ~12 s compile cost.
//
// The reference computes every op the way the ecosystem writes it (HF /
// Meta), independently of impls/scalar: NeoX by rotate_half, interleaved by
// complex multiplication, GQA by repeat_interleave, masks with -inf by
// position, softmax by torch. It runs:
//   * in float64 — the truth every implementation is measured against;
//   * in an implementation's dtype — the low-precision baseline of the
//     tolerance model, in two legitimate summation orders (the library's
//     blocked order, and one accumulator in index order);
//   * with one convention changed (a Variant) — the hypotheses of diagnosis.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "core/case.h"

namespace conform::ref {

enum class Precision { f64, f32, bf16, f16 };
Precision precision_of(DType d);
const char* to_string(Precision p);

// Summation order of every reduction (matmuls, norms, softmax sums).
//   library:    what LibTorch/OpenBLAS does (many partial sums, blocked).
//   sequential: one accumulator, index order, as a plain loop does.
// Both are correct programs; the tolerance model allows the worse of the two.
enum class Order { library, sequential };

// One convention changed with respect to the case's config. Default = faithful.
struct Variant {
    // The reference run with this config instead of the case's: a twist's bug
    // as a config edit (conform/twists.h: ignored, W ± 1, a chunk read as a
    // window, ...). `edited` says what changed, for describe().
    std::optional<BlockConfig> config;
    std::string edited;
    // The variant whose config is `computed` where the case meant `meant`.
    static Variant with_config(const BlockConfig& meant, const BlockConfig& computed);

    std::optional<RopeLayout> layout;  // the other pairing
    std::optional<double> theta;       // a different base
    bool rope_angle_bf16 = false;      // pos * inv_freq rounded to bf16 before cos/sin
    bool rope_cos_sin_bf16 = false;    // cos and sin rounded to bf16 (a bf16 table in a float32 kernel)
    bool rope_inv_freq_bf16 = false;   // inv_freq rounded to bf16
    bool rope_positions_f16 = false;   // positions rounded to f16 (exact only to 2048)
    bool rope_pos_from_start = false;  // each row rotated at positions[0] + row, not its own position
    std::optional<RopeScaling> scaling;  // a scaling applied in place of the config's (present though the config has none)
    int64_t rope_pos_shift = 0;        // every rotation at pos + shift
    int64_t decode_pos_shift = 0;      // decode: tokens after the prefill rotated at pos + shift
    std::optional<RopeScalingType> scaling_type;  // the config's scaling parameters read as another type
    bool dynamic_at_scaled_context = false;  // dynamic NTK's base at seq_len = original_max_position * factor, always
    bool rope_twice = false;           // q and k rotated twice
    bool v_rotated = false;            // v rotated like k
    bool k_unrotated = false;          // decode: keys of tokens after the prefill cached (and read) unrotated

    // (QK-norm dropped is a config edit: the qk_norm twist's.) all_heads: one RMS over H*hd
    enum class QkNorm { as_config, on_unit_weights, after_rope, all_heads };
    QkNorm qk_norm = QkNorm::as_config;

    bool gqa_tiled = false;  // query head h reads kv head h % KV instead of h / group

    // An engine that quantises a matmul's input rows (llama.cpp's CPU backend,
    // against K-quant weights: Q8_K, its vec_dot_type): the weights named here
    // (wq, wk, wv, wo, w1, w3, w2) multiply their input after it went through
    // Q8_K and back in float32 (act_quant_round_trip, torch_ops.h).
    std::set<std::string> q8_k_inputs;
    // An engine whose GeGLU gate goes through ggml's CPU GELU (GGML_GELU_FP16):
    // the gate rounded to float16 and looked up in a float16 table of
    // gelu_tanh (0 at a <= -10, a at a >= 10). llama.cpp's gemma on the CPU.
    bool gelu_f16_table = false;

    // Qwen2's projection biases (config.qkv_bias) added to the rotated q and
    // k (a fused rope kernel that takes the bias last). (Dropped: a config edit.)
    enum class QkvBias { as_config, after_rope };
    QkvBias qkv_bias = QkvBias::as_config;

    // <=, all, <, <= +1; by index instead of position: key j visible to query
    // i iff j <= i + (S - T) (bottom-right) or j <= i (top-left).
    enum class Mask { causal, none, strict, plus_one, index_tail, index_top };
    Mask mask = Mask::causal;
    int64_t score_dims = 0;     // q·k over the first score_dims dims of a head only (0: all)
    int64_t softmax_tile = 0;   // softmax over key tiles of this size whose running max never rescales the sums
    // The tiles as a split-KV kernel's splits: each exponentiated against its own max
    // and merged by adding their sums, never rescaled to the common max (lse:
    // the common max + log of those sums).
    bool softmax_tile_local = false;
    int64_t kv_ring = 0;        // a one-token query (a decode step) sees only the last kv_ring cached keys

    bool softcap_after_mask = false;  // cap · tanh(s / cap) after the -inf mask: masked keys get logit -cap
    // per_kv_head: head h reads sinks[h / group]; scaled: the sink logit times the score scale (none at all: a
    // config edit)
    enum class Sinks { faithful, per_kv_head, scaled };
    Sinks sinks = Sinks::faithful;
    // A sliding window's mask wrong on one path: its edge taken from the
    // call's first query for every query (k_pos > q_pos[0] - W); widened to
    // the start of the page its first key is on (window_page: the page size);
    // not applied where a call (a paged sequence) has more than one query
    // (decode_only), or where it has one (prefill_only).
    enum class Window { as_config, from_first_query, by_page, decode_only, prefill_only };
    Window window = Window::as_config;
    int64_t window_page = 0;
    std::optional<double> scale;   // instead of 1/sqrt(head_dim)
    bool softmax_no_max = false;   // exp(score) without subtracting the row max: float32's inf / NaN pattern
    bool empty_row_nan = false;    // a query that sees no key gets NaN (a masked torch softmax), not zeros
    bool rms_eps_outside = false;  // x / (sqrt(mean(x^2)) + eps)
    bool rms_mean_abs = false;     // mean(|x|) in place of mean(x^2)
    bool rms_tail_skipped = false;  // the sum of squares over the first n - n % 8 elements (divided by n)
    bool swiglu_gate_on_up = false;  // (x@w1) * act(x@w3)
    // A mixture of experts: the weights gathered from scores + e_bias (the
    // choice's scores); the experts' down bias added after the routing weight.
    bool moe_weights_from_choice = false;
    bool moe_down_bias_after_weight = false;
    bool moe_group_mask_zero = false;   // the groups not kept filled with 0.0 (HF's masked_fill), not -inf
    bool moe_router_bf16 = false;       // the router's logits and scores rounded to bf16
    bool moe_swiglu_no_clamp = false;   // gpt-oss's SwiGLU without min(gate, L) and clamp(up, -L, L)
    bool moe_shared_twice = false;      // the shared expert's output added twice
    bool gelu_gate = false;          // gelu(x@w1) * (x@w3), exact (erf) GELU: a GELU MLP's gate
    bool layer_norm = false;         // the norms subtract the mean (LayerNorm without bias) before dividing by the rms
    bool post_norm = false;          // h = norm(x + attn(x)), out = norm(h + ffn(h)): post-norm, not pre-norm
    // Gemma 2/3's sandwich norms (config.sandwich_norm): dropped, or taken
    // after the residual add, h = rmsnorm(x + attn @ wo, attn_post_norm) (the
    // original Transformer's place, where HF's Llama name for the pre-FFN norm,
    // post_attention_layernorm, points a reader).
    enum class Sandwich { as_config, after_residual };  // (dropped: a config edit)
    Sandwich sandwich = Sandwich::as_config;
    bool residual_missing = false;   // h = attn @ wo, the attention residual dropped
    // paged_attention
    bool paged_block_table_ignored = false;  // a sequence's pages read as consecutive from its first
    bool paged_queries_at_start = false;       // a sequence's queries at positions 0.. (top-left), not its last
    bool paged_sequences_packed = false;       // the batch as one packed sequence: each also sees earlier sequences' keys
    bool paged_last_page_len_ignored = false;  // every last page read whole
    bool paged_partial_page_dropped = false;   // kv_len / page_size pages (floor): a last partial page dropped
    bool paged_one_slot_past = false;          // a partial last page read one slot past its length (kv_len + 1)
    bool paged_sink_per_page = false;          // the sink added once per page of the sequence (each split starts from it)
    bool paged_lse_without_sink = false;       // lse over the keys alone: the sink left out of it (out keeps it)
    bool lse_base2 = false;                  // lse as log2 (FlashInfer's internal base) where the contract is ln
    bool lse_max_dropped = false;            // lse = log sum exp(s - max): the row max not added back
    bool paged_split_unrescaled = false;     // each page a split, merged without exp(m_i - m) (softmax_tile_local)
    // Without sinks, NaN (out and lse) for a row whose first page holds no key
    // it sees while a later page does: a split-KV merge from (-inf, 0).
    bool paged_first_page_empty_nan = false;
    // mla_attention: kv_b_proj's key half (w_uk) read per head as if stored [dn, dc].
    bool mla_w_uk_transposed = false;
    // mla_attention: w_uv never applied (identity [dc, dv] in its place): a head's output its first dv latents
    // (zeros past dc).
    bool mla_w_uv_missing = false;
    // An FP8 KV cache (config.kv_cache_dtype) written or read wrongly: not
    // quantised at all; the scales taken as 1; V written and read with K's
    // scale; per-head scales read as one (scale[0] for every head); rounded
    // toward zero; not saturating (past the max: NaN / inf); the scale
    // multiplied in twice on the read.
    // (Not quantised at all: a config edit, the kv_cache_dtype twist's.)
    enum class KvFp8 {
        faithful,
        scale_ignored,
        k_scale_for_v,
        per_tensor_read,
        truncated,
        unsaturated,
        dequant_twice,
        reciprocal_scale,  // written as fp8(k * fl(1 / scale)): another code where k / scale is a rounding tie
        read_divides,      // read back as code / scale (the write's division repeated on the read)
    };
    KvFp8 kv_fp8 = KvFp8::faithful;

    bool faithful() const;
    std::string describe() const;  // e.g. "rope_layout=interleaved, theta=10000"
};

struct Options {
    Precision precision = Precision::f64;
    Order order = Order::library;
    Variant variant;
    // decode: every tap of the block it is computed as, beside "out" (what
    // the a-priori bound starts from; a decode case's outputs are "out" only).
    bool decode_taps = false;
    // The activations of every weight product quantised so before it, as an
    // implementation declares (Case::act_quant): the baselines only.
    ActQuant act_quant = ActQuant::none;
    // A router's choice given rather than made ([T, E] row-major, nonzero at
    // each token's K chosen experts): the weights and everything after them
    // computed on it. The judge's: a kernel judged on the selection it took
    // at a near-tie, the baselines on the reference's (judge/judge.cpp).
    const std::vector<uint8_t>* route_taken = nullptr;
};

// Runs the case's op. Returns "out" and, for block, every tap by name (all as
// float64, whatever precision it was computed in). Decode's reference is the
// block over all T tokens (by definition decode must equal it).
NamedD run(const Case& c, const Options& o = {});

// The a-priori term of the tolerance model, per element of each output (by
// name, same shape): how far a legitimate program in `dtype` (stored in the
// dtype, arithmetic in float32) may land from the float64 truth — its own
// reductions' noise in any order (Higham's typical bound, sqrt(K)·u·Σ|a_k b_k|),
// a rounding to the dtype wherever a value may be stored, and its inputs'
// bounds carried through each stage of the block (noise.cpp). Two sampled
// orders (the baselines) can understate what a third legitimate order does,
// and an ill-conditioned stage amplifies what it inherits.
// `truth`: the float64 reference of this case when the caller has it (a
// block's taps are its starting point; otherwise it is computed again).
// `variant`, when given, is a hypothesis whose attention sums other keys
// (paged sequences packed with the earlier ones, queries at the start, a
// partial page dropped; a window of its own, on attention too): the bound of
// a program that computes it sums those (`truth` is then the variant's
// float64 reference).
std::map<std::string, DTensor> reduction_noise(const Case& c, DType dtype, const NamedD* truth = nullptr,
                                               const Variant* variant = nullptr);

// LibTorch's intra-op threads for the reference (its default on some
// machines is one, whatever the cores). 0: every core.
void set_threads(int n = 0);

// The threads a case's truth (its reference, baselines and bound) runs on:
// one for a small case, every thread set_threads() gave for a case with a
// full-size layer (2^18 input elements or more). Small ops gain nothing from
// threads, and each parallel region leaves its workers spinning on the cores
// the next step needs (the implementation under test, simd's pool): LibTorch's
// OpenMP workers, and the BLAS's own (OpenBLAS's pthreads build yields in a
// loop after every GEMM, whatever LibTorch's count). Both are set, and left
// so until a case of the other kind: switching per case would recreate
// LibTorch's pthreadpool each time, whose new workers spin too. On 2 cores
// the default gate took 9.7-12 s with threads everywhere, 8.0-8.6 s with
// LibTorch's alone on one (BENCHMARKS.md, "Time to a verdict").
void threads_for(const Case& c);

// The reference's version string (LibTorch version), for reports.
std::string version();

}  // namespace conform::ref

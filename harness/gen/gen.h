// harness/gen/gen.h — property cases: RapidCheck generators that reach the
// traps, and canonical ids that reproduce a case exactly.
//
// A property case is a CaseSpec: sizes, conventions, positions, input
// magnitude and a seed. The spec is what RapidCheck generates and shrinks;
// the tensors are drawn from the seed deterministically (materialize), so a
// shrunk spec prints as a short id, and the id alone rebuilds the case:
//   rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,mag=1,outliers=0,seed=12)
// RoPE scaling and partial rotary appear in the id only when a case has them
// (after theta: rd=8,scaling=dynamic,factor=2,orig=32), so every id written
// before they existed still parses to the same case.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/case.h"

namespace rc {
template <typename T>
class Gen;
}

namespace conform::gen {

struct RealLayer;

// The smallest configuration a case starts from (and shrinks toward).
inline BlockConfig small_config() {
    BlockConfig c;
    c.d_model = 8;
    c.n_heads = c.n_kv_heads = 1;
    c.head_dim = 4;
    c.ffn_dim = 8;
    return c;
}

struct CaseSpec {
    Op op = Op::rmsnorm;
    int64_t T = 1;           // rows (tokens / queries)
    int64_t S = 1;           // attention: keys
    // The case's configuration, as its op reads it (the rest keeps these
    // defaults): rope and qk_norm's heads in x are config.n_heads; scaling
    // and a partial rotary only for rope, block and decode, when drawn.
    BlockConfig config = small_config();
    int64_t pos = 0;         // position of the first row (query)
    int64_t kpos = 0;        // attention: position of the first key
    // How the positions run from pos (and kpos): positions_of() below.
    // Attention and RoPE define their result by position, so they also get
    // arrays that are not increasing; a block's are one sequence.
    enum class Shape { contiguous, gaps, restarts, shuffled } shape = Shape::contiguous;
    int64_t prefill = 0;     // decode
    double mag = 1.0;        // input magnitude (x, q, k)
    // block, decode: q and k scaled by this (wq and wk, or under QK-norm its
    // q_norm and k_norm weights), so the scores scale by its square. Drawn
    // scores are ~N(0, 1); real models' reach hundreds, where the softmax's
    // max subtraction, its online rescale and the mask decide the result.
    double qk_gain = 1.0;
    // block, decode with config.qkv_bias: each of bq, bk, bv is this plus
    // N(0, 1) per channel. Qwen2's k biases reach tens; a bias with a large
    // mean shifts every score of a row (bq) or every output (bv), where a
    // dropped bias cannot hide as noise.
    // (The drawn mean of a twist's tensors: its row's mean_id, "bias_mean".)
    double bias_mean = 0.0;
    int64_t outliers = 0;    // input channels scaled x50 (outlier channels)
    // paged_attention: the batch, one entry per sequence: its keys (all in
    // the paged cache, the new tokens' too) and its queries, the last q_lens[b]
    // of them (T = Σ q_lens, S = Σ kv_lens); the page size is config.page_size.
    // The pages are a permutation of a pool three times what the batch needs,
    // drawn from the seed; every row no sequence owns holds poison (a NaN
    // whose payload is its row: poison_row() names the row a NaN came from).
    std::vector<int64_t> kv_lens, q_lens;
    // The pool: this many times the pages the batch needs, and one more (in
    // the id only when not 3: a serving-size case measured at pool=1 fits in memory).
    int64_t pool = 3;
    uint64_t seed = 0;
    // A checkpoint's layer (conform --weights PATH --layer N): the case takes
    // its weights instead of drawn ones, and with model_inputs its inputs are
    // the layer's real activations (the id then ends ",layer=N,inputs=model").
    // `real` holds them while the layer's cases run; an id parsed without it
    // names the layer and the run must supply it (run/real.h).
    int64_t layer = -1;
    bool model_inputs = false;
    std::shared_ptr<const RealLayer> real;
};

// The poison in a paged cache's row `row` (a quiet NaN no arithmetic makes,
// its payload the row), and the row a NaN came from, if it carries one.
// Bit 21 of the mantissa tags a pool's poison (the harness's output poison,
// 0x7FC0DEAD, has it clear); bits 0-20 hold the row. Inline: the relations
// re-tag every element of a pool that moves.
constexpr uint32_t kPoolPoison = 0x7FE00000u, kPoisonRowBits = 0x1FFFFFu;
inline uint32_t poison_bits(int64_t row) { return kPoolPoison | (static_cast<uint32_t>(row) & kPoisonRowBits); }
inline bool is_poison_bits(uint32_t b) { return (b & ~kPoisonRowBits & 0x7FFFFFFFu) == kPoolPoison; }
inline float poison(int64_t row) {
    const uint32_t b = poison_bits(row);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
inline std::optional<int64_t> poison_row(float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    if (!is_poison_bits(b)) return std::nullopt;
    return static_cast<int64_t>(b & kPoisonRowBits);
}

// One layer of a real checkpoint, as property cases take it.
struct RealLayer {
    int64_t layer = 0;
    bool model_inputs = false;  // --inputs model: the inputs are the real residual stream's
    int64_t rows = 0;           // model inputs: rows of the stream (a case takes its first T)
    int64_t start = 0;          // model inputs: the position of the stream's first row
    int64_t n_heads = 0;        // the model's query heads: q and rope_in are [rows, n_heads * head_dim]
    // Filled while the layer's cases run (run/real.h), empty otherwise:
    Named weights;  // attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2 (q_norm, k_norm): [in, out]
    // Model inputs: the reference's activations of the layer on the stream,
    // float32, [rows, width]: x (the layer's input), attn_in, q, rope_in
    // (q as RoPE sees it: after QK-norm when the model has it), q_rot, k_rot,
    // v, ffn_in.
    Named acts;
};

// The property cases of a run for one op: its seed and, for `conform
// --preset` / `--config`, the configuration every case is pinned to — its
// conventions (layout, theta, scaling, rotary_dim, qk_norm, eps) and sizes
// (heads, kv heads, head_dim, d_model, ffn_dim; the caller scales the widths
// down) replace the drawn ones; tokens, positions and inputs are still drawn.
struct Stream {
    Op op = Op::rmsnorm;
    uint64_t seed = 0;
    std::optional<BlockConfig> pin;
    // A checkpoint's layer the cases take (the pin is then its config).
    std::shared_ptr<const RealLayer> real = nullptr;
    // > 0: at most this many rows (tokens) in the ops with weights (block,
    // decode, swiglu) — a full-size block costs T · 2 · params flops per pass.
    int64_t max_rows = 0;
    // The twists the implementations it is drawn for declare (conform/twists.h):
    // an undeclared one is left off in every case (unless the pin has it on).
    TwistSet twists = TwistSet::all();
};

// n positions from start in a shape:
//   contiguous  start, start+1, ...                         (a prefill, a decode)
//   gaps        increasing with holes: start + i + Σ_{j<=i} (j*7 mod 3)  (packed, pruned)
//   restarts    start + i mod ceil(n/2): two packed sequences, duplicates, a drop
//   shuffled    start + (i*k mod n), k coprime to n: every position once, out of order
std::vector<int64_t> positions_of(int64_t start, int64_t n, CaseSpec::Shape shape);
const char* to_string(CaseSpec::Shape s);

// The generator for one op's specs (pinned to `pin` when given).
rc::Gen<CaseSpec> spec_gen(Op op, const std::optional<BlockConfig>& pin = std::nullopt);
rc::Gen<CaseSpec> spec_gen(const Stream& s);

// Canonical id, and its inverse (nullopt with a message on a malformed id).
std::string canonical_id(const CaseSpec& s);
std::optional<CaseSpec> parse_case_id(const std::string& id, std::string* error = nullptr);

// A spec at configuration c: its sizes and conventions, T rows (attention: S
// keys, the queries their last T; paged_attention: one sequence of S keys,
// its last T the queries, pages of c.page_size or 16) from position `start`, contiguous,
// magnitude 1, no outlier channels, drawn from `seed`. What `conform
// generate` and `conform bench` draw; materialize() makes the case.
CaseSpec spec_at(Op op, const BlockConfig& c, int64_t T, int64_t S, int64_t start, uint64_t seed);

// The scale σ of a drawn case's attention scores: q and k at magnitude mag
// give the attention ops' scores ~N(0, mag⁴), the block's are ~N(0, qk_gain⁴).
// The soft-cap and the sinks are drawn against it; coverage classes them by it.
double score_scale(const CaseSpec& s);

// Builds the case: config, inputs and positions, drawn from s.seed (the
// weights, and with model_inputs the inputs, from s.real). Throws
// std::logic_error for a case naming a layer that is not loaded.
Case materialize(const CaseSpec& s);

// Draws the property case number `index` of a stream (same seed, same
// cases, whatever else is selected).
CaseSpec draw(const Stream& s, int index);
inline CaseSpec draw(Op op, uint64_t seed, int index) { return draw(Stream{op, seed, std::nullopt, {}, 0}, index); }

// Shrinks a failing spec: repeatedly takes the first simpler spec (as
// RapidCheck's shrinks order them) for which still_fails() holds. Returns the
// smallest found, the number of successful shrink steps, the candidates
// tried, and what stopped it: no smaller failing candidate (done), or one of
// the limits — a shrink of a large case can otherwise cost minutes, all
// spent after the verdict is known.
struct ShrinkLimits {
    int max_tries = 400;     // candidates judged
    double max_seconds = 0;  // wall time; 0: none
};
struct Shrunk {
    CaseSpec spec;
    int steps = 0;
    int tried = 0;
    double seconds = 0;
    enum class Stop { done, tries, time };
    Stop stopped = Stop::done;
};
Shrunk shrink(const Stream& s, int index, const std::function<bool(const CaseSpec&)>& still_fails,
              const ShrinkLimits& limits = {});
inline Shrunk shrink(Op op, uint64_t seed, int index, const std::function<bool(const CaseSpec&)>& still_fails) {
    return shrink(Stream{op, seed, std::nullopt, {}, 0}, index, still_fails);
}

}  // namespace conform::gen

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
#include <functional>
#include <optional>
#include <string>

#include "core/case.h"

namespace rc {
template <typename T>
class Gen;
}

namespace conform::gen {

struct CaseSpec {
    Op op = Op::rmsnorm;
    int64_t T = 1;           // rows (tokens / queries)
    int64_t S = 1;           // attention: keys
    int64_t n_heads = 1;     // rope / qk_norm: heads in x
    int64_t n_kv_heads = 1;
    int64_t head_dim = 4;
    int64_t d_model = 8;
    int64_t ffn_dim = 8;
    RopeLayout layout = RopeLayout::neox;
    double theta = 10000.0;
    RopeScaling scaling{};   // rope, block, decode: none unless drawn
    int64_t rotary_dim = 0;  // rope, block, decode: 0 = the whole head
    bool qk_norm = false;
    double eps = 1e-5;
    int64_t pos = 0;         // position of the first row (query)
    int64_t kpos = 0;        // attention: position of the first key
    // How the positions run from pos (and kpos): positions_of() below.
    // Attention and RoPE define their result by position, so they also get
    // arrays that are not increasing; a block's are one sequence.
    enum class Shape { contiguous, gaps, restarts, shuffled } shape = Shape::contiguous;
    int64_t prefill = 0;     // decode
    double mag = 1.0;        // input magnitude (x, q, k)
    int64_t outliers = 0;    // input channels scaled x50 (outlier channels)
    uint64_t seed = 0;
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

// Canonical id, and its inverse (nullopt with a message on a malformed id).
std::string canonical_id(const CaseSpec& s);
std::optional<CaseSpec> parse_case_id(const std::string& id, std::string* error = nullptr);

// Builds the case: config, inputs and positions, drawn from s.seed.
Case materialize(const CaseSpec& s);

// Draws the property case number `index` of a stream (same seed, same
// cases, whatever else is selected).
CaseSpec draw(const Stream& s, int index);
inline CaseSpec draw(Op op, uint64_t seed, int index) { return draw(Stream{op, seed, std::nullopt}, index); }

// Shrinks a failing spec: repeatedly takes the first simpler spec (as
// RapidCheck's shrinks order them) for which still_fails() holds. Returns the
// smallest found and the number of successful shrink steps.
struct Shrunk {
    CaseSpec spec;
    int steps = 0;
    int tried = 0;
};
Shrunk shrink(const Stream& s, int index, const std::function<bool(const CaseSpec&)>& still_fails,
              int max_tries = 400);
inline Shrunk shrink(Op op, uint64_t seed, int index, const std::function<bool(const CaseSpec&)>& still_fails) {
    return shrink(Stream{op, seed, std::nullopt}, index, still_fails);
}

}  // namespace conform::gen

// harness/bench/inputs.h — what bench gives each op: its inputs at serving
// sizes (one seeded draw, weights N(0, 1/in) so activations stay O(1)), the
// input sets an interface runner rotates among, the same inputs as an
// implementation's own bench op takes them, and what a call costs.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/bench.h"
#include "conform/bench.h"
#include "core/case.h"

namespace conform::bench {

struct Inputs {
    Case c;            // the op's inputs by schema name
    Tensor context_x;  // decode: the tokens already in the cache
    std::vector<int64_t> context_pos;
};

// The inputs of op at T tokens (decode and attention at T = 1: after `context` cached).
Inputs make_inputs(Op op, const BlockConfig& cfg, int64_t T, int64_t context);
// Input set k of the same op and sizes: the activations (x, q, k, v, the
// decode context) drawn again, RoPE's positions moved; weights shared (they
// cross a worker's pipe on every call anyway). Set 0 is `base`.
Inputs input_set(const Inputs& base, int k);
// The inputs as an implementation's own bench op takes them (conform/bench.h).
BenchInputs bench_inputs(const Inputs& in);

// One cost model: the anatomy's table (config/anatomy.h), priced as the call
// bench times — each op's lanes of one layer run as one call, so bytes are
// the weights and what crosses the call (a fused SwiGLU's T x F activations
// are not counted; a block's new K and V rows are). es: bytes per element.
Cost cost(Op op, const config::ModelConfig& model, int64_t T, int64_t context, double es);

}  // namespace conform::bench

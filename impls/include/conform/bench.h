// conform/bench.h — what `conform bench` times: one op of an implementation
// with its inputs already where the implementation keeps them between calls
// (simd: weights packed, bf16 converted; cuda: on the device in the storage
// dtype), so run() is what a model pays per call. One interface for every
// implementation that offers it (its registry entry's `bench` factory).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conform/impl.h"

namespace conform {

class BenchOp {
   public:
    virtual ~BenchOp() = default;
    virtual void run() = 0;
    virtual std::vector<float> output() const = 0;  // the last run's output, row-major, widened to float32
    virtual std::string where() const = 0;          // what ran it: simd's Highway target, cuda's device
    // The last run's time on the device between its own events (cuda), or
    // < 0 when the implementation has no timer of its own: wall time then.
    virtual double device_seconds() const { return -1; }
};

// Float32 inputs by op (the fixture schema's names):
//   rmsnorm, qk_norm: x, weight;  rope: x, pos;  attention: q, k, v, q_pos, k_pos;
//   swiglu: x, w1, w3, w2;  block: x, pos, weights;
//   decode: x [1, D] and pos [1] for the step, after context_x / context_pos
//           went through the block into the cache (once, at creation); each
//           run is that same step again (the cache is rolled back);
//   paged_attention: q, k = k_cache, v = v_cache, paged (the index arrays);
//   mla_attention: q, k = ckv_cache, v = kpe_cache, w_kv_b, paged;
//   moe: x, moe (the router's and the experts' weights).
struct BenchInputs {
    Op op = Op::rmsnorm;
    BlockConfig config;
    View x, weight, q, k, v, w1, w3, w2;
    Positions pos, q_pos, k_pos;
    BlockWeights weights;
    PagedIndex paged;
    View context_x;
    Positions context_pos;
    MoeWeights moe;
    View w_kv_b;  // mla_attention's kv_b_proj
};

}  // namespace conform

// impls/simd/simd.h — the Highway implementation, seen from outside.
//
// float32 or bf16 storage (ImplOptions::dtype; arithmetic always f32), one
// compiled Highway target per run (ImplOptions::simd_target, default the best
// this CPU has), a thread pool of ImplOptions::threads (0: every core).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conform/impl.h"
#include "registry.h"

namespace conform::simd {

std::unique_ptr<Implementation> make_simd(const ImplOptions& options);

// `conform list`: one line naming the compiled targets and the one in use.
std::string simd_details();

// ---- for `conform bench` --------------------------------------------------

// One op with its inputs already in the implementation's storage (weights
// packed, bf16 converted), as an engine holds them between calls: run() is
// what a model would pay per call.
class BenchOp {
   public:
    virtual ~BenchOp() = default;
    virtual void run() = 0;
    virtual std::vector<float> output() const = 0;  // the last run's output, row-major
    virtual std::string target() const = 0;
};

// Float32 inputs by op (the fixture schema's names):
//   rmsnorm: x, weight;  qk_norm: x, weight;  rope: x, pos;
//   attention: q, k, v, q_pos, k_pos;  swiglu: x, w1, w3, w2;
//   block: x, pos, weights;
//   decode: x [1, D] and pos [1] for the step, after context_x / context_pos
//           went through the block into the cache (once, at creation).
struct BenchInputs {
    Op op = Op::rmsnorm;
    BlockConfig config;
    View x, weight, q, k, v, w1, w3, w2;
    Positions pos, q_pos, k_pos;
    BlockWeights weights;
    View context_x;
    Positions context_pos;
};

std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& options, const BenchInputs& in);

}  // namespace conform::simd

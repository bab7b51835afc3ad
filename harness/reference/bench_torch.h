// harness/reference/bench_torch.h — LibTorch float32 as an implementation in
// `conform bench` only. Torch-free on purpose, like reference.h.
//
// Each op is written the way the ecosystem's eager PyTorch runs it (HF Llama):
// x @ W through torch::matmul (OpenBLAS here), RMSNorm as pow / mean / rsqrt,
// RoPE by rotate_half (NeoX) or complex multiplication (interleaved), GQA by
// repeat_interleave of k and v, a masked softmax, F.silu. Everything a model
// computes once per forward rather than per layer (cos/sin, the causal mask)
// is built when the op is prepared, as the simd engine prepares its RoPE table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/case.h"

namespace conform::ref {

class TorchBenchOp {
   public:
    virtual ~TorchBenchOp() = default;
    virtual void run() = 0;
    virtual std::vector<float> output() const = 0;  // the last run's output, row-major float32
};

// c holds the op's inputs by schema name (core/case.h). For Op::decode it is
// one step: x [1, D] at positions [1], after context_x [C, D] at context_pos
// went through the block once to fill a static KV cache (rotated k, v), which
// each run() appends to at row C — the step is the same every run.
std::unique_ptr<TorchBenchOp> make_torch_bench_op(const Case& c, const Tensor* context_x = nullptr,
                                                  const std::vector<int64_t>* context_pos = nullptr);

// LibTorch's intra-op threads (OpenBLAS keeps its own pool, one per core).
void set_torch_threads(int n);

// Seconds of the best of `reps` float32 n x n @ n x n products, after one warm-up.
double torch_matmul_seconds(int64_t n, int reps);

// LibTorch's version and parallel backend, one line.
std::string torch_describe();

}  // namespace conform::ref

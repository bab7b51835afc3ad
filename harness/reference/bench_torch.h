// harness/reference/bench_torch.h — LibTorch float32 as an implementation in
// `conform bench` only. Torch-free on purpose, like reference.h.
//
// Each op is written the way the ecosystem's eager PyTorch runs it (HF Llama):
// x @ W through torch::matmul (OpenBLAS here), RMSNorm as pow / mean / rsqrt,
// RoPE by rotate_half (NeoX) or complex multiplication (interleaved), GQA by
// repeat_interleave of k and v, a masked softmax, F.silu. Everything a model
// computes once per forward rather than per layer (cos/sin, the causal mask)
// is built when the op is prepared, as the simd engine prepares its RoPE table.
//
// "torch" runs on the host in float32. "torch-cuda" runs the same graph on
// LibTorch's CUDA device, where this LibTorch has one (a CUDA build that sees
// a GPU), in float32 or bfloat16 as HF runs a model cast to that dtype: norms
// and the softmax in float32, their results cast back. It is the yardstick a
// CUDA kernel is timed against; float32 products use LibTorch's default
// matmul precision, "highest" (no TF32), as conform's CUDA kernels do.
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
// Where an op runs: the host in float32, or the CUDA device in float32 or bfloat16.
struct TorchPlace {
    bool cuda = false;
    bool bf16 = false;  // cuda only
};

std::unique_ptr<TorchBenchOp> make_torch_bench_op(const Case& c, const Tensor* context_x = nullptr,
                                                  const std::vector<int64_t>* context_pos = nullptr,
                                                  TorchPlace place = {});

// Whether this LibTorch was built with CUDA and sees a device; if not, why not.
bool torch_cuda_available(std::string* why = nullptr);
// "NVIDIA H200 (LibTorch 2.11.0 CUDA)": the device torch-cuda runs on.
std::string torch_cuda_describe();

// LibTorch's intra-op threads (OpenBLAS keeps its own pool, one per core).
void set_torch_threads(int n);

// Seconds of the best of `reps` float32 n x n @ n x n products, after one warm-up.
double torch_matmul_seconds(int64_t n, int reps);

// The CUDA device's ceilings through LibTorch: a 1 GiB device-to-device copy
// (bytes read + written per second) and n x n @ n x n products in float32
// (no TF32) and bfloat16, each the best of five after a warm-up, synchronised.
struct TorchCudaCeilings {
    double copy_bytes_per_s = 0, f32_flops_per_s = 0, bf16_flops_per_s = 0;
    int64_t matmul_n = 0;
};
TorchCudaCeilings torch_cuda_ceilings(int64_t n = 8192);

// LibTorch's version and parallel backend, one line.
std::string torch_describe();

}  // namespace conform::ref

// impls/cuda/cuda.h — the CUDA implementation, seen from outside (the
// registry, the tests, `conform bench`). No CUDA header here: code that
// includes this builds with the host compiler alone.
//
// Storage in the run's dtype (f32, bf16 or f16), arithmetic in float32:
// GEMMs through cuBLAS with float32 accumulation, everything else in the
// kernels of this folder (kernel → launcher → op entry, ggml-style). In f16
// the intermediates of swiglu, block and decode stay float32 and only their
// outputs are rounded, as the f16 baseline does (device.h, intermediate_dtype).

#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conform/impl.h"
#include "registry.h"

namespace conform::cuda {

// Whether a CUDA device this build can run on is visible; the reason when
// not (no driver, no device, a device older than the compiled sm_90 code).
Availability availability();

// Throws ImplError with availability()'s reason when unavailable.
std::unique_ptr<Implementation> make_cuda(const ImplOptions& options);

// The CUDA mutants: the same kernels with one bug each (device.h, Faults).
std::unique_ptr<Implementation> make_cuda_rope_layout_swapped(const ImplOptions& options);
std::unique_ptr<Implementation> make_cuda_gqa_tiled(const ImplOptions& options);

// `conform list`: the device this process would run on.
std::string cuda_details();

// ---- for `conform bench` --------------------------------------------------------

// One op with its inputs already on the device in the storage dtype (weights
// packed), as an engine holds them between calls. run() launches it and
// waits for the device, so wall time around run() is the op's time plus one
// launch-and-wait; device_seconds() is the last run's time between CUDA
// events on the stream, without the wait.
class BenchOp {
   public:
    virtual ~BenchOp() = default;
    virtual void run() = 0;
    virtual double device_seconds() const = 0;
    virtual std::vector<float> output() const = 0;  // the last run's output, row-major, widened to float32
    virtual std::string device() const = 0;
};

// Float32 inputs by op, as simd::BenchInputs (the fixture schema's names):
//   rmsnorm, qk_norm: x, weight;  rope: x, pos;  attention: q, k, v, q_pos, k_pos;
//   swiglu: x, w1, w3, w2;  block: x, pos, weights;
//   decode: x [1, D] and pos [1], after context_x / context_pos went through
//           the block into the cache (once, at creation); each run is that
//           same step again (the cache is rolled back).
struct BenchInputs {
    Op op = Op::rmsnorm;
    BlockConfig config;
    View x, weight, q, k, v, w1, w3, w2;
    Positions pos, q_pos, k_pos;
    BlockWeights weights;
    View context_x;
    Positions context_pos;
};

// f32 or bf16 (options.dtype). Throws ImplError when unavailable.
std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& options, const BenchInputs& in);

}  // namespace conform::cuda

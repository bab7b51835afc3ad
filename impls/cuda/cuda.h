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

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conform/bench.h"
#include "conform/impl.h"

namespace conform::cuda {

// Whether a CUDA device this build can run on is visible; the reason when
// not (no driver, no device, a device older than the compiled sm_90 code).
Availability availability();

// Throws ImplError with availability()'s reason when unavailable.
std::unique_ptr<Implementation> make_cuda(const ImplOptions& options);

// The CUDA mutants: the same kernels with one bug each (device.h, Faults).
std::unique_ptr<Implementation> make_cuda_rope_layout_swapped(const ImplOptions& options);
std::unique_ptr<Implementation> make_cuda_gqa_tiled(const ImplOptions& options);
std::unique_ptr<Implementation> make_cuda_router_in_bf16(const ImplOptions& options);

// float32 -> FP8 codes by the device's own conversion, as the paged kernel's
// cache write makes them (scale 1): for checking the hardware against the
// contract (tests/test_cuda.cpp). Throws ImplError without a device.
std::vector<uint8_t> fp8_convert(const std::vector<float>& x, KvCacheDtype dtype);

// `conform list`: the device this process would run on.
std::string cuda_details();

// ---- for `conform bench` (conform/bench.h) --------------------------------------
// run() launches the op and waits for the device, so wall time around run()
// is the op's time plus one launch-and-wait; device_seconds() is the last
// run's time between CUDA events on the stream, without the wait.

// f32 or bf16 (options.dtype). Throws ImplError when unavailable.
std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& options, const BenchInputs& in);

}  // namespace conform::cuda

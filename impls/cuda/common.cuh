// impls/cuda/common.cuh — what every kernel file shares: the storage types,
// their conversion to the float32 every kernel computes in, and the warp and
// block reductions.
#pragma once

#include <algorithm>
#include <cstdint>

#include "cuda/runtime.h"

namespace conform::cuda {

// Storage is float, __nv_bfloat16 or __half; arithmetic is always float32.
__device__ __host__ __forceinline__ float to_f32(float x) { return x; }
__device__ __host__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __host__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

template <typename T>
__device__ __host__ __forceinline__ T from_f32(float x);
template <>
__device__ __host__ __forceinline__ float from_f32<float>(float x) {
    return x;
}
template <>
__device__ __host__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
    return __float2bfloat16(x);  // round to nearest even
}
template <>
__device__ __host__ __forceinline__ __half from_f32<__half>(float x) {
    return __float2half(x);  // round to nearest even
}

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Sum / max over the 32 lanes of a warp; every lane gets the result.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

// Sum over every thread of the block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. Called by all threads or none.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_partial[kWarp];
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int n_warps = blockDim.x / kWarp;
    v = warp_sum(v);
    if (lane == 0) warp_partial[warp] = v;
    __syncthreads();  // every warp's partial is written before any warp reads them
    v = lane < n_warps ? warp_partial[lane] : 0.0f;
    v = warp_sum(v);
    __syncthreads();  // every warp has read the partials before a next call overwrites them
    return v;
}

}  // namespace conform::cuda

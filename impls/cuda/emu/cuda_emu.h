// impls/cuda/emu/cuda_emu.h — the subset of CUDA that impls/cuda uses, run on
// the CPU, so that the kernels' indexing, tiling, masking and online softmax
// can be tested where there is no GPU (this machine, CI).
//
// What it is: the .cu files compiled by the host compiler with
// CONFORM_CUDA_EMU defined. A launch runs its blocks one after another; the
// threads of a block are coroutines on one OS thread, switched only at
// __syncthreads() and the warp shuffles, so every thread runs as far ahead of
// the others as the barriers allow. That makes a missing barrier visible: a
// thread that reads shared memory another thread has not written yet, or
// overwrites a tile others still read, computes a wrong answer here.
//
// What it is not: a model of the GPU's memory system, timing, or of
// anything this file does not declare. Numbers from it say nothing about the
// GPU (no FMA contraction, the host's libm); passing here is not passing on a
// GPU — scripts/device-check.sh is that.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <utility>

#include "conform/dtype.h"

// ---- language ----------------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One block runs at a time, its threads share the function's statics: the
// same sharing as __shared__ within a block.
#define __shared__ static
#define __align__(n) alignas(n)
#define CONFORM_DYNAMIC_SHARED(name) unsigned char* name = ::conform::cuda::emu::dynamic_shared()

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x = 0, y = 0, z = 0;
};

namespace conform::cuda::emu {

struct Indices {
    uint3 thread, block;
    dim3 block_dim, grid_dim;
};
const Indices& here();  // the running thread's

unsigned char* dynamic_shared();

// Barriers: every live thread of the block (or of the warp) must arrive.
void syncthreads();
int syncthreads_or(int predicate);
uint64_t warp_exchange(uint64_t mine, int src_lane);  // the value src_lane posted in this round

// Runs kernel(args...) over grid x block; returns a cudaError_t value.
int run(const void* kernel_id, dim3 grid, dim3 block, size_t dynamic_smem, std::function<void()> body);

}  // namespace conform::cuda::emu

#define threadIdx (::conform::cuda::emu::here().thread)
#define blockIdx (::conform::cuda::emu::here().block)
#define blockDim (::conform::cuda::emu::here().block_dim)
#define gridDim (::conform::cuda::emu::here().grid_dim)

inline void __syncthreads() { ::conform::cuda::emu::syncthreads(); }
inline int __syncthreads_or(int p) { return ::conform::cuda::emu::syncthreads_or(p); }

template <typename T>
T __shfl_sync(unsigned /*mask: full warps only*/, T v, int src_lane, int width = 32) {
    static_assert(sizeof(T) <= 8, "shuffle of a value wider than 8 bytes");
    const int lane = static_cast<int>(threadIdx.x % 32);
    const int src = (lane / width) * width + (src_lane % width);
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    bits = ::conform::cuda::emu::warp_exchange(bits, src);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    return __shfl_sync(mask, v, (lane ^ lane_mask) % width, width);
}

// ---- FP8 (cuda_fp8.h's conversion, for the paged kernel's cache write) ---------------------

using __nv_fp8_storage_t = unsigned char;
enum __nv_saturation_t { __NV_NOSAT, __NV_SATFINITE };
enum __nv_fp8_interpretation_t { __NV_E4M3, __NV_E5M2 };
inline __nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t kind) {
    // Round to nearest even, as the hardware converts (conform/dtype.h).
    return conform::fp8_bits(x, kind == __NV_E5M2 ? conform::KvCacheDtype::fp8_e5m2 : conform::KvCacheDtype::fp8_e4m3,
                             {false, sat == __NV_SATFINITE});
}

// ---- 16-bit floats -------------------------------------------------------------------------

struct __nv_bfloat16 {
    uint16_t bits;
};
struct __half {
    uint16_t bits;
};

inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t u = static_cast<uint32_t>(h.bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline __nv_bfloat16 __float2bfloat16(float f) {  // round to nearest even, as the hardware converts
    if (std::isnan(f)) return {0x7FFF};  // the hardware's canonical NaN
    return {conform::bf16_bits(f)};
}
inline float __half2float(__half h) {
    _Float16 v;
    std::memcpy(&v, &h.bits, 2);
    return static_cast<float>(v);
}
inline __half __float2half(float f) {  // GCC's _Float16 conversion rounds to nearest even
    if (std::isnan(f)) return {0x7FFF};
    const _Float16 v = static_cast<_Float16>(f);
    __half h;
    std::memcpy(&h.bits, &v, 2);
    return h;
}

// ---- runtime API ---------------------------------------------------------------------------

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorNoDevice = 100,
    cudaErrorLaunchFailure = 719,
};
const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

struct CUstream_emu;
using cudaStream_t = CUstream_emu*;
struct CUevent_emu;
using cudaEvent_t = CUevent_emu*;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

struct cudaDeviceProp {
    char name[256];
    int major = 9, minor = 0;
    int multiProcessorCount = 132;
    size_t sharedMemPerBlock = 48 * 1024;
    size_t sharedMemPerBlockOptin = 227 * 1024;
    size_t totalGlobalMem = 0;
};

cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d);
cudaError_t cudaMalloc(void** p, size_t bytes);
template <typename T>
cudaError_t cudaMalloc(T** p, size_t bytes) {
    return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = nullptr);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t s = nullptr);
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b);
constexpr unsigned cudaStreamNonBlocking = 1;
cudaError_t emu_func_set_attribute(const void* kernel, cudaFuncAttribute attr, int value);
template <typename F>
cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
    return emu_func_set_attribute(reinterpret_cast<const void*>(kernel), attr, value);
}

// ---- cuBLAS (GemmEx only) ------------------------------------------------------------------

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cudaDataType { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };
struct cublasContext_emu;
using cublasHandle_t = cublasContext_emu*;

cublasStatus_t cublasCreate(cublasHandle_t* h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
const char* cublasGetStatusString(cublasStatus_t s);
// Column-major C = alpha * op(A) @ op(B) + beta * C, accumulated in float, k ascending.
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType at, int lda, const void* B,
                            cudaDataType bt, int ldb, const void* beta, void* C, cudaDataType ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo);

// ---- launching ----------------------------------------------------------------------------

namespace conform::cuda::emu {

// kernel<<<grid, block, smem>>>(args...): arguments copied once, as the GPU
// copies them into the launch's parameter space.
template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, Args&&... args) {
    std::tuple<std::decay_t<KArgs>...> params(static_cast<KArgs>(std::forward<Args>(args))...);
    return static_cast<cudaError_t>(run(reinterpret_cast<const void*>(kernel), grid, block, smem,
                                        [&] { std::apply(kernel, params); }));
}

}  // namespace conform::cuda::emu

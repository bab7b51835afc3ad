// device — the implementation's hold on the GPU, checked errors, and the
// buffer chores every op needs: poison and sentinel fills, conversion of
// float32 inputs to the storage type.
#include <algorithm>
#include <cstdio>
#include <string>

#include "cuda/common.cuh"
#include "cuda/device.h"

namespace conform::cuda {

// ---- errors -----------------------------------------------------------------------------------

[[noreturn]] void fail_cuda(const char* call, cudaError_t e, const char* file, int line) {
    throw ImplError(std::string("cuda: ") + call + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorName(e) + ": " + cudaGetErrorString(e));
}

[[noreturn]] void fail_cublas(const char* call, cublasStatus_t s, const char* file, int line) {
    throw ImplError(std::string("cuda: ") + call + " failed at " + file + ":" + std::to_string(line) +
                    ": cuBLAS status " + std::to_string(static_cast<int>(s)) + ": " + cublasGetStatusString(s));
}

// ---- context ----------------------------------------------------------------------------------

Context::Context(DType dt, Faults f) : dtype(dt), faults(f) {
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    sm_count = prop.multiProcessorCount;
    smem_optin = prop.sharedMemPerBlockOptin;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    try {
        CUBLAS_CHECK(cublasCreate(&blas));
        CUBLAS_CHECK(cublasSetStream(blas, stream));
        // No reduced-precision (16-bit) partial sums in split-K GEMMs: every
        // product is accumulated in float32, as the dtype baseline assumes.
        CUBLAS_CHECK(cublasSetMathMode(
            blas, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    } catch (...) {
        if (blas) cublasDestroy(blas);
        cudaStreamDestroy(stream);
        throw;
    }
}

Context::~Context() {
    // Unchecked: a destructor may run while an error unwinds.
    cudaStreamSynchronize(stream);
    cublasDestroy(blas);
    cudaStreamDestroy(stream);
}

void Context::sync(const char* what) const {
    const cudaError_t e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess) fail_cuda(what, e, __FILE__, __LINE__);
}

// ---- fills and conversions ------------------------------------------------------------------------

namespace {

constexpr int kFillThreads = 256;

template <typename Bits>
__global__ void fill_kernel(Bits* __restrict__ p, size_t n, Bits bits) {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        p[i] = bits;
}

template <typename T>
__global__ void convert_kernel(const float* __restrict__ src, T* __restrict__ dst, size_t n) {
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<size_t>(gridDim.x) * blockDim.x)
        dst[i] = from_f32<T>(src[i]);
}

unsigned grid_for(size_t n) {
    // Grid-stride loops: enough blocks to fill the GPU, never more than the work.
    return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(ceil_div(static_cast<int64_t>(n), kFillThreads), 4096)));
}

}  // namespace

void fill_bits(void* p, size_t n, int width, uint64_t bits, cudaStream_t s) {
    if (n == 0) return;
    switch (width) {
        case 1:  // FP8 codes
            CUDA_LAUNCH(fill_kernel<uint8_t>, grid_for(n), kFillThreads, 0, s, static_cast<uint8_t*>(p), n,
                        static_cast<uint8_t>(bits));
            return;
        case 2:
            CUDA_LAUNCH(fill_kernel<uint16_t>, grid_for(n), kFillThreads, 0, s, static_cast<uint16_t*>(p), n,
                        static_cast<uint16_t>(bits));
            return;
        case 4:
            CUDA_LAUNCH(fill_kernel<uint32_t>, grid_for(n), kFillThreads, 0, s, static_cast<uint32_t*>(p), n,
                        static_cast<uint32_t>(bits));
            return;
        case 8:
            CUDA_LAUNCH(fill_kernel<unsigned long long>, grid_for(n), kFillThreads, 0, s,
                        static_cast<unsigned long long*>(p), n, static_cast<unsigned long long>(bits));
            return;
    }
    throw ImplError("cuda: fill_bits: no fill for elements of " + std::to_string(width) + " bytes");
}

template <typename T>
void convert_from_f32(const float* src, T* dst, size_t n, cudaStream_t s) {
    if (n == 0) return;
    CUDA_LAUNCH(convert_kernel<T>, grid_for(n), kFillThreads, 0, s, src, dst, n);
}
template void convert_from_f32<float>(const float*, float*, size_t, cudaStream_t);
template void convert_from_f32<__nv_bfloat16>(const float*, __nv_bfloat16*, size_t, cudaStream_t);
template void convert_from_f32<__half>(const float*, __half*, size_t, cudaStream_t);

float widen(float x) { return x; }
float widen(__nv_bfloat16 x) { return to_f32(x); }
float widen(__half x) { return to_f32(x); }
__half from_f32_host_half(float x) { return from_f32<__half>(x); }

}  // namespace conform::cuda

// matmul — y = x @ W with W stored [in, out], through cuBLAS: float32
// accumulation whatever the storage type (CUBLAS_COMPUTE_32F; no TF32, which
// would round the float32 operands to 10 mantissa bits).
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

namespace conform::cuda {

namespace {

template <typename T>
constexpr cudaDataType blas_type();
template <>
constexpr cudaDataType blas_type<float>() {
    return CUDA_R_32F;
}
template <>
constexpr cudaDataType blas_type<__nv_bfloat16>() {
    return CUDA_R_16BF;
}
template <>
constexpr cudaDataType blas_type<__half>() {
    return CUDA_R_16F;
}

int as_int(int64_t v, const char* what) {
    if (v < 0 || v > INT32_MAX) throw ImplError(std::string("cuda gemm: ") + what + " = " + std::to_string(v) + " does not fit cuBLAS's int");
    return static_cast<int>(v);
}

}  // namespace

template <typename T>
void gemm(const Context& ctx, const T* x, const T* w, T* y, int64_t M, int64_t K, int64_t N, bool accumulate) {
    if (M == 0 || N == 0) return;
    // cuBLAS is column-major. Row-major y[M, N] = x[M, K] @ w[K, N] is, read
    // column-major, y^T[N, M] = w^T[N, K] @ x^T[K, M]: w as the first operand
    // with leading dimension N, x as the second with K, y with N.
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    const int m = as_int(N, "N"), n = as_int(M, "M"), k = as_int(K, "K");
    CUBLAS_CHECK(cublasGemmEx(ctx.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, w, blas_type<T>(), m, x,
                              blas_type<T>(), k, &beta, y, blas_type<T>(), m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

template void gemm<float>(const Context&, const float*, const float*, float*, int64_t, int64_t, int64_t, bool);
template void gemm<__nv_bfloat16>(const Context&, const __nv_bfloat16*, const __nv_bfloat16*, __nv_bfloat16*, int64_t,
                                  int64_t, int64_t, bool);
template void gemm<__half>(const Context&, const __half*, const __half*, __half*, int64_t, int64_t, int64_t, bool);

}  // namespace conform::cuda

// impls/simd/pack.h — weights packed into panels once, and the product over
// the thread pool.
#pragma once

#include <cstddef>
#include <initializer_list>

#include "conform/tensor.h"
#include "simd/buffer.h"
#include "simd/kernels.h"
#include "simd/thread_pool.h"

namespace conform::simd {

// A [K, N] weight as ceil(N / kPanel) panels of [K][kPanel], zero-padded.
struct PackedWeight {
    size_t K = 0, N = 0, n_panels = 0;
    Buffer data;  // n_panels x (K * kPanel) elements
};

// The column blocks side by side: [wq | wk | wv] is one product (QKV).
PackedWeight pack_columns(ThreadPool& pool, Elem e, std::initializer_list<View> blocks);

// w1 and w3 [K, F] interleaved per panel: 8 gate columns, then the same 8 up
// columns, for the fused SwiGLU product (Epilogue::swiglu). N = F.
PackedWeight pack_gate_up(ThreadPool& pool, Elem e, View w1, View w3);

// Scratch of one product, reused across calls.
struct GemmScratch {
    Buffer packed_a;  // f32 [M * K]
    Buffer partial;   // f32 [M][n_panels * kPanel]
};

struct MatmulOut {
    Epilogue epilogue = Epilogue::store;
    MRows c;
    CRows residual;  // Epilogue::residual
    MRows raw;       // Epilogue::residual, optional
    const float* bias = nullptr;  // Epilogue::bias: [N]
};

// c[M, N] (epilogue) a[M, K] @ w, split over the pool by panels.
void matmul(ThreadPool& pool, Target t, CRows a, size_t M, const PackedWeight& w, const MatmulOut& out,
            GemmScratch& scratch);

}  // namespace conform::simd

// impls/simd/matmul-inl.h — C = A @ B with B packed in panels (kernels.h).
//
// The classic register-blocked product (GotoBLAS/BLIS): a tile of kMR rows x
// one kPanel-wide panel keeps its kMR * kPanel sums in vector registers while
// k runs; each step broadcasts kMR values of A and loads one panel row of B.
//
//   M <= kMR (decode, small batches): one pass over all of K per panel; for a
//     single row, kGemvPanels panels at once so that enough independent FMA
//     chains are in flight while the weights stream from memory.
//   M >  kMR (prefill): K in blocks of kKC so a panel's kc x kPanel slab
//     (16 KiB in f32) stays in L1 while every row block of an kMC-row block of
//     A (in L2) passes over it; sums between K blocks wait in `partial`.
//
// Each output element is one chain acc = fma(a[k], b[k], acc) over k = 0..K-1
// in order, whatever the path, the thread split or the row block it falls in
// (a partial sum stored as f32 and reloaded is exact), so decode reproduces a
// prefill bit for bit.
#include <algorithm>
#include <cstddef>

#if defined(CONFORM_SIMD_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef CONFORM_SIMD_MATMUL_INL_H_
#undef CONFORM_SIMD_MATMUL_INL_H_
#else
#define CONFORM_SIMD_MATMUL_INL_H_
#endif

#include <hwy/highway.h>

#include "simd/common-inl.h"
#include "simd/swiglu-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

constexpr size_t kLanes = hn::MaxLanes(DF());
static_assert(kPanel % kLanes == 0, "a panel is a whole number of vectors");
constexpr size_t kNV = kPanel / kLanes;  // vectors per panel row
// Rows per tile: kMR * kNV accumulators plus kNV panel vectors and one
// broadcast fit the register file (16 on AVX2/SSE4, 32 on AVX-512).
constexpr size_t kMR = kNV == 1 ? 8 : kNV == 2 ? 6 : kNV == 4 ? 3 : 1;
constexpr size_t kGemvPanels = kNV >= 8 ? 1 : 8 / kNV;
constexpr size_t kKC = 256;
constexpr size_t kMC = 120;  // a multiple of every kMR above
static_assert(kMC % kMR == 0, "row blocks tile kMC");

// sums[r][i] (+)= sum over k < kc of a[k][r] * b_p[k][.], for kRows rows and
// kPanels panels (panel p at b + p * b_stride). `init` (may alias `out`)
// holds running sums, or is null to start from zero.
template <size_t kRows, size_t kPanels, class TB>
HWY_INLINE void Tile(const float* HWY_RESTRICT a, const TB* HWY_RESTRICT b, size_t b_stride, size_t kc,
                     const float* init, size_t ld_init, float* out, size_t ld_out) {
    const DF df;
    constexpr size_t kCols = kPanels * kNV;  // vectors per tile row
    VF acc[kRows][kCols];
    for (size_t r = 0; r < kRows; ++r)
        for (size_t i = 0; i < kCols; ++i)
            acc[r][i] = init ? hn::LoadU(df, init + r * ld_init + i * kLanes) : hn::Zero(df);
    for (size_t k = 0; k < kc; ++k) {
        VF bv[kCols];
        for (size_t p = 0; p < kPanels; ++p)
            for (size_t v = 0; v < kNV; ++v) bv[p * kNV + v] = LoadF(df, b + p * b_stride + k * kPanel + v * kLanes);
        for (size_t r = 0; r < kRows; ++r) {
            const VF ar = hn::Set(df, a[k * kRows + r]);
            for (size_t i = 0; i < kCols; ++i) acc[r][i] = hn::MulAdd(ar, bv[i], acc[r][i]);
        }
    }
    for (size_t r = 0; r < kRows; ++r)
        for (size_t i = 0; i < kCols; ++i) hn::StoreU(acc[r][i], df, out + r * ld_out + i * kLanes);
}

// Tile<rows, 1> for a run-time rows in [1, kMR].
template <class TB, size_t R = kMR>
HWY_INLINE void TileRows(size_t rows, const float* HWY_RESTRICT a, const TB* HWY_RESTRICT b, size_t kc,
                         const float* init, size_t ld_init, float* out, size_t ld_out) {
    if constexpr (R > 0) {
        if (rows == R) return Tile<R, 1>(a, b, 0, kc, init, ld_init, out, ld_out);
        TileRows<TB, R - 1>(rows, a, b, kc, init, ld_init, out, ld_out);
    }
}

// ---- epilogue: a finished tile to the output ----------------------------------

template <class T>
HWY_INLINE T* At(MRows m, size_t row, size_t col) {
    return static_cast<T*>(m.data) + row * m.ld + col;
}
template <class T>
HWY_INLINE const T* At(CRows m, size_t row, size_t col) {
    return static_cast<const T*>(m.data) + row * m.ld + col;
}

template <class T>
HWY_INLINE void StorePanelRow(const float* HWY_RESTRICT t, T* HWY_RESTRICT out, size_t n) {
    const DF df;
    for (size_t i = 0; i < n; i += kLanes) StoreAny(df, hn::LoadU(df, t + i), out + i, n - i);
}

template <class TO>
HWY_INLINE void FinishPanel(const Gemm& g, const float* HWY_RESTRICT t, size_t row, size_t j) {
    const DF df;
    switch (g.epilogue) {
        case Epilogue::store: {
            const size_t col = j * kPanel;
            StorePanelRow(t, At<TO>(g.c, row, col), std::min(kPanel, g.N - col));
            break;
        }
        case Epilogue::bias: {
            const size_t col = j * kPanel, n = std::min(kPanel, g.N - col);
            TO* c = At<TO>(g.c, row, col);
            for (size_t i = 0; i < n; i += kLanes)
                StoreAny(df, hn::Add(LoadAny(df, g.bias + col + i, n - i), hn::LoadU(df, t + i)), c + i, n - i);
            break;
        }
        case Epilogue::residual: {
            const size_t col = j * kPanel, n = std::min(kPanel, g.N - col);
            TO* c = At<TO>(g.c, row, col);
            const TO* res = At<TO>(g.residual, row, col);
            for (size_t i = 0; i < n; i += kLanes)
                StoreAny(df, hn::Add(LoadAny(df, res + i, n - i), hn::LoadU(df, t + i)), c + i, n - i);
            if (g.raw.data) {
                if (g.raw.elem == Elem::f32)
                    StorePanelRow(t, At<float>(g.raw, row, col), n);
                else
                    StorePanelRow(t, At<bf16>(g.raw, row, col), n);
            }
            break;
        }
        case Epilogue::swiglu:
        case Epilogue::geglu: {
            const size_t col = j * (kPanel / 2), n = std::min(kPanel / 2, g.N - col);
            if (g.epilogue == Epilogue::geglu)
                SwiGluStore<true>(t, t + kPanel / 2, At<TO>(g.c, row, col), n);
            else
                SwiGluStore<false>(t, t + kPanel / 2, At<TO>(g.c, row, col), n);
            break;
        }
    }
}

// Tile rows [row0, row0 + rows) x panels [j0, j0 + np), tile[r][p * kPanel + c].
HWY_INLINE void Finish(const Gemm& g, const float* HWY_RESTRICT tile, size_t ld_tile, size_t row0, size_t rows,
                       size_t j0, size_t np) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t p = 0; p < np; ++p) {
            const float* t = tile + r * ld_tile + p * kPanel;
            if (g.c.elem == Elem::f32)
                FinishPanel<float>(g, t, row0 + r, j0 + p);
            else
                FinishPanel<bf16>(g, t, row0 + r, j0 + p);
        }
}

// ---- the product ------------------------------------------------------------------

template <class TB>
HWY_INLINE void GemmPanelsT(const Gemm& g, size_t p0, size_t p1) {
    const TB* HWY_RESTRICT b = static_cast<const TB*>(g.b);
    const size_t M = g.M, K = g.K;
    const size_t panel = K * kPanel;  // elements per packed panel
    HWY_ALIGN float tile[std::max(kMR, kGemvPanels) * kPanel];

    if (M <= kMR) {
        size_t j = p0;
        if (M == 1) {
            for (; j + kGemvPanels <= p1; j += kGemvPanels) {
                Tile<1, kGemvPanels>(g.a, b + j * panel, panel, K, nullptr, 0, tile, kGemvPanels * kPanel);
                Finish(g, tile, kGemvPanels * kPanel, 0, 1, j, kGemvPanels);
            }
        }
        for (; j < p1; ++j) {
            TileRows<TB>(M, g.a, b + j * panel, K, nullptr, 0, tile, kPanel);
            Finish(g, tile, kPanel, 0, M, j, 1);
        }
        return;
    }

    const size_t ldp = g.n_panels * kPanel;
    HWY_ALIGN float slab[kKC * kPanel];  // bf16 panels widened once per K block
    for (size_t pc = 0; pc < K; pc += kKC) {
        const size_t kb = std::min(kKC, K - pc);
        const bool first = pc == 0, last = pc + kb == K;
        for (size_t ic = 0; ic < M; ic += kMC) {
            const size_t ie = std::min(M, ic + kMC);
            for (size_t j = p0; j < p1; ++j) {
                const TB* src = b + j * panel + pc * kPanel;
                const float* bp;
                if constexpr (hwy::IsSame<TB, float>()) {
                    bp = src;
                } else {
                    const DF df;
                    for (size_t i = 0; i < kb * kPanel; i += kLanes) hn::Store(LoadF(df, src + i), df, slab + i);
                    bp = slab;
                }
                for (size_t ir = ic; ir < ie; ir += kMR) {
                    const size_t rows = std::min(kMR, M - ir);
                    const float* a = g.a + ir * K + pc * rows;
                    float* part = g.partial + ir * ldp + j * kPanel;
                    const float* init = first ? nullptr : part;
                    if (last) {
                        TileRows<float>(rows, a, bp, kb, init, ldp, tile, kPanel);
                        Finish(g, tile, kPanel, ir, rows, j, 1);
                    } else {
                        TileRows<float>(rows, a, bp, kb, init, ldp, part, ldp);
                    }
                }
            }
        }
    }
}

HWY_INLINE void GemmPanels(const Gemm& g, size_t p0, size_t p1) {
    if (g.b_elem == Elem::f32)
        GemmPanelsT<float>(g, p0, p1);
    else
        GemmPanelsT<bf16>(g, p0, p1);
}

template <class TA>
HWY_INLINE void PackAT(CRows a, size_t M, size_t K, float* HWY_RESTRICT packed, size_t r0, size_t r1) {
    for (size_t ib = r0; ib < r1; ib += kMR) {
        const size_t rows = std::min(kMR, M - ib);
        float* dst = packed + ib * K;
        for (size_t r = 0; r < rows; ++r) {
            const TA* src = At<TA>(a, ib + r, 0);
            for (size_t k = 0; k < K; ++k) dst[k * rows + r] = ToF32(src[k]);
        }
    }
}

HWY_INLINE void PackA(CRows a, size_t M, size_t K, float* HWY_RESTRICT packed, size_t r0, size_t r1) {
    if (a.elem == Elem::f32)
        PackAT<float>(a, M, K, packed, r0, r1);
    else
        PackAT<bf16>(a, M, K, packed, r0, r1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#endif  // include guard

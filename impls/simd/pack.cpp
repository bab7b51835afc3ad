#include "simd/pack.h"

#include <algorithm>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace conform::simd {

namespace {

// Element (k, c) of panel p, as stored.
template <class T>
T* panel_at(Buffer& b, size_t K, size_t p, size_t k) {
    return static_cast<T*>(b.data()) + (p * K + k) * kPanel;
}

template <class T>
T convert(float v) {
    if constexpr (std::is_same_v<T, float>)
        return v;
    else
        return to_bf16(v);
}

// Fills panels [p0, p1); col_of(p, c) gives the source (view, column) of
// panel column c, or a null view for padding.
template <class T, class ColOf>
void fill(Buffer& b, size_t K, size_t p0, size_t p1, const ColOf& col_of) {
    for (size_t p = p0; p < p1; ++p) {
        const View* src[kPanel];
        int64_t col[kPanel];
        for (size_t c = 0; c < kPanel; ++c) col_of(p, c, src[c], col[c]);
        for (size_t k = 0; k < K; ++k) {
            T* dst = panel_at<T>(b, K, p, k);
            for (size_t c = 0; c < kPanel; ++c)
                dst[c] = src[c] ? convert<T>(src[c]->at(static_cast<int64_t>(k), col[c])) : convert<T>(0.0f);
        }
    }
}

template <class ColOf>
void fill_any(ThreadPool& pool, PackedWeight& w, Elem e, const ColOf& col_of) {
    w.data.resize(e, w.n_panels, w.K * kPanel);
    pool.RunRanges(w.n_panels, [&](size_t p0, size_t p1, int) {
        if (e == Elem::f32)
            fill<float>(w.data, w.K, p0, p1, col_of);
        else
            fill<bf16>(w.data, w.K, p0, p1, col_of);
    });
}

}  // namespace

PackedWeight pack_columns(ThreadPool& pool, Elem e, std::initializer_list<View> blocks) {
    std::vector<View> bs(blocks);
    std::vector<size_t> start;  // first output column of each block
    PackedWeight w;
    w.K = static_cast<size_t>(bs.front().rows);
    for (const View& b : bs) {
        if (static_cast<size_t>(b.rows) != w.K) throw std::logic_error("pack_columns: blocks differ in rows");
        start.push_back(w.N);
        w.N += static_cast<size_t>(b.cols);
    }
    w.n_panels = (w.N + kPanel - 1) / kPanel;
    fill_any(pool, w, e, [&](size_t p, size_t c, const View*& src, int64_t& col) {
        const size_t n = p * kPanel + c;
        src = nullptr;
        if (n >= w.N) return;
        const size_t b = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), n) - start.begin()) - 1;
        src = &bs[b];
        col = static_cast<int64_t>(n - start[b]);
    });
    return w;
}

PackedWeight pack_gate_up(ThreadPool& pool, Elem e, View w1, View w3) {
    PackedWeight w;
    w.K = static_cast<size_t>(w1.rows);
    w.N = static_cast<size_t>(w1.cols);
    const size_t half = kPanel / 2;
    w.n_panels = (w.N + half - 1) / half;
    fill_any(pool, w, e, [&](size_t p, size_t c, const View*& src, int64_t& col) {
        const size_t n = p * half + c % half;
        src = n < w.N ? (c < half ? &w1 : &w3) : nullptr;
        col = static_cast<int64_t>(n);
    });
    return w;
}

void matmul(ThreadPool& pool, Target t, CRows a, size_t M, const PackedWeight& w, const MatmulOut& out,
            GemmScratch& s) {
    const size_t K = w.K;
    const size_t mr = kern::gemm_row_block(t);
    s.packed_a.resize(Elem::f32, M, K);
    float* packed = static_cast<float*>(s.packed_a.data());
    const size_t blocks = (M + mr - 1) / mr;
    pool.RunRanges(blocks, [&](size_t b0, size_t b1, int) {
        kern::pack_a(t, a, M, K, packed, b0 * mr, std::min(M, b1 * mr));
    });

    Gemm g;
    g.a = packed;
    g.M = M;
    g.K = K;
    g.b = w.data.data();
    g.b_elem = w.data.elem();
    g.n_panels = w.n_panels;
    g.N = w.N;
    g.epilogue = out.epilogue;
    g.c = out.c;
    g.residual = out.residual;
    g.raw = out.raw;
    g.bias = out.bias;
    if (M > mr) {
        s.partial.resize(Elem::f32, M, w.n_panels * kPanel);
        g.partial = static_cast<float*>(s.partial.data());
    }
    pool.RunRanges(w.n_panels, [&](size_t p0, size_t p1, int) { kern::gemm_panels(t, g, p0, p1); });
}

}  // namespace conform::simd

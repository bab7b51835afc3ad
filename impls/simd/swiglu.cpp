// swiglu — the feed-forward as two products: the fused gate/up product whose
// epilogue applies silu(gate) * up, then the down product.
#include "simd/ops.h"

namespace conform::simd {

void swiglu(ThreadPool& pool, Target t, CRows x, size_t T, const PackedWeight& w13, const PackedWeight& w2,
            MRows out, Buffer& gated, GemmScratch& scratch) {
    // g = F.silu(self.w1(x)) * self.w3(x)
    gated.resize(out.elem, T, w13.N);
    matmul(pool, t, x, T, w13, {Epilogue::swiglu, gated.m(), {}, {}}, scratch);
    // out = self.w2(g)
    matmul(pool, t, gated.c(), T, w2, {Epilogue::store, out, {}, {}}, scratch);
}

}  // namespace conform::simd

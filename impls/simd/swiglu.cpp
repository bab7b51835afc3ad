// swiglu — the feed-forward as two products: the fused gate/up product whose
// epilogue applies act(gate) * up (silu, or gelu_tanh: GeGLU), then the down product.
#include "simd/ops.h"

namespace conform::simd {

void swiglu(ThreadPool& pool, Target t, CRows x, size_t T, const PackedWeight& w13, const PackedWeight& w2,
            HiddenAct act, MRows out, Buffer& gated, GemmScratch& scratch) {
    // g = act_fn(self.w1(x)) * self.w3(x)
    gated.resize(out.elem, T, w13.N);
    matmul(pool, t, x, T, w13, {gate_epilogue(act), gated.m(), {}, {}}, scratch);
    // out = self.w2(g)
    matmul(pool, t, gated.c(), T, w2, {Epilogue::store, out, {}, {}}, scratch);
}

}  // namespace conform::simd

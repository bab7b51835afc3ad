// decode — the engine's forward (block.cpp) driven as a server drives it: the
// prefill in one forward, then one forward per token, all appending to one KV
// cache that lives for the call. Each step's rows are computed as the block
// computes them (fixed block order in the products and attention), so decode
// reproduces block() bitwise.
#include "simd/engine.h"
#include "simd/kernels.h"

namespace conform::simd {

void decode(EngineContext& ctx, const EngineWeights& w, CRows x, const int64_t* pos, size_t T, size_t prefill,
            MutView out) {
    const BlockConfig& c = w.config;
    const size_t D = static_cast<size_t>(c.d_model);
    KvCache cache;
    cache.reset(w.elem, T, static_cast<size_t>(c.kv_width()));  // (T, KV hd) each, filled as we go
    RunState s;                                                   // grown by the first forward, reused after
    // prefill: the first `prefill` tokens in one forward
    if (prefill > 0) {
        forward(ctx, w, x, pos, prefill, cache, s);
        load(s.out.c(), 0, MutView{out.data, static_cast<int64_t>(prefill), c.d_model});
    }
    // decode: every later token alone, attending over the cache [0, t]
    for (size_t t = prefill; t < T; ++t) {
        forward(ctx, w, rows_from(x, t), pos + t, 1, cache, s);
        load(s.out.c(), 0, MutView{out.data + t * D, 1, c.d_model});
    }
}

}  // namespace conform::simd

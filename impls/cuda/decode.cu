// decode — the layer through a KV cache kept on the device, as a server runs
// it: the prefill in one forward, then every later token alone (T = 1, where
// attention splits the cache over blocks), each appending to the cache.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/forward.cuh"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace chk = scalar::detail;

void op_decode(const Context& ctx, View x, const BlockWeights& w, Positions pos, int64_t prefill,
               const BlockConfig& c, MutView out) {
    check_block("decode", x, pos, w, c);
    const int64_t T = x.rows, D = c.d_model;
    chk::expect_shape("decode", "out", out, T, D);
    chk::expect(prefill >= 0 && prefill <= T, "decode",
                "prefill must be in [0, " + std::to_string(T) + "], found " + std::to_string(prefill));
    if (T == 0) return;
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        // every step rotates with the whole call's RoPE (dynamic NTK: max(pos) + 1 tokens), as block() does
        const Weights<S> dw(ctx, w, c, scalar::rope_seq_len(pos));
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        const DeviceBuffer<int64_t> dpos = upload_positions(ctx, "pos", pos.data, sz(T));
        RunState<S> s(ctx, c, std::max<int64_t>(prefill, 1));  // the largest chunk: the prefill, or one token
        KvCache<S> cache(ctx, c, T);                           // (T, KVW) each, filled as we go
        if (c.kv_cache_dtype != KvCacheDtype::none) {
            const int64_t n = c.kv_scale_per_head ? c.n_kv_heads : 1;
            chk::expect_shape("decode", "k_scale", w.k_scale, 1, n);
            chk::expect_shape("decode", "v_scale", w.v_scale, 1, n);
            cache.use_fp8(ctx, c, w);
        }
        DeviceBuffer<S> dout("out", sz(T * D), ctx.stream);

        // prefill: the first `prefill` tokens in one forward
        if (prefill > 0) forward<S>(ctx, dw, c, dx.data(), dpos.data(), prefill, cache, s, dout.data());
        // decode: every later token alone (T = 1: attention splits the cache over blocks)
        for (int64_t t = prefill; t < T; ++t)
            forward<S>(ctx, dw, c, dx.data() + t * D, dpos.data() + t, 1, cache, s, dout.data() + t * D);
        ctx.sync("decode");
        download(ctx, dout, out);
        round_output(ctx.dtype, out);
        cache.k.fetch_checked(ctx.stream);  // every row of the cache written, none past it
        cache.v.fetch_checked(ctx.stream);
        s.scratch.check_guard(ctx.stream);
    });
}

}  // namespace conform::cuda

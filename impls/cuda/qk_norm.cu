// qk_norm — Qwen3's per-head RMSNorm of q or k, standalone. The rows of
// x[T, n*hd] viewed as [T*n, hd] are exactly the heads, so this is rmsnorm's
// kernel over that view (as ggml runs it); the block instead fuses QK-norm
// into the RoPE kernel (rope.cu), where the head is already in registers.
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

void op_qk_norm(const Context& ctx, View x, View w, const QkNormParams& p, MutView out) {
    namespace chk = scalar::detail;
    const int64_t hd = p.head_dim;
    chk::expect(hd > 0, "qk_norm", "head_dim must be positive, found " + std::to_string(hd));
    chk::expect(x.cols % hd == 0, "qk_norm",
                "x " + chk::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " + std::to_string(hd) +
                    " columns");
    chk::expect_shape("qk_norm", "w", w, 1, hd);
    chk::expect_shape("qk_norm", "out", out, x.rows, x.cols);
    const int64_t heads = x.rows * (x.cols / hd);  // q.view(T * n_heads, hd)
    with_storage(ctx.dtype, [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x), dw = upload<S>(ctx, "w", w);
        DeviceBuffer<S> dout("out", static_cast<size_t>(x.size()), ctx.stream);
        launch_rmsnorm<S>(dx.data(), nullptr, nullptr, dw.data(), dout.data(), heads, hd, static_cast<float>(p.eps),
                          p.plus_one ? 1.0f : 0.0f, ctx.stream);
        ctx.sync("qk_norm");
        download(ctx, dout, out);
    });
}

}  // namespace conform::cuda

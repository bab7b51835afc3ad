// moe — a mixture-of-experts FFN: the router (moe_route.cu) writes each
// token's weights into a device route, the experts (moe_experts.cu) read it
// there; the route comes back as the op's second output.
#include "cuda/common.cuh"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

void op_moe(const Context& ctx, View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) {
    namespace chk = scalar::detail;
    const int64_t T = x.rows;
    chk::expect_shape("moe", "x", x, T, c.d_model);
    chk::expect_shape("moe", "route", route, T, c.n_experts);
    chk::expect_shape("moe", "out", out, T, c.d_model);
    scalar::check_moe_weights("moe", w, c, true, true);
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        DeviceBuffer<S> droute("route", static_cast<size_t>(T * c.n_experts), ctx.stream);
        run_route<S>(ctx, dx, w, c, droute);
        run_experts<S>(ctx, dx, droute, w, c, out);
        download(ctx, droute, route);
        round_output(ctx.dtype, route);
    });
}

}  // namespace conform::cuda

// The two summation orders the tolerance model admits as legitimate.
#include "reference/torch_ops.h"

namespace conform::ref {

torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b, const Ctx& ctx) {
    if (ctx.order == Order::library) return torch::matmul(a, b);
    // One accumulator per output element, k ascending: acc += a[..., :, k] * b[..., k, :].
    // Products of dtype values are exact in the accumulation dtype; each add rounds there.
    const int64_t K = a.size(-1);
    auto af = a.to(ctx.acc_dtype), bf = b.to(ctx.acc_dtype);
    auto shape = af.sizes().vec();
    shape.back() = b.size(-1);
    auto acc = torch::zeros(shape, af.options());
    for (int64_t k = 0; k < K; ++k) acc.add_(af.narrow(-1, k, 1) * bf.narrow(-2, k, 1));
    return acc.to(ctx.dtype);
}

torch::Tensor sum_last(const torch::Tensor& x, const Ctx& ctx) {
    if (ctx.order == Order::library) return x.sum(-1, /*keepdim=*/true);
    const int64_t K = x.size(-1);
    auto xf = x.to(ctx.acc_dtype);
    auto acc = torch::zeros_like(xf.narrow(-1, 0, 1));
    for (int64_t k = 0; k < K; ++k) acc.add_(xf.narrow(-1, k, 1));
    return acc.to(x.scalar_type());
}

}  // namespace conform::ref

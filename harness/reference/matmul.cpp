// The two summation orders the tolerance model admits as legitimate.
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>

#include "conform/dtype.h"
#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// acc[b, m, n] = sum over k ascending of a[b, m, k] * b[b, k, n], one
// accumulator per output element: each product rounds to Acc, then each add
// — what `acc.add_(a[..., k] * b[..., k, :])` over k computes, without a
// temporary of the whole output per k (at K = 14336 those allocations were
// most of a full-size block's reference time). Columns are taken a panel at
// a time with every row's accumulators for it resident, so b is read once;
// panels run in parallel. The order of each element's sum is unchanged.
template <typename Acc>
void sequential(const Acc* a, const Acc* b, Acc* out, int64_t batch, int64_t M, int64_t K, int64_t N) {
    constexpr int64_t kPanel = 256;
    const int64_t panels = (N + kPanel - 1) / kPanel;
    at::parallel_for(0, batch * panels, 1, [&](int64_t begin, int64_t end) {
        for (int64_t job = begin; job < end; ++job) {
            const int64_t i = job / panels, n0 = (job % panels) * kPanel, w = std::min(kPanel, N - n0);
            const Acc* ai = a + i * M * K;
            const Acc* bi = b + i * K * N + n0;
            Acc* oi = out + i * M * N + n0;
            for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < w; ++n) oi[m * N + n] = 0;
            for (int64_t k = 0; k < K; ++k) {
                const Acc* bk = bi + k * N;
                for (int64_t m = 0; m < M; ++m) {
                    const Acc x = ai[m * K + k];
                    Acc* acc = oi + m * N;
                    // Two roundings, never one: this file is compiled with -ffp-contract=off.
                    for (int64_t n = 0; n < w; ++n) {
                        const Acc p = x * bk[n];
                        acc[n] = acc[n] + p;
                    }
                }
            }
        }
    });
}

}  // namespace

torch::Tensor act_quant_round_trip(const torch::Tensor& x, ActQuant q) {
    // float32 rows, each through the contract's quantiser (conform/dtype.h):
    // the one definition the kernels and the numpy worker follow too.
    const auto f = x.to(torch::kFloat32).contiguous();
    auto y = torch::empty_like(f);
    const int64_t K = f.size(-1), rows = K == 0 ? 0 : f.numel() / K;
    const float* in = f.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) act_quant_row(in + r * K, out + r * K, K, q);
    });
    return y.to(x.dtype());
}

torch::Tensor linear_input(const torch::Tensor& a, const char* w, const Ctx& ctx) {
    if (ctx.v.q8_k_inputs.count(w)) return act_quant_round_trip(a, ActQuant::q8_k);
    return ctx.act_quant == ActQuant::none ? a : act_quant_round_trip(a, ctx.act_quant);
}

torch::Tensor matmul(const torch::Tensor& a, const torch::Tensor& b, const Ctx& ctx) {
    if (ctx.order == Order::library) return torch::matmul(a, b);
    // One accumulator per output element, k ascending: acc += a[..., :, k] * b[..., k, :].
    // Products of dtype values are exact in the accumulation dtype; each add rounds there.
    TORCH_CHECK(a.dim() >= 2 && b.dim() >= 2, "sequential matmul: expected matrices");
    const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
    const auto batch = at::infer_size(a.sizes().slice(0, a.dim() - 2), b.sizes().slice(0, b.dim() - 2));
    auto with = [&](std::initializer_list<int64_t> tail) {
        std::vector<int64_t> s(batch.begin(), batch.end());
        s.insert(s.end(), tail);
        return s;
    };
    auto af = a.to(ctx.acc_dtype).expand(with({M, K})).contiguous();
    auto bf = b.to(ctx.acc_dtype).expand(with({K, N})).contiguous();
    auto acc = torch::empty(with({M, N}), af.options());
    int64_t B = 1;
    for (int64_t d : batch) B *= d;
    if (ctx.acc_dtype == torch::kFloat32)
        sequential(af.data_ptr<float>(), bf.data_ptr<float>(), acc.data_ptr<float>(), B, M, K, N);
    else if (ctx.acc_dtype == torch::kFloat64)
        sequential(af.data_ptr<double>(), bf.data_ptr<double>(), acc.data_ptr<double>(), B, M, K, N);
    else
        TORCH_CHECK(false, "sequential matmul: accumulation in ", ctx.acc_dtype);
    return acc.to(ctx.dtype);
}

torch::Tensor sum_last(const torch::Tensor& x, const Ctx& ctx) {
    if (ctx.order == Order::library) return x.sum(-1, /*keepdim=*/true);
    // acc += x[..., k] for k ascending, one accumulator per row, each add
    // rounding in the accumulation dtype (a loop of torch adds over k was a
    // second per 8k-key batch).
    const int64_t K = x.size(-1);
    auto xf = x.to(ctx.acc_dtype).contiguous();
    auto acc = torch::empty_like(xf.narrow(-1, 0, 1)).contiguous();
    const int64_t rows = acc.numel();
    auto run = [&](auto* in, auto* out) {
        for (int64_t r = 0; r < rows; ++r) {
            std::remove_pointer_t<decltype(in)> s = 0;
            for (int64_t k = 0; k < K; ++k) s = s + in[r * K + k];
            out[r] = s;
        }
    };
    if (ctx.acc_dtype == torch::kFloat32)
        run(xf.data_ptr<float>(), acc.data_ptr<float>());
    else if (ctx.acc_dtype == torch::kFloat64)
        run(xf.data_ptr<double>(), acc.data_ptr<double>());
    else
        TORCH_CHECK(false, "sequential sum: accumulation in ", ctx.acc_dtype);
    return acc.to(x.scalar_type());
}

}  // namespace conform::ref

#include "reference/model.h"

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

torch::Tensor f64(const Tensor& t) {
    return torch::from_blob(const_cast<float*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat32)
        .to(torch::kFloat64);
}
torch::Tensor f64(const DTensor& t) {
    return torch::from_blob(const_cast<double*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat64).clone();
}
DTensor dtensor(const torch::Tensor& t) {
    const auto c = t.to(torch::kFloat64).contiguous();
    DTensor d;
    d.shape = c.sizes().vec();
    d.data.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    return d;
}

}  // namespace

BlockStep block_f64(const DTensor& x, const Named& weights, const std::vector<int64_t>& positions,
                    const BlockConfig& c, bool all_taps, const std::set<std::string>& q8_k_inputs, bool gelu_f16) {
    torch::NoGradGuard no_grad;
    Variant engine;
    engine.q8_k_inputs = q8_k_inputs;
    engine.gelu_f16_table = gelu_f16;
    const Ctx ctx{torch::kFloat64, torch::kFloat64, Order::library, engine};
    std::map<std::string, torch::Tensor> in;
    for (const auto& [name, t] : weights) in[name] = f64(t);
    in["x"] = f64(x);
    const auto pos =
        torch::from_blob(const_cast<int64_t*>(positions.data()), {static_cast<int64_t>(positions.size())}, torch::kInt64)
            .clone();
    const auto taps = block(in, pos, c, x.rows(), ctx);
    BlockStep step{dtensor(taps.at("h")), dtensor(taps.at("out")), {}};
    if (all_taps) {
        for (const auto& [name, t] : taps) step.taps[name] = dtensor(t);
        step.taps["rope_in"] =
            c.qk_norm ? dtensor(qk_norm(taps.at("q"), in.at("q_norm").reshape({-1}), c.head_dim, c.norm_eps, c.norm_plus_one, ctx))
                      : step.taps.at("q");
    }
    return step;
}

DTensor rmsnorm_f64(const DTensor& x, const Tensor& weight, double eps, bool plus_one) {
    torch::NoGradGuard no_grad;
    const Variant faithful;
    const Ctx ctx{torch::kFloat64, torch::kFloat64, Order::library, faithful};
    return dtensor(rmsnorm(f64(x), f64(weight).reshape({-1}), eps, plus_one, ctx));
}

DTensor matmul_f64(const DTensor& x, const Tensor& w, bool q8_k_input) {
    torch::NoGradGuard no_grad;
    const Variant faithful;
    const Ctx ctx{torch::kFloat64, torch::kFloat64, Order::library, faithful};
    const auto a = f64(x);
    return dtensor(matmul(q8_k_input ? act_quant_round_trip(a, ActQuant::q8_k) : a, f64(w), ctx));
}

}  // namespace conform::ref

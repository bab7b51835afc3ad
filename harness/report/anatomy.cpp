// conform anatomy's table and conform-anatomy/1 (report/anatomy.h).
#include "report/anatomy.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <thread>
#include <vector>

#include "config/anatomy.h"
#include "config/options.h"
#include "reference/ceilings.h"

namespace conform::report {

namespace {

// What both outputs print: a decode step after the context, a prefill of T,
// and the T at which a layer's intensity is shown.
struct Counted {
    double es = 2;  // bytes per element: 4 for f32, 2 for bf16 and f16
    config::Anatomy decode, prefill;
    // The intensity of a layer as T grows: weights are read once per forward,
    // so FLOP per weight byte is T / (bytes per element / 2).
    std::vector<int64_t> sweep;
};

Counted count(const AnatomyPage& page) {
    Counted k;
    k.es = page.dtype == "f32" ? 4.0 : 2.0;
    k.decode = config::anatomy(page.model, 1, page.context, k.es);
    k.prefill = config::anatomy(page.model, page.tokens, 0, k.es);
    for (int64_t t = 1; t < page.tokens; t *= 4) k.sweep.push_back(t);
    k.sweep.push_back(page.tokens);
    return k;
}

nlohmann::json cost_json(const config::OpCost& c) {
    nlohmann::json j = {{"name", c.name},   {"group", c.group}, {"params", c.params},
                        {"flops", c.flops}, {"bytes", c.bytes}, {"intensity", c.intensity()}};
    if (!c.outputs.empty()) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& t : c.outputs) out.push_back({{"name", t.name}, {"shape", t.dims}});
        j["outputs"] = out;
    }
    return j;
}

nlohmann::json phase_json(const std::string& name, const config::Anatomy& a) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : a.ops) ops.push_back(cost_json(op));
    return {{"phase", name},
            {"tokens", a.tokens},
            {"context", a.context},
            {"ops", ops},
            {"layer", cost_json(a.layer)},
            {"model", cost_json(a.model)},
            {"embedding", cost_json(a.embedding)},
            {"lm_head", cost_json(a.lm_head)},
            {"flops_per_token", a.flops_per_token()},
            {"kv_cache_bytes", a.kv_cache_bytes}};
}

}  // namespace

Ridge measure_ridge() {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const ref::Ceilings c = ref::measure_ceilings(threads);
    return measured_ridge(c.copy_bytes_per_s, c.matmul_flops_per_s, c.threads, c.matmul_n);
}

nlohmann::json anatomy_json(const AnatomyPage& page) {
    const Counted k = count(page);
    nlohmann::json s = nlohmann::json::array();
    for (int64_t t : k.sweep) {
        const auto a = config::anatomy(page.model, t, 0, k.es);
        s.push_back({{"tokens", t},
                     {"layer_flops", a.layer.flops},
                     {"layer_bytes", a.layer.bytes},
                     {"intensity", a.layer.intensity()},
                     {"flops_per_weight_byte", a.layer.flops / (a.layer.params * k.es)}});
    }
    nlohmann::json out = {
        {"schema", "conform-anatomy/1"},
        {"config", config::config_json(page.model)},
        {"dtype", page.dtype},
        {"bytes_per_element", k.es},
        {"convention", config::anatomy_convention()},
        {"phases", {phase_json("decode", k.decode), phase_json("prefill", k.prefill)}},
        {"kv_cache",
         {{"bytes_per_token_per_layer", k.decode.kv_bytes_per_token_layer},
          {"bytes_per_token_per_layer_full_mha", k.decode.kv_bytes_per_token_layer_mha},
          {"bytes_per_token", k.decode.kv_bytes_per_token_model},
          {"bytes_for_prefill", k.prefill.kv_cache_bytes},
          {"bytes_for_decode", k.decode.kv_cache_bytes}}},
        {"intensity_by_tokens", s}};
    if (page.ridge.measured)
        out["ceilings"] = {{"copy_bytes_per_s", page.ridge.copy_bytes_per_s},
                           {"matmul_flops_per_s", page.ridge.matmul_flops_per_s},
                           {"ridge", page.ridge.flops_per_byte}};
    return out;
}

std::string anatomy_table(const AnatomyPage& page) {
    const Counted k = count(page);
    const config::ModelConfig& m = page.model;
    const double es = k.es;
    const config::Anatomy& decode = k.decode;
    const config::Anatomy& prefill = k.prefill;
    std::ostringstream out;
    using config::si;
    out << "conform anatomy\n";
    config::print_config(out, m);
    out << fmt::format(
        "\ncounted per layer, {} ({} bytes per element for weights, activations and KV cache); matmul = 2 FLOP per\n"
        "multiply-add; bytes = the minimum each op moves on its own (inputs and weights read once, output written\n"
        "once); FLOP/B = arithmetic intensity. decode: T = 1 after {} cached tokens; prefill: T = {} from empty.\n\n",
        page.dtype, es, page.context, page.tokens);
    out << fmt::format("{:<18}{:>9} | {:>9}{:>10}{:>8} | {:>9}{:>10}{:>8}\n", "op", "params", "FLOP", "bytes",
                       "FLOP/B", "FLOP", "bytes", "FLOP/B");
    out << fmt::format("{:<18}{:>9} | {:^27} | {:^27}\n", "", "", "decode (T=1)",
                       fmt::format("prefill (T={})", page.tokens));
    auto row = [&out](const std::string& name, double params, const config::OpCost& d, const config::OpCost& p) {
        out << fmt::format("{:<18}{:>9} | {:>9}{:>10}{:>8.1f} | {:>9}{:>10}{:>8.1f}\n", name,
                           params > 0 ? si(params) : "-", si(d.flops), si(d.bytes, "B"), d.intensity(),
                           si(p.flops), si(p.bytes, "B"), p.intensity());
    };
    for (size_t i = 0; i < decode.ops.size(); ++i) row(decode.ops[i].name, decode.ops[i].params, decode.ops[i], prefill.ops[i]);
    out << std::string(18 + 9 + 3 + 27 + 3 + 27, '-') << "\n";
    row("layer", decode.layer.params, decode.layer, prefill.layer);
    row(fmt::format("model ({} layers)", m.layers), decode.model.params, decode.model, prefill.model);
    out << fmt::format("{:<18}{:>9} | {:>9}{:>18} | {:>9}\n", "per token", "", si(decode.flops_per_token()), "",
                       si(prefill.flops_per_token()));
    out << fmt::format(
        "\nparameters: {} per layer, {} per model without embeddings ({} layers + final norm)", si(decode.layer.params),
        si(decode.model.params), m.layers);
    if (m.vocab > 0)
        out << fmt::format("; embedding {} and LM head {} (vocab {}) make {}", si(decode.embedding.params),
                           m.tie_embeddings ? "tied to it" : si(decode.lm_head.params), m.vocab,
                           si(decode.model.params + decode.embedding.params + decode.lm_head.params));
    out << "\n";
    double by_group[3] = {0, 0, 0};
    for (const auto& op : decode.ops)
        by_group[op.group == "attention" ? 0 : op.group == "ffn" ? 1 : 2] += op.params;
    out << fmt::format("  per layer: ffn {} ({:.0f}%), attention {} ({:.0f}%), norms {} ({:.2f}%)\n",
                       si(by_group[1]), 100 * by_group[1] / decode.layer.params, si(by_group[0]),
                       100 * by_group[0] / decode.layer.params, si(by_group[2]),
                       100 * by_group[2] / decode.layer.params);
    if (m.vocab > 0)
        out << fmt::format("  the LM head adds {} FLOP per token ({} with it)\n", si(decode.lm_head.flops),
                           si(decode.flops_per_token() + decode.lm_head.flops));
    out << fmt::format(
        "KV cache ({}): {:.0f} B per token per layer = 2 (K, V) x {} kv heads x {} head_dim x {:.0f} B; full multi-head "
        "attention would take {:.0f} B ({:.0f}x); {} per token over {} layers; {} after the prefill of {}, {} after the "
        "decode step{}\n",
        page.dtype, decode.kv_bytes_per_token_layer, m.block.n_kv_heads, m.block.head_dim, es,
        decode.kv_bytes_per_token_layer_mha, decode.kv_bytes_per_token_layer_mha / decode.kv_bytes_per_token_layer,
        si(decode.kv_bytes_per_token_model, "B"), m.layers, si(prefill.kv_cache_bytes, "B"), page.tokens,
        si(decode.kv_cache_bytes, "B"),
        m.block.sliding_window > 0 ? fmt::format(" (the window's last {} tokens)", m.block.sliding_window) : "");
    out << "arithmetic intensity of a layer as T grows (weights read once per forward):\n";
    out << fmt::format("  {:>6}{:>10}{:>18}\n", "T", "FLOP/B", "FLOP/weight byte");
    for (int64_t t : k.sweep) {
        const auto a = config::anatomy(m, t, 0, es);
        out << fmt::format("  {:>6}{:>10.1f}{:>18.1f}\n", t, a.layer.intensity(),
                           a.layer.flops / (a.layer.params * es));
    }
    if (page.ridge.measured) out << "ridge point: " << page.ridge.label << "\n";
    return out.str();
}

}  // namespace conform::report

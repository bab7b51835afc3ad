// conform anatomy: parameters, FLOPs, bytes and arithmetic intensity of one
// forward, op by op, for a decode step and a prefill — counted from the
// configuration (harness/config/anatomy.h says how), nothing run.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "reference/ceilings.h"
#include "report/anatomy_html.h"
#include "report/report.h"

namespace conform::cli {

namespace {

struct AnatomyOptions {
    config::ConfigOptions config;
    int64_t tokens = 512;
    int64_t context = 0;
    std::string dtype = "f16";
    bool json = false;
    std::string html;  // --html FILE
    CLI::Option* o_html = nullptr;
    bool with_ceilings = false;
};

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

int run_anatomy(const AnatomyOptions& o) {
    auto usage = [](const std::string& msg) {
        std::cerr << "conform anatomy: " << msg << "\n";
        return int(kUsage);
    };
    std::string problem;
    const std::optional<config::ModelConfig> resolved = config::resolve_model(o.config, &problem);
    if (!resolved) return usage(problem);
    const config::ModelConfig& m = *resolved;
    if (o.tokens < 1) return usage("--tokens: expected a positive count, found " + std::to_string(o.tokens));
    if (o.context < 0) return usage("--context: expected a count >= 0, found " + std::to_string(o.context));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) return usage("--dtype: expected f16, bf16 or f32, found '" + o.dtype + "'");
    const double es = *dt == DType::f32 ? 4.0 : 2.0;
    if (o.o_html && o.o_html->count())
        if (const std::string bad = report::html_target_problem(o.html); !bad.empty()) return usage("--html: " + bad);

    report::Ridge ridge = report::assumed_ridge();
    if (o.with_ceilings) {
        const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        const ref::Ceilings c = ref::measure_ceilings(threads);
        ridge = report::measured_ridge(c.copy_bytes_per_s, c.matmul_flops_per_s, c.threads, c.matmul_n);
    }
    if (o.o_html && o.o_html->count()) {
        report::AnatomyPage page;
        page.model = m;
        page.tokens = o.tokens;
        page.context = o.context;
        page.dtype = to_string(*dt);
        page.ridge = ridge;
        const std::string html = report::render_anatomy_html(page);
        try {
            write_file_atomic(o.html, html);
        } catch (const std::exception& e) {
            return usage(std::string("--html: ") + e.what());
        }
        (o.json ? std::cerr : std::cout) << fmt::format("conform anatomy: wrote {} ({} bytes; ridge {:.1f} FLOP/B, {})\n",
                                                        o.html, html.size(), ridge.flops_per_byte,
                                                        ridge.measured ? "measured" : "assumed");
        if (!o.json) return kConform;
    }

    const config::Anatomy decode = config::anatomy(m, 1, o.context, es);
    const config::Anatomy prefill = config::anatomy(m, o.tokens, 0, es);
    // The intensity of a layer as T grows: weights are read once per forward,
    // so FLOP per weight byte is T / (bytes per element / 2).
    std::vector<int64_t> sweep;
    for (int64_t t = 1; t < o.tokens; t *= 4) sweep.push_back(t);
    sweep.push_back(o.tokens);

    if (o.json) {
        nlohmann::json s = nlohmann::json::array();
        for (int64_t t : sweep) {
            const auto a = config::anatomy(m, t, 0, es);
            s.push_back({{"tokens", t},
                         {"layer_flops", a.layer.flops},
                         {"layer_bytes", a.layer.bytes},
                         {"intensity", a.layer.intensity()},
                         {"flops_per_weight_byte", a.layer.flops / (a.layer.params * es)}});
        }
        nlohmann::json out = {
            {"schema", "conform-anatomy/1"},
            {"config", config::config_json(m)},
            {"dtype", to_string(*dt)},
            {"bytes_per_element", es},
            {"convention", config::anatomy_convention()},
            {"phases", {phase_json("decode", decode), phase_json("prefill", prefill)}},
            {"kv_cache",
             {{"bytes_per_token_per_layer", decode.kv_bytes_per_token_layer},
              {"bytes_per_token_per_layer_full_mha", decode.kv_bytes_per_token_layer_mha},
              {"bytes_per_token", decode.kv_bytes_per_token_model},
              {"bytes_for_prefill", prefill.kv_cache_bytes}}},
            {"intensity_by_tokens", s}};
        if (o.with_ceilings)
            out["ceilings"] = {{"copy_bytes_per_s", ridge.copy_bytes_per_s},
                               {"matmul_flops_per_s", ridge.matmul_flops_per_s},
                               {"ridge", ridge.flops_per_byte}};
        std::cout << out.dump(2) << "\n";
        return kConform;
    }

    using config::si;
    std::cout << "conform anatomy\n";
    config::print_config(std::cout, m);
    std::cout << fmt::format(
        "\ncounted per layer, {} ({} bytes per element for weights, activations and KV cache); matmul = 2 FLOP per\n"
        "multiply-add; bytes = the minimum each op moves on its own (inputs and weights read once, output written\n"
        "once); FLOP/B = arithmetic intensity. decode: T = 1 after {} cached tokens; prefill: T = {} from empty.\n\n",
        to_string(*dt), es, o.context, o.tokens);
    std::cout << fmt::format("{:<18}{:>9} | {:>9}{:>10}{:>8} | {:>9}{:>10}{:>8}\n", "op", "params", "FLOP", "bytes",
                             "FLOP/B", "FLOP", "bytes", "FLOP/B");
    std::cout << fmt::format("{:<18}{:>9} | {:^27} | {:^27}\n", "", "", "decode (T=1)",
                             fmt::format("prefill (T={})", o.tokens));
    auto row = [](const std::string& name, double params, const config::OpCost& d, const config::OpCost& p) {
        std::cout << fmt::format("{:<18}{:>9} | {:>9}{:>10}{:>8.1f} | {:>9}{:>10}{:>8.1f}\n", name,
                                 params > 0 ? si(params) : "-", si(d.flops), si(d.bytes, "B"), d.intensity(),
                                 si(p.flops), si(p.bytes, "B"), p.intensity());
    };
    for (size_t i = 0; i < decode.ops.size(); ++i) row(decode.ops[i].name, decode.ops[i].params, decode.ops[i], prefill.ops[i]);
    std::cout << std::string(18 + 9 + 3 + 27 + 3 + 27, '-') << "\n";
    row("layer", decode.layer.params, decode.layer, prefill.layer);
    row(fmt::format("model ({} layers)", m.layers), decode.model.params, decode.model, prefill.model);
    std::cout << fmt::format("{:<18}{:>9} | {:>9}{:>18} | {:>9}\n", "per token", "", si(decode.flops_per_token()), "",
                             si(prefill.flops_per_token()));
    std::cout << fmt::format(
        "\nparameters: {} per layer, {} per model without embeddings ({} layers + final norm)", si(decode.layer.params),
        si(decode.model.params), m.layers);
    if (m.vocab > 0)
        std::cout << fmt::format("; embedding {} and LM head {} (vocab {}) make {}", si(decode.embedding.params),
                                 m.tie_embeddings ? "tied to it" : si(decode.lm_head.params), m.vocab,
                                 si(decode.model.params + decode.embedding.params + decode.lm_head.params));
    std::cout << "\n";
    double by_group[3] = {0, 0, 0};
    for (const auto& op : decode.ops)
        by_group[op.group == "attention" ? 0 : op.group == "ffn" ? 1 : 2] += op.params;
    std::cout << fmt::format("  per layer: ffn {} ({:.0f}%), attention {} ({:.0f}%), norms {} ({:.2f}%)\n",
                             si(by_group[1]), 100 * by_group[1] / decode.layer.params, si(by_group[0]),
                             100 * by_group[0] / decode.layer.params, si(by_group[2]),
                             100 * by_group[2] / decode.layer.params);
    if (m.vocab > 0)
        std::cout << fmt::format("  the LM head adds {} FLOP per token ({} with it)\n", si(decode.lm_head.flops),
                                 si(decode.flops_per_token() + decode.lm_head.flops));
    std::cout << fmt::format(
        "KV cache ({}): {:.0f} B per token per layer = 2 (K, V) x {} kv heads x {} head_dim x {:.0f} B; full multi-head "
        "attention would take {:.0f} B ({:.0f}x); {} per token over {} layers; {} after the prefill of {}\n",
        to_string(*dt), decode.kv_bytes_per_token_layer, m.block.n_kv_heads, m.block.head_dim, es,
        decode.kv_bytes_per_token_layer_mha, decode.kv_bytes_per_token_layer_mha / decode.kv_bytes_per_token_layer,
        si(decode.kv_bytes_per_token_model, "B"), m.layers, si(prefill.kv_cache_bytes, "B"), o.tokens);
    std::cout << "arithmetic intensity of a layer as T grows (weights read once per forward):\n";
    std::cout << fmt::format("  {:>6}{:>10}{:>18}\n", "T", "FLOP/B", "FLOP/weight byte");
    for (int64_t t : sweep) {
        const auto a = config::anatomy(m, t, 0, es);
        std::cout << fmt::format("  {:>6}{:>10.1f}{:>18.1f}\n", t, a.layer.intensity(),
                                 a.layer.flops / (a.layer.params * es));
    }
    if (o.with_ceilings) std::cout << "ridge point: " << ridge.label << "\n";
    return kConform;
}

}  // namespace

Command add_anatomy(CLI::App& app) {
    auto o = std::make_shared<AnatomyOptions>();
    CLI::App* sub = app.add_subcommand(
        "anatomy", "parameters, FLOPs, bytes and arithmetic intensity per op, layer and model; KV cache per token");
    config::add_config_options(*sub, o->config);
    sub->add_option("--tokens", o->tokens, "prefill length T (default 512)");
    sub->add_option("--context", o->context, "decode: tokens already in the KV cache (default 0)");
    sub->add_option("--dtype", o->dtype, "bytes per element of weights, activations, KV cache: f16 | bf16 | f32 (default f16)");
    sub->add_flag("--json", o->json, "print the numbers as JSON (schema conform-anatomy/1)");
    o->o_html = sub->add_option("--html", o->html,
                                "write the numbers as one self-contained page to play with (controls for the "
                                "configuration, T, context, dtype), instead of the table");
    sub->add_flag("--with-ceilings", o->with_ceilings,
                  "measure this machine's copy bandwidth and matmul rate (as bench does) for the ridge point; "
                  "default: an H100-like 295 FLOP/B, stated as assumed");
    return {sub, [o] { return run_anatomy(*o); }};
}

}  // namespace conform::cli

// conform forward: one forward of a randomly initialised model (embedding, L
// blocks, final norm, LM head; harness/model/) through the reference in
// float64 and through each implementation's own block(), layer by layer. It
// prints the residual stream after every sub-layer, and each
// implementation's error there and on the logits — how error drifts with depth.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "model/model.h"
#include "reference/model.h"
#include "reference/reference.h"
#include "registry.h"

namespace conform::cli {

namespace {

struct ForwardOptions {
    config::ConfigOptions config;
    int64_t tokens = 8, vocab = 512, start = 0, scale_down = 1;
    uint64_t seed = 1;
    std::string impls, dtype = "f32";
    bool json = false;
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

struct Runner {
    std::string name;
    std::unique_ptr<Implementation> impl;
    Tensor x;  // its residual stream, float32 as the interface carries it
    bool failed = false;
    std::string error;
};

// One row of the table: the reference's stream at a stage, each implementation's error there.
struct Row {
    std::string stage;
    std::vector<int64_t> shape;
    model::Moments ref;
    std::vector<std::optional<model::Error>> err;  // per runner; nullopt: not available
};

std::string shape_of(const std::vector<int64_t>& s) { return fmt::format("[{}, {}]", s[0], s[1]); }

// GQA is multi-head attention on kv heads repeated: query head h reads kv
// head h / group. Computes both on the same q, k, v (random, this config's
// shapes); returns max |GQA - MHA|.
double gqa_vs_mha(Implementation* impl, const BlockConfig& c, const std::vector<int64_t>& pos) {
    const int64_t T = static_cast<int64_t>(pos.size()), H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim;
    const int64_t g = c.group();
    model::Spec s;
    s.block = c;
    s.seed = 977;
    s.vocab = std::max<int64_t>(T, 2);
    // Three random [T, width] matrices (std 1) from the model's own generator.
    auto random = [&](int64_t width, int salt) {
        model::Spec r = s;
        r.seed += static_cast<uint64_t>(salt);
        r.vocab = T;
        r.block.d_model = width;
        return model::embedding(r);  // [T, width], std 1
    };
    const Tensor q = random(H * hd, 1), k = random(KV * hd, 2), v = random(KV * hd, 3);
    Tensor k_rep(T, H * hd), v_rep(T, H * hd);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t d = 0; d < hd; ++d) {
                k_rep.data[static_cast<size_t>(t * H * hd + h * hd + d)] = k.data[static_cast<size_t>(t * KV * hd + (h / g) * hd + d)];
                v_rep.data[static_cast<size_t>(t * H * hd + h * hd + d)] = v.data[static_cast<size_t>(t * KV * hd + (h / g) * hd + d)];
            }
    if (impl) {
        Tensor a(T, H * hd), b(T, H * hd);
        const Positions p{pos.data(), T};
        impl->attention(q.view(), k.view(), v.view(), p, p, {H, KV, hd}, a.mut());
        impl->attention(q.view(), k_rep.view(), v_rep.view(), p, p, {H, H, hd}, b.mut());
        return model::error(model::to_double(a), model::to_double(b)).max_abs;
    }
    Case gqa;
    gqa.op = Op::attention;
    gqa.config = c;
    gqa.inputs["q"] = q;
    gqa.inputs["k"] = k;
    gqa.inputs["v"] = v;
    gqa.positions["q_positions"] = pos;
    gqa.positions["k_positions"] = pos;
    Case mha = gqa;
    mha.config.n_kv_heads = H;
    mha.inputs["k"] = k_rep;
    mha.inputs["v"] = v_rep;
    return model::error(ref::run(gqa).at("out"), ref::run(mha).at("out")).max_abs;
}

int run_forward(const ForwardOptions& o) {
    auto usage = [](const std::string& msg) {
        std::cerr << "conform forward: " << msg << "\n";
        return int(kUsage);
    };
    std::string problem;
    const std::optional<config::ModelConfig> resolved = config::resolve_model(o.config, &problem);
    if (!resolved) return usage(problem);
    const config::ModelConfig& m = *resolved;
    if (o.tokens < 1) return usage("--tokens: expected a positive count, found " + std::to_string(o.tokens));
    if (o.vocab < 1) return usage("--vocab: expected a positive count, found " + std::to_string(o.vocab));
    if (o.start < 0) return usage("--positions: expected a position >= 0, found " + std::to_string(o.start));
    if (o.scale_down < 1) return usage("--scale-down: expected K >= 1, found " + std::to_string(o.scale_down));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) return usage("--dtype: expected f32, bf16 or f16, found '" + o.dtype + "'");

    model::Spec s;
    s.block = config::scale_down(m.block, o.scale_down);
    s.layers = m.layers;
    s.tokens = o.tokens;
    s.vocab = o.vocab;
    s.start = o.start;
    s.seed = o.seed;
    const BlockConfig& c = s.block;

    // ---- implementations ---------------------------------------------------------
    std::vector<Runner> runners;
    std::vector<std::string> names = split(o.impls);
    if (names.empty())
        for (const auto& e : implementations()) names.push_back(e.name);
    std::ostream& log = o.json ? std::cerr : std::cout;
    for (const auto& n : names) {
        const ImplEntry* e = find_implementation(n);
        if (!e) return usage("--impl: unknown implementation '" + n + "' (see `conform list`)");
        const Availability a = e->available();
        if (!a.available) {
            if (!o.impls.empty()) {
                std::cerr << "conform forward: implementation '" << n << "' is unavailable on this machine: " << a.reason << "\n";
                return kUnavailable;
            }
            log << "skipping " << n << ": " << a.reason << "\n";
            continue;
        }
        ImplOptions io;
        io.dtype = *dt;
        Runner r{n, e->create(io), {}, false, {}};
        const Support sup = r.impl->supports(Op::block, c);
        if (!sup.ok) {
            log << "skipping " << n << ": " << sup.reason << "\n";
            continue;
        }
        runners.push_back(std::move(r));
    }

    if (!o.json) {
        std::cout << "conform forward\n";
        config::print_config(std::cout, m);
        std::cout << fmt::format("  model: {} layers, vocab {} (random, seed {}), T = {} tokens at positions {}..{}{}\n",
                                 s.layers, s.vocab, s.seed, s.tokens, s.start, s.start + s.tokens - 1,
                                 o.scale_down > 1 ? fmt::format(", d_model and ffn / {} = {}, {}", o.scale_down,
                                                                c.d_model, c.ffn_dim)
                                                  : "");
        std::cout << "  weights: std 1/sqrt(fan_in); wo and w2 also / sqrt(2L); norm weights 1 + N(0, 0.01)\n";
    }
    const auto t0 = std::chrono::steady_clock::now();

    // ---- the forward, layer by layer --------------------------------------------------
    const std::vector<int64_t> ids = model::token_ids(s), pos = model::positions(s);
    const Positions p{pos.data(), s.tokens};
    std::vector<Row> rows;
    auto row = [&](std::string stage, const DTensor& ref) {
        Row r{std::move(stage), ref.shape, model::moments(ref), {}};
        r.err.resize(runners.size());
        rows.push_back(std::move(r));
        return rows.size() - 1;
    };
    DTensor x;  // the reference's stream, float64
    {
        const Tensor table = model::embedding(s);
        const Tensor e = model::embed(table, ids);
        x = model::to_double(e);
        const size_t i = row("embedding", x);
        for (size_t j = 0; j < runners.size(); ++j) {
            runners[j].x = e;
            rows[i].err[j] = model::Error{};
        }
    }
    try {
        for (int64_t l = 0; l < s.layers; ++l) {
            const Named w = model::layer_weights(s, l);
            const ref::BlockStep step = ref::block_f64(x, w, pos, c);
            const size_t ih = row(fmt::format("layer {:>2} + attn", l), step.h);
            const size_t io = row(fmt::format("layer {:>2} + ffn", l), step.out);
            const BlockWeights bw = model::views(w, c.qk_norm);
            for (size_t j = 0; j < runners.size(); ++j) {
                Runner& r = runners[j];
                if (r.failed) continue;
                Tensor h(s.tokens, c.d_model), out(s.tokens, c.d_model);
                BlockOutputs outs;
                outs[Tap::h] = h.mut();
                outs[Tap::out] = out.mut();
                try {
                    const TapSet wrote = r.impl->block(r.x.view(), bw, p, c, outs);
                    if (wrote.has(Tap::h)) rows[ih].err[j] = model::error(model::to_double(h), step.h);
                    rows[io].err[j] = model::error(model::to_double(out), step.out);
                    r.x = std::move(out);
                } catch (const std::exception& e) {
                    r.failed = true;
                    r.error = fmt::format("layer {}: {}", l, e.what());
                }
            }
            x = step.out;
        }
        // out = lm_head(rmsnorm(x))
        const Tensor norm_w = model::final_norm(s), head = model::lm_head(s);
        const DTensor normed = ref::rmsnorm_f64(x, norm_w, c.norm_eps);
        const DTensor logits = ref::matmul_f64(normed, head);
        const size_t in = row("final norm", normed);
        const size_t il = row("logits", logits);
        for (size_t j = 0; j < runners.size(); ++j) {
            Runner& r = runners[j];
            if (r.failed) continue;
            Tensor n(s.tokens, c.d_model);
            try {
                r.impl->rmsnorm(r.x.view(), norm_w.view(), rmsnorm_params(c), n.mut());
            } catch (const std::exception& e) {
                r.failed = true;
                r.error = std::string("final norm: ") + e.what();
                continue;
            }
            rows[in].err[j] = model::error(model::to_double(n), normed);
            rows[il].err[j] = model::error(model::matmul_acc64(n, head), logits);
        }
    } catch (const std::exception& e) {
        std::cerr << "conform forward: " << e.what() << "\n";
        return kUsage;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- checks -------------------------------------------------------------------------
    std::vector<std::pair<std::string, double>> gqa;
    gqa.emplace_back("reference", gqa_vs_mha(nullptr, c, pos));
    for (auto& r : runners)
        if (!r.failed && r.impl->supports(Op::attention, c).ok) gqa.emplace_back(r.name, gqa_vs_mha(r.impl.get(), c, pos));
    const config::Anatomy an = config::anatomy(m, 1, 0, 2);
    double ffn = 0, attn = 0, norms = 0;
    for (const auto& op : an.ops) (op.group == "ffn" ? ffn : op.group == "attention" ? attn : norms) += op.params;
    double min_std = INFINITY, max_std = 0;
    for (const auto& r : rows)
        if (r.stage != "logits") min_std = std::min(min_std, r.ref.std), max_std = std::max(max_std, r.ref.std);
    const bool stable = min_std > 0.1 && max_std < 10;
    bool finite = true;
    for (const auto& r : rows)
        for (const auto& e : r.err)
            if (e && !std::isfinite(e->max_abs)) finite = false;
    bool gqa_ok = true;
    for (const auto& [name, d] : gqa)
        if (!(d <= 1e-5)) gqa_ok = false;

    if (o.json) {
        nlohmann::json jr = nlohmann::json::array();
        for (const auto& r : rows) {
            nlohmann::json errs = nlohmann::json::object();
            for (size_t j = 0; j < runners.size(); ++j)
                if (r.err[j]) errs[runners[j].name] = {{"max_abs", r.err[j]->max_abs}, {"rel", r.err[j]->rel}};
            jr.push_back({{"stage", r.stage}, {"shape", r.shape}, {"mean", r.ref.mean}, {"std", r.ref.std},
                          {"max_abs", r.ref.max_abs}, {"errors", errs}});
        }
        nlohmann::json failures = nlohmann::json::object();
        for (const auto& r : runners)
            if (r.failed) failures[r.name] = r.error;
        nlohmann::json g = nlohmann::json::object();
        for (const auto& [name, d] : gqa) g[name] = d;
        std::cout << nlohmann::json{{"schema", "conform-forward/1"},
                                    {"config", config::config_json(m)},
                                    {"layers", s.layers},
                                    {"tokens", s.tokens},
                                    {"vocab", s.vocab},
                                    {"seed", s.seed},
                                    {"scale_down", o.scale_down},
                                    {"dtype", to_string(*dt)},
                                    {"rows", jr},
                                    {"failures", failures},
                                    {"checks",
                                     {{"gqa_equals_mha_on_repeated_kv", g},
                                      {"params_per_layer", {{"ffn", ffn}, {"attention", attn}, {"norms", norms}}},
                                      {"residual_std_range", {min_std, max_std}}}},
                                    {"seconds", seconds}}
                         .dump(2)
                  << "\n";
    } else {
        std::cout << fmt::format("\n{:<18}{:<13}{:>10}{:>9}", "stage", "shape", "mean", "std");
        for (const auto& r : runners) std::cout << fmt::format("  {:>20}", r.name + " err (rel)");
        std::cout << "\n";
        for (const auto& r : rows) {
            std::cout << fmt::format("{:<18}{:<13}{:>+10.4f}{:>9.4f}", r.stage, shape_of(r.shape), r.ref.mean, r.ref.std);
            for (const auto& e : r.err)
                std::cout << (e ? fmt::format("  {:>10.2e} ({:>7.1e})", e->max_abs, e->rel) : fmt::format("  {:>20}", "-"));
            std::cout << "\n";
        }
        std::cout << "\nthe reference in float64; err: max |impl - reference| over the tensor (rel: / max |reference|);\n"
                     "each implementation carries its own stream from layer to layer, so the error accumulates.\n";
        for (const auto& r : runners)
            if (r.failed) std::cout << fmt::format("{}: stopped at {}\n", r.name, r.error);
        std::cout << "\nchecks:\n";
        std::cout << fmt::format("  GQA (H={}, KV={}) equals multi-head attention on kv heads repeated h / {}: {}\n",
                                 c.n_heads, c.n_kv_heads, c.group(), gqa_ok ? "yes" : "NO");
        for (const auto& [name, d] : gqa) std::cout << fmt::format("    {:<12} max |GQA - MHA| = {:.1e}\n", name, d);
        std::cout << fmt::format(
            "  parameters per layer ({}): ffn {} ({:.0f}%), attention {} ({:.0f}%), norms {} ({:.2f}%){}\n", m.name,
            config::si(ffn), 100 * ffn / an.layer.params, config::si(attn), 100 * attn / an.layer.params,
            config::si(norms), 100 * norms / an.layer.params, ffn > attn ? ": the FFN dominates" : "");
        std::cout << fmt::format("  residual stream std over {} layers: {:.3f} .. {:.3f} ({})\n", s.layers, min_std,
                                 max_std, stable ? "stable" : "NOT stable: outside [0.1, 10]");
        std::cout << fmt::format("\n({:.1f} s)\n", seconds);
    }
    return finite && gqa_ok && stable ? kConform : kNonconformance;
}

}  // namespace

Command add_forward(CLI::App& app) {
    auto o = std::make_shared<ForwardOptions>();
    CLI::App* sub = app.add_subcommand(
        "forward", "one forward of a random model (embedding, L blocks, final norm, LM head): the residual stream "
                   "after every sub-layer and each implementation's error there");
    config::add_config_options(*sub, o->config);
    sub->add_option("--tokens", o->tokens, "T: tokens in the forward (default 8)");
    sub->add_option("--impl", o->impls, "implementations, comma-separated (default: every available one)");
    sub->add_option("--vocab", o->vocab, "vocabulary of the random model (default 512; the real one only widens the LM head)");
    sub->add_option("--positions", o->start, "position of the first token (default 0)");
    sub->add_option("--seed", o->seed, "seed of the weights and tokens (default 1)");
    sub->add_option("--scale-down", o->scale_down,
                    "divide d_model and ffn by K (heads, head_dim, conventions and depth kept; default 1)");
    sub->add_option("--dtype", o->dtype, "dtype the implementations run in: f32, bf16, f16 (default f32)");
    sub->add_flag("--json", o->json, "print the table as JSON (schema conform-forward/1)");
    return {sub, [o] { return run_forward(*o); }};
}

}  // namespace conform::cli

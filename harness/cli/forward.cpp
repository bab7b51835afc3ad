// conform forward: one forward of a model (embedding, L blocks, final norm, LM
// head) through the reference in float64 and through each implementation's
// own block(), layer by layer: a randomly initialised one (harness/model/), or
// a real checkpoint's (--weights; harness/run/real.h). It prints the residual
// stream after every sub-layer, and each implementation's error there and on
// the logits — how error drifts with depth. --save-logits writes the logits.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "h5/fixture.h"
#include "model/model.h"
#include "reference/model.h"
#include "reference/reference.h"
#include "registry.h"
#include "run/real.h"

namespace conform::cli {

namespace {

struct ForwardOptions {
    config::ConfigOptions config;
    int64_t tokens = 8, vocab = 512, start = 0, scale_down = 1;
    uint64_t seed = 1;
    std::string impls, dtype = "f32";
    bool json = false;
    std::string tokens_arg = "8";                        // --tokens: a count, or (--weights) the ids
    std::string weights, save_logits, expect_logits;     // a real checkpoint; where the logits go; what they must be
    double logits_tol = 1e-3;
    int64_t token_count = 8;
    bool force = false;
    CLI::Option* o_tokens = nullptr;
    CLI::Option* o_token_count = nullptr;
};

// Where a forward's weights come from: a checkpoint (a layer read at a time)
// or the seeded random model.
struct Source {
    std::function<Tensor(const std::vector<int64_t>&)> embed;  // [T, D] rows of those ids
    std::function<Named(int64_t)> layer;
    std::function<Tensor()> final_norm;                         // [1, D]
    std::function<Tensor(int64_t, int64_t)> head_columns;       // [D, v1 - v0]
};

// The LM head a slice of the vocabulary at a time: a real one is vocab x D
// floats (2 GiB for Llama 3 8B), never held whole. f(head slice, v0).
void head_slices(const Source& src, int64_t vocab, const std::function<void(const Tensor&, int64_t)>& f) {
    constexpr int64_t kSlice = 8192;
    for (int64_t v0 = 0; v0 < vocab; v0 += kSlice) f(src.head_columns(v0, std::min(vocab, v0 + kSlice)), v0);
}

void place(DTensor& into, const DTensor& part, int64_t v0) {
    const int64_t V = into.cols();
    for (int64_t t = 0; t < into.rows(); ++t)
        for (int64_t v = 0; v < part.cols(); ++v)
            into.data[static_cast<size_t>(t * V + v0 + v)] = part.data[static_cast<size_t>(t * part.cols() + v)];
}

// The reference's float64 logits of the whole model under config c.
DTensor reference_logits(const Source& src, const BlockConfig& c, int64_t layers, int64_t vocab,
                         const std::vector<int64_t>& ids, const std::vector<int64_t>& pos) {
    DTensor x = model::to_double(src.embed(ids));
    for (int64_t l = 0; l < layers; ++l) x = ref::block_f64(x, src.layer(l), pos, c).out;
    const DTensor normed = ref::rmsnorm_f64(x, src.final_norm(), c.norm_eps);
    DTensor logits{{x.rows(), vocab}, std::vector<double>(static_cast<size_t>(x.rows() * vocab))};
    head_slices(src, vocab, [&](const Tensor& head, int64_t v0) { place(logits, ref::matmul_f64(normed, head), v0); });
    return logits;
}

double rel_error(const DTensor& a, const DTensor& b) {
    double num = 0, den = 0;
    for (size_t i = 0; i < a.data.size(); ++i)
        num = std::max(num, std::abs(a.data[i] - b.data[i])), den = std::max(den, std::abs(b.data[i]));
    return den > 0 ? num / den : num;
}

// The fraction of tokens whose top-1 logit is the same.
double top1_agreement(const DTensor& a, const DTensor& b) {
    const int64_t T = a.rows(), V = a.cols();
    int64_t same = 0;
    for (int64_t t = 0; t < T; ++t) {
        auto row = [&](const DTensor& d) { return d.data.begin() + t * V; };
        same += std::max_element(row(a), row(a) + V) - row(a) == std::max_element(row(b), row(b) + V) - row(b);
    }
    return T ? double(same) / double(T) : 1.0;
}

// A model-level diagnosis: the configs one convention away from c (as the
// op-level hypotheses, harness/diagnose/, name them) whose reference logits
// match the expected ones.
std::vector<std::pair<std::string, BlockConfig>> config_hypotheses(const BlockConfig& c) {
    std::vector<std::pair<std::string, BlockConfig>> h;
    BlockConfig v = c;
    v.rope_layout = c.rope_layout == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
    h.emplace_back("rope_layout_swapped", v);
    for (double theta : {10000.0, 100000.0, 500000.0, 1000000.0})
        if (theta != c.rope_theta) {
            v = c;
            v.rope_theta = theta;
            h.emplace_back(theta == 10000.0 ? "rope_theta_default" : fmt::format("rope_theta_wrong (theta {:g})", theta), v);
        }
    if (c.rope_scaling.type != RopeScalingType::none) {
        v = c;
        v.rope_scaling = RopeScaling{};
        h.emplace_back("rope_scaling_ignored", v);
    }
    if (c.rotary_dim > 0 && c.rotary_dim != c.head_dim) {
        v = c;
        v.rotary_dim = c.head_dim;
        h.emplace_back("partial_rotary_ignored", v);
    }
    if (c.qk_norm) {
        v = c;
        v.qk_norm = false;
        h.emplace_back("qk_norm_missing", v);
    }
    return h;
}

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
    // A real checkpoint: its configuration, layers, embedding, final norm and
    // LM head; the token ids given or a fixed random sequence of --tokens.
    std::shared_ptr<run::RealModel> real;
    std::optional<config::ModelConfig> resolved;
    int64_t n_tokens = 0;
    const bool ids_given = o.tokens_arg.find(',') != std::string::npos || (!o.weights.empty() && o.o_tokens->count() &&
                                                                          !o.o_token_count->count());
    // Before any work: an output that exists is refused now, not after the forward.
    std::error_code ec;
    if (!o.save_logits.empty() && !o.force && std::filesystem::exists(o.save_logits, ec))
        return usage(o.save_logits + ": exists (use --force to overwrite)");
    if (o.o_tokens->count() && o.o_token_count->count())
        return usage("--tokens and --token-count: give the ids or their count, not both");
    if (!o.weights.empty()) {
        if (o.scale_down != 1) return usage("--scale-down: --weights fixes the sizes");
        run::RealOptions ro;
        ro.path = o.weights;
        ro.layers = "all";
        ro.model_inputs = true;
        ro.n_tokens = o.token_count;
        ro.start = o.start;
        ro.overrides = o.config;
        try {
            if (ids_given) ro.tokens = run::parse_token_ids(o.tokens_arg, "--tokens");
            real = run::RealModel::open(ro, nullptr);
        } catch (const InputError& e) {
            return usage(e.what());
        }
        resolved = real->model();
    } else {
        if (ids_given) return usage("--tokens: token ids only with --weights PATH (a random model draws its own)");
        try {
            size_t used = 0;
            n_tokens = std::stoll(o.tokens_arg, &used);
            if (used != o.tokens_arg.size()) throw std::invalid_argument("");
        } catch (const std::exception&) {
            return usage("--tokens: expected a count, found '" + o.tokens_arg + "'");
        }
        std::string problem;
        resolved = config::resolve_model(o.config, &problem);
        if (!resolved) return usage(problem);
    }
    const config::ModelConfig& m = *resolved;
    if (!real && n_tokens < 1) return usage("--tokens: expected a positive count, found " + std::to_string(n_tokens));
    if (real && o.token_count < 1)
        return usage("--token-count: expected a positive count, found " + std::to_string(o.token_count));
    if (o.vocab < 1) return usage("--vocab: expected a positive count, found " + std::to_string(o.vocab));
    if (o.start < 0) return usage("--positions: expected a position >= 0, found " + std::to_string(o.start));
    if (o.scale_down < 1) return usage("--scale-down: expected K >= 1, found " + std::to_string(o.scale_down));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) return usage("--dtype: expected f32, bf16 or f16, found '" + o.dtype + "'");

    model::Spec s;
    s.block = config::scale_down(m.block, o.scale_down);
    s.layers = m.layers;
    s.tokens = real ? static_cast<int64_t>(real->tokens().size()) : n_tokens;
    s.vocab = real ? m.vocab : o.vocab;
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
        std::unique_ptr<Implementation> made;
        try {
            made = e->create(io);
        } catch (const std::exception& ex) {  // e.g. a dtype it does not run
            if (!o.impls.empty()) {
                std::cerr << "conform forward: implementation '" << n << "' cannot run: " << ex.what() << "\n";
                return kUnavailable;
            }
            log << "skipping " << n << ": " << ex.what() << "\n";
            continue;
        }
        Runner r{n, std::move(made), {}, false, {}};
        const Support sup = r.impl->supports(Op::block, c);
        if (!sup.ok) {
            log << "skipping " << n << ": " << sup.reason << "\n";
            continue;
        }
        runners.push_back(std::move(r));
    }

    if (!o.json && real) {
        std::cout << "conform forward\n";
        for (const auto& l : real->checkpoint().detected()) std::cout << "  " << l << "\n";
        config::print_config(std::cout, m);
        std::cout << fmt::format("  model: {} layers, vocab {} ({}), T = {} tokens at positions {}..{}\n", s.layers,
                                 s.vocab, o.weights, s.tokens, s.start, s.start + s.tokens - 1);
    } else if (!o.json) {
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
    const std::vector<int64_t> ids = real ? real->tokens() : model::token_ids(s), pos = model::positions(s);
    Source src;
    if (real) {
        const weights::Checkpoint& ck = real->checkpoint();
        src = {[&ck](const std::vector<int64_t>& t) { return ck.embedding_rows(t); },
               [&ck](int64_t l) { return ck.layer(l); }, [&ck] { return ck.final_norm(); },
               [&ck](int64_t v0, int64_t v1) { return ck.lm_head_columns(v0, v1); }};
    } else {
        auto head = std::make_shared<Tensor>(model::lm_head(s));
        src = {[&s](const std::vector<int64_t>& t) { return model::embed(model::embedding(s), t); },
               [&s](int64_t l) { return model::layer_weights(s, l); }, [&s] { return model::final_norm(s); },
               [head, V = s.vocab](int64_t v0, int64_t v1) {
                   Tensor cols(head->rows(), v1 - v0);
                   for (int64_t d = 0; d < head->rows(); ++d)
                       for (int64_t v = v0; v < v1; ++v)
                           cols.data[static_cast<size_t>(d * (v1 - v0) + v - v0)] = head->data[static_cast<size_t>(d * V + v)];
                   return cols;
               }};
    }
    // The logits the model must give (an engine's, or an earlier run's):
    // read before any work, so a bad file costs nothing.
    std::optional<h5::LogitsFile> expected;
    if (!o.expect_logits.empty()) {
        try {
            expected = h5::read_logits(o.expect_logits);
        } catch (const InputError& e) {
            return usage(e.what());
        }
        if (expected->token_ids != ids)
            return usage(o.expect_logits + ": token_ids: expected the " + std::to_string(ids.size()) +
                         " tokens of this forward (--tokens), found " + std::to_string(expected->token_ids.size()) +
                         " others");
        if (!expected->positions.empty() && expected->positions != pos)
            return usage(o.expect_logits + ": positions: expected " + std::to_string(pos.front()) + ".." +
                         std::to_string(pos.back()) + " (--positions), found others");
        if (expected->reference.cols() != s.vocab)
            return usage(o.expect_logits + ": logits: expected " + std::to_string(s.vocab) + " columns (the vocabulary), found " +
                         std::to_string(expected->reference.cols()));
    }
    const Positions p{pos.data(), s.tokens};
    std::vector<Row> rows;
    auto row = [&](std::string stage, const DTensor& ref) {
        Row r{std::move(stage), ref.shape, model::moments(ref), {}};
        r.err.resize(runners.size());
        rows.push_back(std::move(r));
        return rows.size() - 1;
    };
    DTensor x;  // the reference's stream, float64
    DTensor logits;                  // the reference's, [T, vocab]
    std::vector<DTensor> impl_logits;  // each runner's
    try {
        {
            const Tensor e = src.embed(ids);
            x = model::to_double(e);
            const size_t i = row("embedding", x);
            for (size_t j = 0; j < runners.size(); ++j) {
                runners[j].x = e;
                rows[i].err[j] = model::Error{};
            }
        }
        for (int64_t l = 0; l < s.layers; ++l) {
            const Named w = src.layer(l);
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
        const Tensor norm_w = src.final_norm();
        const DTensor normed = ref::rmsnorm_f64(x, norm_w, c.norm_eps);
        std::vector<Tensor> ns(runners.size());  // each implementation's final norm, float32
        const size_t in = row("final norm", normed);
        for (size_t j = 0; j < runners.size(); ++j) {
            Runner& r = runners[j];
            if (r.failed) continue;
            ns[j] = Tensor(s.tokens, c.d_model);
            try {
                r.impl->rmsnorm(r.x.view(), norm_w.view(), rmsnorm_params(c), ns[j].mut());
            } catch (const std::exception& e) {
                r.failed = true;
                r.error = std::string("final norm: ") + e.what();
                continue;
            }
            rows[in].err[j] = model::error(model::to_double(ns[j]), normed);
        }
        const int64_t V = s.vocab;
        logits = DTensor{{s.tokens, V}, std::vector<double>(static_cast<size_t>(s.tokens * V))};
        impl_logits.assign(runners.size(), logits);
        head_slices(src, V, [&](const Tensor& head, int64_t v0) {
            place(logits, ref::matmul_f64(normed, head), v0);
            for (size_t j = 0; j < runners.size(); ++j)
                if (!runners[j].failed) place(impl_logits[j], model::matmul_acc64(ns[j], head), v0);
        });
        const size_t il = row("logits", logits);
        for (size_t j = 0; j < runners.size(); ++j)
            if (!runners[j].failed) rows[il].err[j] = model::error(impl_logits[j], logits);
        if (!o.save_logits.empty()) {
            h5::LogitsFile lf;
            lf.token_ids = ids;
            lf.positions = pos;
            lf.reference = logits;
            for (size_t j = 0; j < runners.size(); ++j)
                if (!runners[j].failed) lf.impls[runners[j].name] = impl_logits[j];
            lf.attrs["model"] = real ? o.weights : std::string("random (conform forward --seed ") + std::to_string(o.seed) + ")";
            lf.attrs["dtype"] = std::string(to_string(*dt));
            lf.attrs["layers"] = s.layers;
            h5::write_logits(o.save_logits, lf, o.force);
            log << "logits: " << o.save_logits << "\n";
        }
    } catch (const InputError& e) {
        std::cerr << "conform forward: " << e.what() << "\n";
        return kUsage;
    } catch (const weights::WeightsError& e) {  // a tensor the checkpoint cannot give (non-finite, unreadable)
        std::cerr << "conform forward: " << e.what() << "\n";
        return kUsage;
    }
    // Top-1: does each implementation pick the reference's next token?
    std::vector<double> top1(runners.size(), NAN);
    for (size_t j = 0; j < runners.size(); ++j)
        if (!runners[j].failed) top1[j] = top1_agreement(impl_logits[j], logits);
    // --expect-logits: the reference's logits against the file's; when they
    // differ, which single convention changed makes them agree.
    double expect_err = NAN, expect_top1 = NAN;
    std::vector<std::pair<std::string, double>> explained;  // hypothesis, its error against the file
    bool expect_ok = true;
    if (expected) {
        expect_err = rel_error(logits, expected->reference);
        expect_top1 = top1_agreement(logits, expected->reference);
        expect_ok = expect_err <= o.logits_tol;
        if (!expect_ok) {
            try {
                for (const auto& [id, hc] : config_hypotheses(c)) {
                    const double e = rel_error(reference_logits(src, hc, s.layers, s.vocab, ids, pos), expected->reference);
                    if (e <= o.logits_tol) explained.emplace_back(id, e);
                }
            } catch (const weights::WeightsError& e) {
                std::cerr << "conform forward: " << e.what() << "\n";
                return kUsage;
            }
        }
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
    // A random model's stream stays near std 1; a trained one's need not
    // (massive activations), so a checkpoint is not held to it.
    const bool stable = real || (min_std > 0.1 && max_std < 10);
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
        nlohmann::json t1 = nlohmann::json::object();
        for (size_t j = 0; j < runners.size(); ++j)
            if (!runners[j].failed) t1[runners[j].name] = top1[j];
        nlohmann::json ex = nullptr;
        if (expected) {
            nlohmann::json named = nlohmann::json::array();
            for (const auto& [id, e] : explained) named.push_back({{"id", id}, {"rel_error", e}});
            ex = {{"file", o.expect_logits}, {"rel_error", expect_err}, {"tolerance", o.logits_tol},
                  {"top1_agreement", expect_top1}, {"pass", expect_ok}, {"hypotheses", named}};
        }
        std::cout << nlohmann::json{{"schema", "conform-forward/1"},
                                    {"config", config::config_json(m)},
                                    {"layers", s.layers},
                                    {"tokens", s.tokens},
                                    {"vocab", s.vocab},
                                    {"seed", s.seed},
                                    {"weights", o.weights.empty() ? nlohmann::json() : nlohmann::json(o.weights)},
                                    {"scale_down", o.scale_down},
                                    {"dtype", to_string(*dt)},
                                    {"rows", jr},
                                    {"failures", failures},
                                    {"top1_agreement", t1},
                                    {"expect_logits", ex},
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
        std::cout << "\ntop-1 agreement with the reference (the same next token):";
        for (size_t j = 0; j < runners.size(); ++j)
            if (!runners[j].failed) std::cout << fmt::format("  {} {:.0f}%", runners[j].name, 100 * top1[j]);
        std::cout << "\n";
        if (expected) {
            std::cout << fmt::format("\n--expect-logits {}: the reference's logits {} it: rel error {:.2e} ({} {:.0e}), "
                                     "top-1 agreement {:.0f}%\n",
                                     o.expect_logits, expect_ok ? "match" : "DO NOT match", expect_err,
                                     expect_ok ? "<=" : ">", o.logits_tol, 100 * expect_top1);
            for (const auto& [id, e] : explained)
                std::cout << fmt::format("  diagnosis: {}: the file's logits are this model with that convention changed "
                                         "(rel error {:.2e})\n", id, e);
            if (!expect_ok && explained.empty())
                std::cout << "  diagnosis: no single-convention change of the config (layout, theta, scaling, partial "
                             "rotary, QK-norm) explains them\n";
        }
        std::cout << "\nchecks:\n";
        std::cout << fmt::format("  GQA (H={}, KV={}) equals multi-head attention on kv heads repeated h / {}: {}\n",
                                 c.n_heads, c.n_kv_heads, c.group(), gqa_ok ? "yes" : "NO");
        for (const auto& [name, d] : gqa) std::cout << fmt::format("    {:<12} max |GQA - MHA| = {:.1e}\n", name, d);
        std::cout << fmt::format(
            "  parameters per layer ({}): ffn {} ({:.0f}%), attention {} ({:.0f}%), norms {} ({:.2f}%){}\n", m.name,
            config::si(ffn), 100 * ffn / an.layer.params, config::si(attn), 100 * attn / an.layer.params,
            config::si(norms), 100 * norms / an.layer.params, ffn > attn ? ": the FFN dominates" : "");
        std::cout << fmt::format("  residual stream std over {} layers: {:.3f} .. {:.3f} ({})\n", s.layers, min_std,
                                 max_std, real ? "a checkpoint's: not checked" : stable ? "stable" : "NOT stable: outside [0.1, 10]");
        std::cout << fmt::format("\n({:.1f} s)\n", seconds);
    }
    return finite && gqa_ok && stable && expect_ok ? kConform : kNonconformance;
}

}  // namespace

Command add_forward(CLI::App& app) {
    auto o = std::make_shared<ForwardOptions>();
    CLI::App* sub = app.add_subcommand(
        "forward", "one forward of a model (embedding, L blocks, final norm, LM head), random or --weights: the "
                   "residual stream after every sub-layer and each implementation's error there");
    config::add_config_options(*sub, o->config);
    sub->add_option("--weights", o->weights,
                    "a checkpoint (HF safetensors directory or file, GGUF) instead of a random model: its layers, "
                    "embedding, final norm and LM head");
    o->o_token_count = sub->add_option("--token-count", o->token_count,
                                       "with --weights and no --tokens: that many ids drawn from the vocabulary with a "
                                       "fixed seed (default 8)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--expect-logits", o->expect_logits,
                    "FILE.h5: the logits the model must give (datasets token_ids, positions, logits or reference; "
                    "fixtures/SCHEMA.md): exit 1 when the reference's differ by more than --logits-tol, with the "
                    "convention change that explains them");
    sub->add_option("--logits-tol", o->logits_tol,
                    "relative error (max |diff| / max |expected|) --expect-logits allows (default 1e-3)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--save-logits", o->save_logits,
                    "write FILE.h5: token ids, positions, the reference's logits and each implementation's "
                    "(fixtures/SCHEMA.md, \"Logits files\")");
    sub->add_flag("--force", o->force, "let --save-logits overwrite an existing file");
    o->o_tokens = sub->add_option("--tokens", o->tokens_arg,
                                  "T: tokens in the forward (default 8); with --weights: the token ids, comma-separated");
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

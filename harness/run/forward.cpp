#include "run/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "core/limits.h"
#include "config/anatomy.h"
#include "config/options.h"
#include "diagnose/diagnose.h"
#include "reference/model.h"
#include "reference/reference.h"
#include "registry.h"
#include "run/resolve.h"
#include "weights/checkpoint.h"

namespace conform::run {

namespace {

// Where a forward's weights come from: a checkpoint (a layer read at a time)
// or the seeded random model.
struct Source {
    std::function<Tensor(const std::vector<int64_t>&)> embed;  // [T, D] rows of those ids
    std::function<Named(int64_t)> layer;
    std::function<Tensor()> final_norm;                    // [1, D]
    std::function<Tensor(int64_t, int64_t)> head_columns;  // [D, v1 - v0]
    // The weights an engine like llama.cpp's CPU backend multiplies against
    // Q8_K-quantised inputs (K-quant weights): per layer (empty: none), and the head.
    std::vector<std::set<std::string>> q8_k_inputs;
    bool head_q8_k = false;
    bool any_q8_k() const {
        return head_q8_k || std::any_of(q8_k_inputs.begin(), q8_k_inputs.end(), [](const auto& w) { return !w.empty(); });
    }
};

// What the --expect-logits hypotheses of an engine's own precision are
// called: K-quant matmuls' inputs through Q8_K, GeGLU's gate through ggml's
// float16 GELU table (llama.cpp's CPU backend does both).
constexpr const char* kQ8kActivations = "q8_k_activations";
constexpr const char* kGeluF16Table = "gelu_f16_table";

// How an engine computes the model, where it is not the model itself.
struct Engine {
    bool q8_k = false;      // K-quant matmuls' inputs through Q8_K (Source::q8_k_inputs, head_q8_k)
    bool gelu_f16 = false;  // GeGLU's gate through ggml's float16 GELU table
};

// ggml's vec_dot_type of the K-quant weights this reader decodes: their matmul input is Q8_K.
bool q8_k_input(weights::Encoding e) {
    using weights::Encoding;
    return e == Encoding::q4_k || e == Encoding::q5_k || e == Encoding::q6_k || e == Encoding::q8_k;
}

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

// The embedding rows times the model's multiplier (Gemma's sqrt(D)), in float64.
DTensor embedded(const Tensor& rows, double multiplier) {
    DTensor x = model::to_double(rows);
    if (multiplier != 1.0)
        for (double& v : x.data) v *= multiplier;
    return x;
}

// Gemma 2's final_logit_softcapping: logits = cap * tanh(logits / cap); 0: none.
void soft_cap(DTensor& logits, double cap) {
    if (cap > 0)
        for (double& v : logits.data) v = cap * std::tanh(v / cap);
}

// What surrounds the blocks: the embedding's multiplier, the logits' soft-cap.
struct Outer {
    double multiplier = 1.0;
    double final_softcap = 0.0;
};

// The reference's float64 logits of the whole model under config c (each
// layer's as `pattern` makes it from c) and the model's outer twists, as the
// model is or as `engine` computes it.
DTensor reference_logits(const Source& src, const BlockConfig& c, const config::LayerPattern& pattern, Outer outer,
                         int64_t layers, int64_t vocab, const std::vector<int64_t>& ids, const std::vector<int64_t>& pos,
                         Engine engine = {}) {
    DTensor x = embedded(src.embed(ids), outer.multiplier);
    for (int64_t l = 0; l < layers; ++l) {
        const bool q8 = engine.q8_k && l < static_cast<int64_t>(src.q8_k_inputs.size());
        x = ref::block_f64(x, src.layer(l), pos, pattern.layer(c, l), false,
                           q8 ? src.q8_k_inputs[static_cast<size_t>(l)] : std::set<std::string>{}, engine.gelu_f16)
                .out;
    }
    const DTensor normed = ref::rmsnorm_f64(x, src.final_norm(), c.norm_eps, c.norm_plus_one);
    DTensor logits{{x.rows(), vocab}, std::vector<double>(static_cast<size_t>(x.rows() * vocab))};
    head_slices(src, vocab, [&](const Tensor& head, int64_t v0) {
        place(logits, ref::matmul_f64(normed, head, engine.q8_k && src.head_q8_k), v0);
    });
    soft_cap(logits, outer.final_softcap);
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
                k_rep.data[static_cast<size_t>(t * H * hd + h * hd + d)] =
                    k.data[static_cast<size_t>(t * KV * hd + (h / g) * hd + d)];
                v_rep.data[static_cast<size_t>(t * H * hd + h * hd + d)] =
                    v.data[static_cast<size_t>(t * KV * hd + (h / g) * hd + d)];
            }
    if (impl) {
        Tensor a(T, H * hd), b(T, H * hd);
        const Positions p{pos.data(), T};
        BlockConfig gqa_c, mha_c;  // plain causal attention: the heads alone
        gqa_c.n_heads = mha_c.n_heads = mha_c.n_kv_heads = H;
        gqa_c.n_kv_heads = KV;
        gqa_c.head_dim = mha_c.head_dim = hd;
        impl->attention(q.view(), k.view(), v.view(), p, p, attention_params(gqa_c), a.mut());
        impl->attention(q.view(), k_rep.view(), v_rep.view(), p, p, attention_params(mha_c), b.mut());
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

// An implementation as the forward carries it: its own residual stream.
struct Runner {
    std::string name;
    Implementation* impl;
    Tensor x;  // its residual stream, float32 as the interface carries it
    bool failed = false;
    std::string error;
};

// An implementation as the table and JSON name it: stopped (and where) or not.
struct Stopped {
    std::string name;
    bool failed;
    std::string error;
};
std::vector<Stopped> stopped(const ForwardResult& f) {
    std::vector<Stopped> out;
    for (size_t j = 0; j < f.names.size(); ++j) out.push_back({f.names[j], !f.stopped[j].empty(), f.stopped[j]});
    return out;
}

std::string shape_of(const std::vector<int64_t>& s) { return fmt::format("[{}, {}]", s[0], s[1]); }

}  // namespace

ForwardResult run_forward(const ForwardRequest& o, std::ostream& log) {
    ForwardResult f;
    const model::Spec& s = o.spec;
    const BlockConfig& c = s.block;
    std::vector<Runner> runners;
    for (const auto& [name, impl] : o.impls) runners.push_back({name, impl.get(), {}, false, {}});
    const auto t0 = std::chrono::steady_clock::now();

    // ---- the forward, layer by layer --------------------------------------------------
    const std::vector<int64_t> ids = o.real ? o.real->tokens() : model::token_ids(s), pos = model::positions(s);
    Source src;
    if (o.real) {
        const weights::Checkpoint& ck = o.real->checkpoint();
        src = {[&ck](const std::vector<int64_t>& t) { return ck.embedding_rows(t); },
               [&ck](int64_t l) { return ck.layer(l); }, [&ck] { return ck.final_norm(); },
               [&ck](int64_t v0, int64_t v1) { return ck.lm_head_columns(v0, v1); },
               {},
               false};
        for (int64_t l = 0; l < ck.model().layers; ++l) {
            std::set<std::string>& w = src.q8_k_inputs.emplace_back();
            for (const char* name : {"wq", "wk", "wv", "wo", "w1", "w3", "w2"})
                if (q8_k_input(ck.encoding(l, name))) w.insert(name);
        }
        src.head_q8_k = q8_k_input(ck.lm_head_encoding());
    } else {
        auto head = std::make_shared<Tensor>(model::lm_head(s));
        src = {[&s](const std::vector<int64_t>& t) { return model::embed(model::embedding(s), t); },
               [&s](int64_t l) { return model::layer_weights(s, l); }, [&s] { return model::final_norm(s); },
               [head, V = s.vocab](int64_t v0, int64_t v1) {
                   Tensor cols(head->rows(), v1 - v0);
                   for (int64_t d = 0; d < head->rows(); ++d)
                       for (int64_t v = v0; v < v1; ++v)
                           cols.data[static_cast<size_t>(d * (v1 - v0) + v - v0)] =
                               head->data[static_cast<size_t>(d * V + v)];
                   return cols;
               },
               {},  // the seeded model's weights are float32: no engine quantises their inputs
               false};
    }
    // The logits the model must give (an engine's, or an earlier run's):
    // read before any work, so a bad file costs nothing.
    std::optional<h5::LogitsFile> expected;
    if (!o.expect_logits.empty()) {
        expected = h5::read_logits(o.expect_logits);
        if (expected->token_ids != ids)
            throw InputError(o.expect_logits + ": token_ids: expected the " + std::to_string(ids.size()) +
                             " tokens of this forward (--tokens), found " + std::to_string(expected->token_ids.size()) +
                             " others");
        if (!expected->positions.empty() && expected->positions != pos)
            throw InputError(o.expect_logits + ": positions: expected " + std::to_string(pos.front()) + ".." +
                             std::to_string(pos.back()) + " (--positions), found others");
        if (expected->reference.cols() != s.vocab)
            throw InputError(o.expect_logits + ": logits: expected " + std::to_string(s.vocab) +
                             " columns (the vocabulary), found " + std::to_string(expected->reference.cols()));
    }
    const Positions p{pos.data(), s.tokens};
    std::vector<ForwardRow>& rows = f.rows;
    auto row = [&](std::string stage, const DTensor& ref) {
        ForwardRow r{std::move(stage), ref.shape, model::moments(ref), {}};
        r.err.resize(runners.size());
        rows.push_back(std::move(r));
        return rows.size() - 1;
    };
    DTensor x;                         // the reference's stream, float64
    DTensor logits;                    // the reference's, [T, vocab]
    std::vector<DTensor> impl_logits;  // each runner's
    {
        {
            // x = embed_tokens(ids) * multiplier   (Gemma: sqrt(D); the implementations' stream in float32,
            // as a float32 engine multiplies)
            Tensor e = src.embed(ids);
            x = embedded(e, s.embedding_multiplier);
            if (s.embedding_multiplier != 1.0)
                for (float& v : e.data) v *= static_cast<float>(s.embedding_multiplier);
            const size_t i =
                row(s.embedding_multiplier != 1.0 ? fmt::format("embedding x{:.3g}", s.embedding_multiplier) : "embedding", x);
            for (size_t j = 0; j < runners.size(); ++j) {
                runners[j].x = e;
                rows[i].err[j] = model::error(model::to_double(e), x);
            }
        }
        for (int64_t l = 0; l < s.layers; ++l) {
            const Named w = src.layer(l);
            const BlockConfig lc = s.layer_block(l);  // the layer's own (a sliding or a full layer)
            const ref::BlockStep step = ref::block_f64(x, w, pos, lc);
            const std::string k = s.pattern.kind(l), kind = k.empty() ? "" : " (" + k + ")";
            const size_t ih = row(fmt::format("layer {:>2} + attn{}", l, kind), step.h);
            const size_t io = row(fmt::format("layer {:>2} + ffn", l), step.out);
            const BlockWeights bw = model::views(w, lc);
            for (size_t j = 0; j < runners.size(); ++j) {
                Runner& r = runners[j];
                if (r.failed) continue;
                Tensor h(s.tokens, c.d_model), out(s.tokens, c.d_model);
                BlockOutputs outs;
                outs[Tap::h] = h.mut();
                outs[Tap::out] = out.mut();
                try {
                    const TapSet wrote = r.impl->block(r.x.view(), bw, p, lc, outs);
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
        const DTensor normed = ref::rmsnorm_f64(x, norm_w, c.norm_eps, c.norm_plus_one);
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
        // logits = torch.tanh(logits / cap) * cap   (Gemma 2's final_logit_softcapping; in float64 for all)
        soft_cap(logits, s.final_logit_softcapping);
        for (size_t j = 0; j < runners.size(); ++j)
            if (!runners[j].failed) soft_cap(impl_logits[j], s.final_logit_softcapping);
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
            lf.attrs["model"] =
                o.real ? o.weights : std::string("random (conform forward --seed ") + std::to_string(s.seed) + ")";
            lf.attrs["dtype"] = std::string(to_string(o.dtype));
            lf.attrs["layers"] = s.layers;
            h5::write_logits(o.save_logits, lf, o.force);
            log << "logits: " << o.save_logits << "\n";
        }
    }
    // Top-1: does each implementation pick the reference's next token?
    std::vector<double>& top1 = f.top1;
    top1.assign(runners.size(), NAN);
    for (size_t j = 0; j < runners.size(); ++j)
        if (!runners[j].failed) top1[j] = top1_agreement(impl_logits[j], logits);
    // --expect-logits: the reference's logits against the file's; when they
    // differ, which single convention changed makes them agree.
    double& expect_err = f.expect_err;
    double& expect_top1 = f.expect_top1;
    std::vector<std::pair<std::string, double>>& explained = f.explained;  // hypothesis, its error against the file
    bool& expect_ok = f.expect_ok;
    f.expected = expected.has_value();
    if (expected) {
        expect_err = rel_error(logits, expected->reference);
        expect_top1 = top1_agreement(logits, expected->reference);
        expect_ok = expect_err <= o.logits_tol;
        if (!expect_ok) {
            const Outer m{s.embedding_multiplier, s.final_logit_softcapping};
            auto logits_in = [&](const BlockConfig& hc, const config::LayerPattern& hp, Outer hm, Engine en) {
                return rel_error(reference_logits(src, hc, hp, hm, s.layers, s.vocab, ids, pos, en), expected->reference);
            };
            auto logits_of = [&](const BlockConfig& hc, Outer hm, Engine en) { return logits_in(hc, s.pattern, hm, en); };
            for (const auto& [id, hc] : diagnose::config_hypotheses(c))
                if (const double e = logits_of(hc, m, {}); e <= o.logits_tol) explained.emplace_back(id, e);
            // The model's own twists outside the block: Gemma's embedding scale, Gemma 2's logit cap dropped.
            if (m.multiplier != 1.0)
                if (const double e = logits_of(c, {1.0, m.final_softcap}, {}); e <= o.logits_tol)
                    explained.emplace_back("embedding_scale_missing", e);
            if (m.final_softcap > 0)
                if (const double e = logits_of(c, {m.multiplier, 0.0}, {}); e <= o.logits_tol)
                    explained.emplace_back("final_softcap_missing", e);
            // The layers' pattern (Gemma 2/3, gpt-oss): every layer run as a
            // sliding one, or Gemma 3's local RoPE base not taken.
            if (std::count(s.pattern.nope.begin(), s.pattern.nope.end(), true) > 0) {
                config::LayerPattern rotated = s.pattern;
                rotated.nope.clear();
                if (const double e = logits_in(c, rotated, m, {}); e <= o.logits_tol)
                    explained.emplace_back("no_rope_layers_ignored (every layer rotated)", e);
            }
            if (!s.pattern.sliding.empty()) {
                config::LayerPattern every = s.pattern;
                every.sliding.assign(every.sliding.size(), true);
                if (const double e = logits_in(c, every, m, {}); e <= o.logits_tol)
                    explained.emplace_back("layer_types_ignored (every layer sliding)", e);
                if (s.pattern.local_rope_theta > 0) {
                    config::LayerPattern global = s.pattern;
                    global.local_rope_theta = 0;
                    if (const double e = logits_in(c, global, m, {}); e <= o.logits_tol)
                        explained.emplace_back("local_rope_base_ignored", e);
                }
            }
            // Not a convention but an engine's precision, as llama.cpp's CPU
            // backend computes: K-quant weights multiplied against Q8_K
            // inputs, GeGLU's gate through a float16 table; each, and both.
            const bool q8 = src.any_q8_k(), gelu = c.hidden_act == HiddenAct::gelu_tanh;
            if (q8)
                if (const double e = logits_of(c, m, {true, false}); e <= o.logits_tol)
                    explained.emplace_back(kQ8kActivations, e);
            if (gelu)
                if (const double e = logits_of(c, m, {false, true}); e <= o.logits_tol)
                    explained.emplace_back(kGeluF16Table, e);
            if (q8 && gelu)
                if (const double e = logits_of(c, m, {true, true}); e <= o.logits_tol)
                    explained.emplace_back(std::string(kQ8kActivations) + " + " + kGeluF16Table, e);
        }
    }
    f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // ---- checks -------------------------------------------------------------------------
    std::vector<std::pair<std::string, double>>& gqa = f.gqa;
    gqa.emplace_back("reference", gqa_vs_mha(nullptr, c, pos));
    for (auto& r : runners)
        if (!r.failed && r.impl->supports(Op::attention, c).ok) gqa.emplace_back(r.name, gqa_vs_mha(r.impl, c, pos));
    const config::Anatomy an = config::anatomy(o.model, 1, 0, 2);
    double &ffn = f.params_ffn, &attn = f.params_attn, &norms = f.params_norms;
    f.params_layer = an.layer.params;
    for (const auto& op : an.ops) (op.group == "ffn" ? ffn : op.group == "attention" ? attn : norms) += op.params;
    double &min_std = f.min_std, &max_std = f.max_std;
    min_std = INFINITY;
    for (const auto& r : rows)
        if (r.stage != "logits") min_std = std::min(min_std, r.ref.std), max_std = std::max(max_std, r.ref.std);
    // A random model's stream stays near std 1; a trained one's need not
    // (massive activations), so a checkpoint is not held to it.
    f.stable = o.real || (min_std > 0.1 && max_std < 10);
    bool& finite = f.finite;
    for (const auto& r : rows)
        for (const auto& e : r.err)
            if (e && !std::isfinite(e->max_abs)) finite = false;
    bool& gqa_ok = f.gqa_ok;
    for (const auto& [name, d] : gqa)
        if (!(d <= 1e-5)) gqa_ok = false;
    for (const Runner& r : runners) {
        f.names.push_back(r.name);
        f.stopped.push_back(r.failed ? r.error : std::string());
    }
    return f;
}

nlohmann::json forward_json(const ForwardRequest& o, const ForwardResult& f) {
    const std::vector<Stopped> runners = stopped(f);
    nlohmann::json jr = nlohmann::json::array();
    for (const auto& r : f.rows) {
        nlohmann::json errs = nlohmann::json::object();
        for (size_t j = 0; j < runners.size(); ++j)
            if (r.err[j]) errs[runners[j].name] = {{"max_abs", r.err[j]->max_abs}, {"rel", r.err[j]->rel}};
        jr.push_back({{"stage", r.stage},
                      {"shape", r.shape},
                      {"mean", r.ref.mean},
                      {"std", r.ref.std},
                      {"max_abs", r.ref.max_abs},
                      {"errors", errs}});
    }
    nlohmann::json failures = nlohmann::json::object();
    for (const auto& r : runners)
        if (r.failed) failures[r.name] = r.error;
    nlohmann::json g = nlohmann::json::object();
    for (const auto& [name, d] : f.gqa) g[name] = d;
    nlohmann::json t1 = nlohmann::json::object();
    for (size_t j = 0; j < runners.size(); ++j)
        if (!runners[j].failed) t1[runners[j].name] = f.top1[j];
    nlohmann::json ex = nullptr;
    if (f.expected) {
        nlohmann::json named = nlohmann::json::array();
        for (const auto& [id, e] : f.explained) named.push_back({{"id", id}, {"rel_error", e}});
        ex = {{"file", o.expect_logits},         {"rel_error", f.expect_err}, {"tolerance", o.logits_tol},
              {"top1_agreement", f.expect_top1}, {"pass", f.expect_ok},       {"hypotheses", named}};
    }
    return nlohmann::json{
        {"schema", "conform-forward/1"},
        {"config", config::config_json(o.model)},
        {"layers", o.spec.layers},
        {"tokens", o.spec.tokens},
        {"vocab", o.spec.vocab},
        {"seed", o.spec.seed},
        {"weights", o.weights.empty() ? nlohmann::json() : nlohmann::json(o.weights)},
        {"scale_down", o.scale_down},
        {"dtype", to_string(o.dtype)},
        {"rows", jr},
        {"failures", failures},
        {"top1_agreement", t1},
        {"expect_logits", ex},
        {"checks",
         {{"gqa_equals_mha_on_repeated_kv", g},
          {"params_per_layer", {{"ffn", f.params_ffn}, {"attention", f.params_attn}, {"norms", f.params_norms}}},
          {"residual_std_range", {f.min_std, f.max_std}}}},
        {"seconds", f.seconds}};
}

std::string forward_table(const ForwardRequest& o, const ForwardResult& f) {
    const std::vector<Stopped> runners = stopped(f);
    std::string out;
    size_t width = 18;  // the stage column: "layer 12 + attn (sliding)" where layers differ
    for (const auto& r : f.rows) width = std::max(width, r.stage.size() + 2);
    out += fmt::format("\n{:<{}}{:<13}{:>10}{:>9}", "stage", width, "shape", "mean", "std");
    for (const auto& r : runners) out += fmt::format("  {:>20}", r.name + " err (rel)");
    out += "\n";
    for (const auto& r : f.rows) {
        out += fmt::format("{:<{}}{:<13}{:>+10.4f}{:>9.4f}", r.stage, width, shape_of(r.shape), r.ref.mean, r.ref.std);
        for (const auto& e : r.err)
            out += (e ? fmt::format("  {:>10.2e} ({:>7.1e})", e->max_abs, e->rel) : fmt::format("  {:>20}", "-"));
        out += "\n";
    }
    out +=
        "\nthe reference in float64; err: max |impl - reference| over the tensor (rel: / max |reference|);\n"
        "each implementation carries its own stream from layer to layer, so the error accumulates.\n";
    for (const auto& r : runners)
        if (r.failed) out += fmt::format("{}: stopped at {}\n", r.name, r.error);
    out += "\ntop-1 agreement with the reference (the same next token):";
    for (size_t j = 0; j < runners.size(); ++j)
        if (!runners[j].failed) out += fmt::format("  {} {:.0f}%", runners[j].name, 100 * f.top1[j]);
    out += "\n";
    if (f.expected) {
        out += fmt::format(
            "\n--expect-logits {}: the reference's logits {} it: rel error {:.2e} ({} {:.0e}), "
            "top-1 agreement {:.0f}%\n",
            o.expect_logits, f.expect_ok ? "match" : "DO NOT match", f.expect_err, f.expect_ok ? "<=" : ">",
            o.logits_tol, 100 * f.expect_top1);
        for (const auto& [id, e] : f.explained) {
            const bool q8 = id.find(kQ8kActivations) != std::string::npos, gelu = id.find(kGeluF16Table) != std::string::npos;
            if (q8 || gelu)
                out += fmt::format(
                    "  diagnosis: {}: the file's logits are this model computed as llama.cpp's CPU backend computes "
                    "it{}{}{} (rel error {:.2e}): the engine's precision, not a misread model\n",
                    id, q8 ? ", every K-quant matmul's input quantised to Q8_K" : "", q8 && gelu ? " and" : "",
                    gelu ? ", GeGLU's gate rounded to float16 and looked up in ggml's float16 GELU table" : "", e);
            else if (id == "final_softcap_missing")
                out += fmt::format(
                    "  diagnosis: {}: the file's logits are this model without its final soft-cap (cap {}: "
                    "cap * tanh(logits / cap), Gemma 2's final_logit_softcapping) (rel error {:.2e})\n",
                    id, o.spec.final_logit_softcapping, e);
            else if (id == "embedding_scale_missing")
                out += fmt::format(
                    "  diagnosis: {}: the file's logits are this model without its embedding multiplier ({}: "
                    "Gemma's sqrt(d_model)) (rel error {:.2e})\n",
                    id, o.spec.embedding_multiplier, e);
            else
                out += fmt::format(
                    "  diagnosis: {}: the file's logits are this model with that convention changed "
                    "(rel error {:.2e})\n",
                    id, e);
        }
        if (!f.expect_ok && f.explained.empty())
            out +=
                "  diagnosis: no single-convention change of the config (layout, theta, scaling, partial "
                "rotary, QK-norm) explains them\n";
    }
    out += "\nchecks:\n";
    out += fmt::format("  GQA (H={}, KV={}) equals multi-head attention on kv heads repeated h / {}: {}\n",
                       o.spec.block.n_heads, o.spec.block.n_kv_heads, o.spec.block.group(), f.gqa_ok ? "yes" : "NO");
    for (const auto& [name, d] : f.gqa) out += fmt::format("    {:<12} max |GQA - MHA| = {:.1e}\n", name, d);
    out +=
        fmt::format("  parameters per layer ({}): ffn {} ({:.0f}%), attention {} ({:.0f}%), norms {} ({:.2f}%){}\n",
                    o.model.name, config::si(f.params_ffn), 100 * f.params_ffn / f.params_layer,
                    config::si(f.params_attn), 100 * f.params_attn / f.params_layer, config::si(f.params_norms),
                    100 * f.params_norms / f.params_layer, f.params_ffn > f.params_attn ? ": the FFN dominates" : "");
    out += fmt::format("  residual stream std over {} layers: {:.3f} .. {:.3f} ({})\n", o.spec.layers, f.min_std,
                       f.max_std,
                       o.real     ? "a checkpoint's: not checked"
                       : f.stable ? "stable"
                                  : "NOT stable: outside [0.1, 10]");
    out += fmt::format("\n({:.1f} s)\n", f.seconds);
    return out;
}

ForwardRequest resolve_forward(const ForwardFlags& o, std::ostream& log) {
    // A real checkpoint: its configuration, layers, embedding, final norm and
    // LM head; the token ids given or a fixed random sequence of --tokens.
    std::shared_ptr<RealModel> real;
    std::optional<config::ModelConfig> resolved;
    int64_t n_tokens = 0;
    const bool ids_given = o.tokens_arg.find(',') != std::string::npos ||
                           (!o.weights.empty() && o.tokens_given && !o.token_count_given);
    // Before any work: an output that exists is refused now, not after the forward.
    std::error_code ec;
    if (!o.save_logits.empty() && !o.force && std::filesystem::exists(o.save_logits, ec))
        throw InputError(o.save_logits + ": exists (use --force to overwrite)");
    if (o.tokens_given && o.token_count_given)
        throw InputError("--tokens and --token-count: give the ids or their count, not both");
    // Bounded before anything is allocated or looped over (core/limits.h); the
    // last position start + T - 1 must not pass the case ids' bound.
    if (!o.weights.empty() && (o.token_count < 1 || o.token_count > limits::kTokens))
        throw InputError("--token-count: expected a count in [1, " + std::to_string(limits::kTokens) + "], found " +
                         std::to_string(o.token_count));
    if (o.start < 0 || o.start > limits::kPosition - limits::kTokens)
        throw InputError("--positions: expected a first position in [0, " +
                         std::to_string(limits::kPosition - limits::kTokens) + "], found " + std::to_string(o.start));
    if (!o.weights.empty()) {
        if (o.scale_down != 1) throw InputError("--scale-down: --weights fixes the sizes");
        RealOptions ro;
        ro.path = o.weights;
        ro.layers = "all";
        ro.model_inputs = true;
        ro.n_tokens = o.token_count;
        ro.start = o.start;
        ro.overrides = o.config;
        if (ids_given) ro.tokens = parse_token_ids(o.tokens_arg, "--tokens");
        real = RealModel::open(ro, nullptr);
        resolved = real->model();
    } else {
        if (ids_given) throw InputError("--tokens: token ids only with --weights PATH (a random model draws its own)");
        try {
            size_t used = 0;
            n_tokens = std::stoll(o.tokens_arg, &used);
            if (used != o.tokens_arg.size()) throw std::invalid_argument("");
        } catch (const std::exception&) {
            throw InputError("--tokens: expected a count, found '" + o.tokens_arg + "'");
        }
        std::string problem;
        resolved = config::resolve_model(o.config, &problem);
        if (!resolved) throw InputError(problem);
    }
    const config::ModelConfig& m = *resolved;
    if (!real && (n_tokens < 1 || n_tokens > limits::kTokens))
        throw InputError("--tokens: expected a count in [1, " + std::to_string(limits::kTokens) + "], found " +
                         std::to_string(n_tokens));
    if (o.vocab < 1 || o.vocab > limits::kVocab)
        throw InputError("--vocab: expected a count in [1, " + std::to_string(limits::kVocab) + "], found " +
                         std::to_string(o.vocab));
    if (o.scale_down < 1) throw InputError("--scale-down: expected K >= 1, found " + std::to_string(o.scale_down));
    const auto dt = parse_dtype(o.dtype);
    if (!dt) throw InputError("--dtype: expected f32, bf16 or f16, found '" + o.dtype + "'");

    ForwardRequest q;
    model::Spec& s = q.spec;
    s.block = config::scale_down(m.block, o.scale_down);
    s.layers = m.layers;
    s.tokens = real ? static_cast<int64_t>(real->tokens().size()) : n_tokens;
    s.vocab = real ? m.vocab : o.vocab;
    s.start = o.start;
    s.seed = o.seed;
    s.embedding_multiplier = m.embedding_multiplier;
    s.final_logit_softcapping = m.final_logit_softcapping;
    s.pattern = m.pattern;
    const BlockConfig& c = s.block;

    // ---- implementations ---------------------------------------------------------
    std::vector<std::string> names = split_list(o.impls);
    if (names.empty())
        for (const auto& e : implementations())
            if (!e.by_name) names.push_back(e.name);
    for (const auto& n : names) {
        const ImplEntry* e = find_implementation(n);
        if (!e) throw InputError("--impl: unknown implementation '" + n + "' (see `conform list`)");
        const Availability a = e->available();
        if (!a.available) {
            if (!o.impls.empty())
                throw UnavailableError("implementation '" + n + "' is unavailable on this machine: " + a.reason);
            log << "skipping " << n << ": " << a.reason << "\n";
            continue;
        }
        ImplOptions io;
        io.dtype = *dt;
        std::unique_ptr<Implementation> made;
        try {
            made = e->create(io);
        } catch (const std::exception& ex) {  // e.g. a dtype it does not run
            if (!o.impls.empty())
                throw UnavailableError("implementation '" + n + "' cannot run: " + std::string(ex.what()));
            log << "skipping " << n << ": " << ex.what() << "\n";
            continue;
        }
        const Support sup = made->supports(Op::block, c);
        if (!sup.ok) {
            log << "skipping " << n << ": " << sup.reason << "\n";
            continue;
        }
        q.impls.emplace_back(n, std::move(made));
    }

    q.model = m;
    q.real = real;
    q.weights = o.weights;
    q.scale_down = o.scale_down;
    q.dtype = *dt;
    q.expect_logits = o.expect_logits;
    q.logits_tol = o.logits_tol;
    q.save_logits = o.save_logits;
    q.force = o.force;
    return q;
}

std::string forward_header(const ForwardRequest& q) {
    const config::ModelConfig& m = q.model;
    const model::Spec& s = q.spec;
    const BlockConfig& c = s.block;
    std::ostringstream out;
    out << "conform forward\n";
    if (q.real) {
        for (const auto& l : q.real->checkpoint().detected()) out << "  " << l << "\n";
        config::print_config(out, m);
        out << fmt::format("  model: {} layers, vocab {} ({}), T = {} tokens at positions {}..{}\n", s.layers, s.vocab,
                           q.weights, s.tokens, s.start, s.start + s.tokens - 1);
    } else {
        config::print_config(out, m);
        out << fmt::format(
            "  model: {} layers, vocab {} (random, seed {}), T = {} tokens at positions {}..{}{}\n", s.layers, s.vocab,
            s.seed, s.tokens, s.start, s.start + s.tokens - 1,
            q.scale_down > 1 ? fmt::format(", d_model and ffn / {} = {}, {}", q.scale_down, c.d_model, c.ffn_dim) : "");
        out << "  weights: std 1/sqrt(fan_in); wo and w2 also / sqrt(2L); norm weights 1 + N(0, 0.01)\n";
    }
    return out.str();
}

}  // namespace conform::run

#include "run/hidden.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "core/case.h"
#include "h5/fixture.h"
#include "reference/model.h"
#include "weights/checkpoint.h"

namespace conform::run {

namespace {

DTensor to_double(const Tensor& t) {
    DTensor d;
    d.shape = t.shape;
    d.data.assign(t.data.begin(), t.data.end());
    return d;
}

// How far `got` is from the file's `want`: max |diff| / max |want|, and where.
struct Distance {
    double rel = 0, max_abs = 0;
    int64_t token = 0, channel = 0;
};
Distance distance(const DTensor& got, const DTensor& want) {
    Distance d;
    double scale = 0;
    for (size_t i = 0; i < want.data.size(); ++i) {
        scale = std::max(scale, std::fabs(want.data[i]));
        const double e = std::fabs(got.data[i] - want.data[i]);
        if (e > d.max_abs) d.max_abs = e, d.token = static_cast<int64_t>(i) / want.cols(), d.channel = static_cast<int64_t>(i) % want.cols();
    }
    d.rel = d.max_abs / std::max(scale, 1e-300);
    return d;
}

// One layer's attention sub-layer in float64, as the block defines it up to
// its tap h (conform/ops.h), plus the output bias the block lacks:
// h = x + attn @ wo + bo. The FFN is replaced by one of width 1 with zero
// weights, whose output is exactly 0: block_f64's h does not depend on it.
struct Layer {
    BlockConfig c;
    Named w;                 // the block's weights, FFN stubbed
    std::vector<double> bo;  // [D], empty: none
};
DTensor attention_residual(const Layer& L, const DTensor& x, const std::vector<int64_t>& positions) {
    const ref::BlockStep step = ref::block_f64(x, L.w, positions, L.c);
    DTensor h = step.h;
    if (!L.bo.empty())
        for (int64_t t = 0; t < h.rows(); ++t)
            for (int64_t j = 0; j < h.cols(); ++j) h.data[static_cast<size_t>(t * h.cols() + j)] += L.bo[static_cast<size_t>(j)];
    return h;
}

Layer layer_of(const weights::Checkpoint& ck, const config::ModelConfig& m, int64_t l) {
    Layer L;
    L.c = m.layer_block(l);
    L.c.ffn_dim = 1;
    L.c.hidden_act = HiddenAct::silu;
    L.w = ck.layer(l);
    if (auto it = L.w.find("bo"); it != L.w.end()) {
        L.bo.assign(it->second.data.begin(), it->second.data.end());
        L.w.erase(it);
    }
    const int64_t D = L.c.d_model;
    Tensor ones(1, D);
    std::fill(ones.data.begin(), ones.data.end(), 1.0f);
    L.w["ffn_norm"] = ones;
    L.w["w1"] = Tensor(D, 1);
    L.w["w3"] = Tensor(D, 1);
    L.w["w2"] = Tensor(1, D);
    if (L.c.sandwich_norm && !L.w.count("ffn_post_norm")) L.w["ffn_post_norm"] = ones;
    return L;
}

// The convention changes tried on a layer that does not match: what an
// engine that got one of them wrong computes.
struct Change {
    std::string name;
    std::function<bool(Layer&)> apply;  // false: not applicable to this layer
};
std::vector<Change> changes(const config::ModelConfig& m, int64_t l) {
    const int64_t W = m.block.sliding_window;
    const bool sliding = m.layer_block(l).sliding_window > 0;
    std::vector<Change> v;
    v.push_back({"sink_missing (the sinks dropped from the softmax's denominator)", [](Layer& L) {
                     if (!L.c.attn_sinks) return false;
                     L.c.attn_sinks = false;
                     L.w.erase("sinks");
                     return true;
                 }});
    v.push_back({"sink_wrong_head (sinks read per kv head, sinks[h / group])", [](Layer& L) {
                     if (!L.c.attn_sinks || L.c.n_kv_heads == L.c.n_heads) return false;
                     Tensor& s = L.w.at("sinks");
                     const Tensor orig = s;
                     const int64_t group = L.c.n_heads / L.c.n_kv_heads;
                     for (int64_t h = 0; h < L.c.n_heads; ++h) s.data[static_cast<size_t>(h)] = orig.data[static_cast<size_t>(h / group)];
                     return true;
                 }});
    if (sliding) {
        v.push_back({"window_ignored (this sliding layer attended every earlier key)", [](Layer& L) {
                         L.c.sliding_window = 0;
                         return true;
                     }});
        for (int64_t d : {-1, 1})
            v.push_back({fmt::format("window_off_by_one (a window of {} keys where the config's is {})", W + d, W),
                         [W, d](Layer& L) {
                             if (W + d < 1) return false;
                             L.c.sliding_window = W + d;
                             return true;
                         }});
    } else if (W > 0) {
        v.push_back({fmt::format("layer_types_ignored (this full layer given the window of {})", W), [W](Layer& L) {
                         L.c.sliding_window = W;
                         return true;
                     }});
    }
    // RoPE's twists, from their rows (conform/twists.h): each one ignored, and
    // each of its bugs, as the config edit it is.
    const BlockConfig lc = m.layer_block(l);
    for (const Twist& t : twist_table()) {
        if (!(t.convention & kRope) || !twist_on(t, lc)) continue;
        if (t.ignored)
            v.push_back({std::string(t.ignored) + " (" + (t.ignored_why ? t.ignored_why(lc) : std::string(t.name) + " ignored") + ")",
                         [&t](Layer& L) {
                             reset_twist(t, L.c);
                             return true;
                         }});
        for (const TwistBug& b : t.bugs)
            for (size_t i = 0; i < b.as(lc).size(); ++i)
                v.push_back({std::string(b.id) + " (" + b.why(lc, b.as(lc)[i]) + ")", [&b, i](Layer& L) {
                                 const auto edits = b.as(L.c);
                                 if (i >= edits.size()) return false;
                                 const BlockConfig stub = L.c;  // the FFN stub's width and activation kept
                                 L.c = edits[i];
                                 L.c.ffn_dim = stub.ffn_dim, L.c.hidden_act = stub.hidden_act;
                                 return true;
                             }});
    }
    v.push_back({"o_bias_missing (the output projection's bias dropped)", [](Layer& L) {
                     if (L.bo.empty()) return false;
                     L.bo.clear();
                     return true;
                 }});
    v.push_back({"qkv_bias_missing (the q, k, v projections' biases dropped)", [](Layer& L) {
                     if (!L.c.qkv_bias) return false;
                     L.c.qkv_bias = false;
                     for (const char* b : {"bq", "bk", "bv"}) L.w.erase(b);
                     return true;
                 }});
    return v;
}

std::string kind_of(const config::ModelConfig& m, int64_t l) {
    const BlockConfig c = m.layer_block(l);
    std::string k = c.sliding_window > 0 ? fmt::format("sliding {}", c.sliding_window) : std::string("full");
    if (c.nope) k += ", NoPE";
    if (c.attn_sinks) k += ", sinks";
    return k;
}

}  // namespace

bool HiddenResult::pass() const {
    return std::all_of(layers.begin(), layers.end(), [](const HiddenLayer& l) { return l.ok; });
}

HiddenResult run_hidden_check(const HiddenFlags& f, std::ostream& log) {
    if (f.overrides.o_preset && f.overrides.o_preset->count())
        throw InputError("--preset: --weights reads the configuration from the checkpoint (" + f.weights + ")");
    const std::string config_json = f.overrides.o_file && f.overrides.o_file->count() ? f.overrides.file : "";
    const h5::HiddenFile file = h5::read_hidden(f.file);  // a bad file costs nothing
    weights::Checkpoint ck = [&] {
        try {
            return weights::Checkpoint::open(f.weights, nullptr, config_json);
        } catch (const weights::WeightsError& e) {
            throw InputError(e.what());
        }
    }();
    // The checkpoint fixes every size; its conventions may be overridden by flag (to ask what
    // the layers compute read another way), as for --weights runs.
    const config::ConfigOptions& ov = f.overrides;
    for (const auto& [opt, flag] : {std::pair{ov.o_d_model, "--d-model"}, {ov.o_heads, "--heads"},
                                    {ov.o_kv_heads, "--kv-heads"}, {ov.o_head_dim, "--head-dim"}, {ov.o_ffn, "--ffn"},
                                    {ov.o_layers, "--layers"}, {ov.o_kv_lora_rank, "--kv-lora-rank"},
                                    {ov.o_qk_nope_head_dim, "--qk-nope-head-dim"},
                                    {ov.o_qk_rope_head_dim, "--qk-rope-head-dim"}, {ov.o_v_head_dim, "--v-head-dim"}})
        if (opt && opt->count()) throw InputError(std::string(flag) + ": the checkpoint's weights fix the sizes (" + f.weights + ")");
    config::ConfigOptions conventions = ov;
    conventions.o_file = nullptr;
    conventions.o_preset = nullptr;
    config::ModelConfig m;
    try {
        m = config::resolve_config(conventions, ck.model());
    } catch (const config::ConfigError& e) {
        throw InputError(e.what());
    }
    HiddenResult r;
    r.weights = f.weights, r.file = f.file, r.producer = file.producer, r.tol = f.tol;
    r.detected = ck.detected();
    for (const auto& n : m.notes) r.detected.push_back("config: " + n);  // which layers slide, what was not used
    r.ffn_unmodelled = m.ffn_unmodelled;
    r.model_layers = m.layers;
    r.tokens = static_cast<int64_t>(file.token_ids.size());
    const int64_t L = static_cast<int64_t>(file.attn_residual.size()), D = m.block.d_model;
    if (L > m.layers)
        throw InputError(f.file + ": layers/" + std::to_string(L - 1) + ": the file holds " + std::to_string(L) +
                         " layers, the model (" + f.weights + ") " + std::to_string(m.layers));
    if (file.attn_residual[0].cols() != D)
        throw InputError(f.file + ": layers/0/attn_residual: expected " + std::to_string(D) + " columns (the model's d_model), found " +
                         std::to_string(file.attn_residual[0].cols()));
    std::vector<int64_t> positions = file.positions;
    if (positions.empty())
        for (int64_t t = 0; t < r.tokens; ++t) positions.push_back(t);
    for (size_t t = 1; t < positions.size(); ++t)
        if (positions[t] <= positions[t - 1])
            throw InputError(f.file + ": positions: expected strictly increasing positions (one sequence), found " +
                             std::to_string(positions[t - 1]) + " then " + std::to_string(positions[t]));
    for (size_t t = 0; t < file.token_ids.size(); ++t)
        if (file.token_ids[t] < 0 || file.token_ids[t] >= m.vocab)
            throw InputError(f.file + ": token_ids[" + std::to_string(t) + "]: " + std::to_string(file.token_ids[t]) +
                             " is out of the vocabulary [0, " + std::to_string(m.vocab) + ")");

    DTensor x;
    try {
        x = to_double(ck.embedding_rows(file.token_ids));
    } catch (const weights::WeightsError& e) {
        throw InputError(e.what());
    }
    for (double& v : x.data) v *= m.embedding_multiplier;
    for (int64_t l = 0; l < L; ++l) {
        Layer layer;
        try {
            layer = layer_of(ck, m, l);
        } catch (const weights::WeightsError& e) {
            throw InputError(e.what());
        }
        const DTensor& want = file.attn_residual[static_cast<size_t>(l)];
        const Distance d = distance(attention_residual(layer, x, positions), want);
        HiddenLayer h{l, kind_of(m, l), d.rel, d.max_abs, d.token, d.channel, d.rel <= f.tol, {}};
        if (!h.ok) {
            for (const Change& c : changes(m, l)) {
                Layer changed = layer;
                if (!c.apply(changed)) continue;
                const double e = distance(attention_residual(changed, x, positions), want).rel;
                if (e <= f.tol) h.explained.emplace_back(c.name, e);
            }
            std::sort(h.explained.begin(), h.explained.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
        }
        log << fmt::format("  layer {:>2} ({}): rel error {:.2e}\n", l, h.kind, h.rel_err);
        r.layers.push_back(std::move(h));
        x = file.out[static_cast<size_t>(l)];  // the next layer starts from the engine's own stream
    }
    return r;
}

std::string hidden_table(const HiddenResult& r) {
    std::ostringstream o;
    o << "conform forward --expect-hidden\n";
    for (const auto& d : r.detected) o << "  " << d << "\n";
    if (!r.ffn_unmodelled.empty()) o << "  the FFN: " << r.ffn_unmodelled << "; the file's stream carries it\n";
    o << fmt::format("  file: {} ({} tokens, {} of the model's {} layers){}\n", r.file, r.tokens, r.layers.size(),
                     r.model_layers, r.producer.empty() ? "" : "\n  producer: " + r.producer);
    o << "  each layer from the file's own stream (the embedding's rows, then layers/l-1/out); the reference's\n"
         "  h = x + attention(rmsnorm(x)) @ wo (+ bo), float64, against the file's layers/l/attn_residual\n\n";
    o << fmt::format("{:<6} {:<22} {:>10} {:>11}  {}\n", "layer", "attention", "rel error", "max |diff|", "at (token, channel)");
    for (const auto& l : r.layers)
        o << fmt::format("{:<6} {:<22} {:>10.2e} {:>11.2e}  ({}, {}){}\n", l.layer, l.kind, l.rel_err, l.max_abs, l.token,
                         l.channel, l.ok ? "" : "   DO NOT match");
    o << "\n";
    double worst = 0;
    for (const auto& l : r.layers) worst = std::max(worst, l.rel_err);
    if (r.pass()) {
        o << fmt::format("--expect-hidden {}: the reference's attention sub-layers match it: worst rel error {:.2e} (<= {:g})\n",
                         r.file, worst, r.tol);
        return o.str();
    }
    o << fmt::format("--expect-hidden {}: the reference's attention sub-layers DO NOT match it: worst rel error {:.2e} (> {:g})\n",
                     r.file, worst, r.tol);
    for (const auto& l : r.layers) {
        if (l.ok) continue;
        if (l.explained.empty())
            o << fmt::format("  layer {}: diagnosis: no single convention change (sinks, window, layer type, biases, RoPE) explains it\n",
                             l.layer);
        else
            o << fmt::format("  layer {}: diagnosis: {}: the file's stream is this layer with that convention changed "
                             "(rel error {:.2e})\n",
                             l.layer, l.explained.front().first, l.explained.front().second);
    }
    return o.str();
}

}  // namespace conform::run

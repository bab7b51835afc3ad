#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/rng.h"

namespace conform::model {

namespace {

// A splitmix64 stream per (seed, layer, tensor), so any layer's weights are
// drawn without drawing the ones before it.
Rng stream(const Spec& s, int64_t layer, int tensor) {
    Rng r{s.seed * 0x2545F4914F6CDD1Dull ^ (static_cast<uint64_t>(layer + 2) << 20) ^ static_cast<uint64_t>(tensor)};
    r.next();
    return r;
}

Tensor normal(Rng r, int64_t rows, int64_t cols, double std) {
    Tensor t(rows, cols);
    for (auto& v : t.data) v = static_cast<float>(std * r.normal());
    return t;
}

// Norm weights 1 + N(0, 0.1²): near 1, as trained ones mostly are, and not
// all equal (equal weights would hide a weight applied to the wrong index).
Tensor norm_weight(Rng r, int64_t n) {
    Tensor t(1, n);
    for (auto& v : t.data) v = static_cast<float>(1.0 + 0.1 * r.normal());
    return t;
}

}  // namespace

Named layer_weights(const Spec& s, int64_t layer) {
    const BlockConfig& c = s.block;
    const int64_t D = c.d_model, Q = c.q_width(), KV = c.kv_width(), F = c.ffn_dim;
    const double in_D = 1.0 / std::sqrt(static_cast<double>(D));
    const double depth = 1.0 / std::sqrt(2.0 * static_cast<double>(std::max<int64_t>(1, s.layers)));
    Named w;
    w["attn_norm"] = norm_weight(stream(s, layer, 0), D);
    w["wq"] = normal(stream(s, layer, 1), D, Q, in_D);
    w["wk"] = normal(stream(s, layer, 2), D, KV, in_D);
    w["wv"] = normal(stream(s, layer, 3), D, KV, in_D);
    w["wo"] = normal(stream(s, layer, 4), Q, D, depth / std::sqrt(static_cast<double>(Q)));
    w["ffn_norm"] = norm_weight(stream(s, layer, 5), D);
    w["w1"] = normal(stream(s, layer, 6), D, F, in_D);
    w["w3"] = normal(stream(s, layer, 7), D, F, in_D);
    w["w2"] = normal(stream(s, layer, 8), F, D, depth / std::sqrt(static_cast<double>(F)));
    if (c.qk_norm) {
        w["q_norm"] = norm_weight(stream(s, layer, 9), c.head_dim);
        w["k_norm"] = norm_weight(stream(s, layer, 10), c.head_dim);
    }
    if (c.qkv_bias) {  // O(1), as a projection's output is
        w["bq"] = normal(stream(s, layer, 11), 1, Q, 1.0);
        w["bk"] = normal(stream(s, layer, 12), 1, KV, 1.0);
        w["bv"] = normal(stream(s, layer, 13), 1, KV, 1.0);
    }
    if (c.sandwich_norm) {
        w["attn_post_norm"] = norm_weight(stream(s, layer, 14), D);
        w["ffn_post_norm"] = norm_weight(stream(s, layer, 15), D);
    }
    if (c.attn_sinks) w["sinks"] = normal(stream(s, layer, 16), 1, c.n_heads, 1.0);  // logits of the scores' scale
    return w;
}

Tensor embedding(const Spec& s) {
    return normal(stream(s, -1, 0), s.vocab, s.block.d_model, 1.0 / s.embedding_multiplier);
}
Tensor final_norm(const Spec& s) { return norm_weight(stream(s, -1, 1), s.block.d_model); }
Tensor lm_head(const Spec& s) {
    return normal(stream(s, -1, 2), s.block.d_model, s.vocab, 1.0 / std::sqrt(static_cast<double>(s.block.d_model)));
}

std::vector<int64_t> token_ids(const Spec& s) {
    Rng r = stream(s, -1, 3);
    std::vector<int64_t> ids(static_cast<size_t>(s.tokens));
    for (auto& id : ids) id = static_cast<int64_t>(r.next() % static_cast<uint64_t>(s.vocab));
    return ids;
}

std::vector<int64_t> positions(const Spec& s) {
    std::vector<int64_t> p(static_cast<size_t>(s.tokens));
    for (size_t i = 0; i < p.size(); ++i) p[i] = s.start + static_cast<int64_t>(i);
    return p;
}

Tensor embed(const Tensor& table, const std::vector<int64_t>& ids) {
    const int64_t D = table.cols();
    Tensor x(static_cast<int64_t>(ids.size()), D);
    for (size_t t = 0; t < ids.size(); ++t) {
        if (ids[t] < 0 || ids[t] >= table.rows()) throw std::out_of_range("embed: token id out of range");
        std::copy_n(table.data.begin() + ids[t] * D, D, x.data.begin() + static_cast<int64_t>(t) * D);
    }
    return x;
}

BlockWeights views(const Named& w, const BlockConfig& c) {
    BlockWeights b;
    b.attn_norm = w.at("attn_norm").view();
    b.wq = w.at("wq").view();
    b.wk = w.at("wk").view();
    b.wv = w.at("wv").view();
    b.wo = w.at("wo").view();
    b.ffn_norm = w.at("ffn_norm").view();
    b.w1 = w.at("w1").view();
    b.w3 = w.at("w3").view();
    b.w2 = w.at("w2").view();
    if (c.qk_norm) {
        b.q_norm = w.at("q_norm").view();
        b.k_norm = w.at("k_norm").view();
    }
    if (c.qkv_bias) {
        b.bq = w.at("bq").view();
        b.bk = w.at("bk").view();
        b.bv = w.at("bv").view();
    }
    if (c.attn_sinks) b.sinks = w.at("sinks").view();
    if (c.sandwich_norm) {
        b.attn_post_norm = w.at("attn_post_norm").view();
        b.ffn_post_norm = w.at("ffn_post_norm").view();
    }
    return b;
}

DTensor matmul_acc64(const Tensor& x, const Tensor& w) {
    const int64_t T = x.rows(), K = x.cols(), N = w.cols();
    if (w.rows() != K) throw std::invalid_argument("matmul_acc64: inner sizes differ");
    DTensor y;
    y.shape = {T, N};
    y.data.assign(static_cast<size_t>(T * N), 0.0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const double a = x.data[static_cast<size_t>(t * K + k)];
            const float* wr = w.data.data() + k * N;
            double* yr = y.data.data() + t * N;
            for (int64_t n = 0; n < N; ++n) yr[n] += a * static_cast<double>(wr[n]);
        }
    return y;
}

DTensor to_double(const Tensor& t) {
    DTensor d;
    d.shape = {t.rows(), t.cols()};
    d.data.assign(t.data.begin(), t.data.end());
    return d;
}

Moments moments(const DTensor& t) {
    Moments m;
    if (t.data.empty()) return m;
    double sum = 0;
    for (double v : t.data) {
        sum += v;
        m.max_abs = std::max(m.max_abs, std::fabs(v));
    }
    m.mean = sum / static_cast<double>(t.data.size());
    double sq = 0;
    for (double v : t.data) sq += (v - m.mean) * (v - m.mean);
    m.std = std::sqrt(sq / static_cast<double>(t.data.size()));
    return m;
}

Error error(const DTensor& a, const DTensor& b) {
    Error e;
    if (a.data.size() != b.data.size()) throw std::invalid_argument("error: sizes differ");
    double ref = 0;
    for (size_t i = 0; i < a.data.size(); ++i) {
        const double d = std::fabs(a.data[i] - b.data[i]);
        e.max_abs = std::isnan(d) ? NAN : std::max(e.max_abs, d);
        if (std::isnan(e.max_abs)) break;
        ref = std::max(ref, std::fabs(b.data[i]));
    }
    e.rel = ref > 0 ? e.max_abs / ref : e.max_abs;
    return e;
}

}  // namespace conform::model

// A spec's tensors: every input drawn from the case's seed (core/rng.h),
// deterministically, in an order that a field added later never disturbs
// (a twist's tensors after every other input).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "conform/dtype.h"
#include "core/rng.h"
#include "gen/detail.h"

namespace conform::gen {

using detail::pool_pages;

namespace {

// ---- deterministic values (core/rng.h) -------------------------------------------

Tensor normal(Rng& r, int64_t rows, int64_t cols, double scale) {
    Tensor t(rows, cols);
    for (auto& v : t.data) v = static_cast<float>(r.normal() * scale);
    return t;
}

// Activations: N(0, mag²), with `outliers` channels ×50 (LLM activations have them).
// `outliers` distinct channels ×50 (at most every column once): a column
// drawn twice was ×2500, three times ×125000 — past float16's range at
// magnitude 30, so an f16 case's inputs were infinite before any kernel ran.
// A draw that repeats a column is drawn again, so cases without a repeat
// are what they always were.
Tensor activations(Rng& r, int64_t rows, int64_t cols, double mag, int64_t outliers) {
    Tensor t = normal(r, rows, cols, mag);
    std::vector<int64_t> chosen;
    for (int64_t o = 0; o < std::min(outliers, cols); ++o) {
        int64_t c = r.below(cols);
        while (std::find(chosen.begin(), chosen.end(), c) != chosen.end()) c = r.below(cols);
        chosen.push_back(c);
        for (int64_t i = 0; i < rows; ++i) t.data[i * cols + c] *= 50.0f;
    }
    return t;
}

// Weights stored [in, out], N(0, 1/in): keeps each product's output O(1).
Tensor weight(Rng& r, int64_t in, int64_t out) { return normal(r, in, out, 1.0 / std::sqrt(static_cast<double>(in))); }

// Norm weights around 1 and deliberately non-uniform: with all-ones weights
// QK-norm before and after RoPE coincide, and a dropped weight goes unseen.
// Under Gemma's norms (plus_one) the same scales are stored as their offset
// from one, w - 1, around 0 as Gemma's (zero-initialised) weights are.
Tensor norm_weight(Rng& r, int64_t n, double spread, bool plus_one) {
    Tensor t(1, n);
    for (auto& v : t.data) v = static_cast<float>(plus_one ? spread * r.normal() : 1.0 + spread * r.normal());
    return t;
}


// ---- generator pieces ------------------------------------------------------------
}  // namespace

namespace {

// Rows [begin, begin + n) of t.
Tensor rows_of(const Tensor& t, int64_t begin, int64_t n) {
    Tensor out(n, t.cols());
    std::copy(t.data.begin() + begin * t.cols(), t.data.begin() + (begin + n) * t.cols(), out.data.begin());
    return out;
}

const RealLayer* real_layer(const CaseSpec& s) {
    if (s.layer < 0) return nullptr;
    if (!s.real || s.real->layer != s.layer || s.real->weights.empty())
        throw std::logic_error("case " + canonical_id(s) + " names layer " + std::to_string(s.layer) +
                               " of a checkpoint, but that layer is not loaded");
    if (s.model_inputs && (s.T > s.real->rows || s.S > s.real->rows))
        throw InputError("case " + canonical_id(s) + " takes " + std::to_string(std::max(s.T, s.S)) +
                         " rows of the model stream, which has " + std::to_string(s.real->rows) +
                         " tokens (--tokens / --token-count)");
    if (s.model_inputs && s.real->acts.empty())
        throw std::logic_error("case " + canonical_id(s) + " takes the real stream's inputs, which are not loaded");
    return s.real.get();
}

}  // namespace

namespace {

// One page of a paged pool: rows [0, used) hold a sequence's keys and values
// from its own streams (the sequence's seed and the page's place in it), the
// rest poison. A page no sequence takes is all poison (used 0).
struct PoolPage {
    uint64_t seed = 0;
    int64_t index = 0, used = 0;
};

// The pages' keys N(0, mag²) and values N(0, 1), by the ziggurat, each page
// from its own stream: a page's values do not depend on the others', so the
// pages are drawn in parallel and the result is the same at any thread count.
// (MLA's pools: c_kv as the keys, k_pe as the values, each its own width and magnitude.)
void fill_pool(const std::vector<PoolPage>& pages, int64_t P, int64_t W, double mag, Tensor& kc, Tensor& vc,
               int64_t Wv = -1, double vmag = 1.0) {
    if (Wv < 0) Wv = W;
    auto one = [&](size_t p) {
        const PoolPage& g = pages[p];
        float* k = kc.data.data() + static_cast<int64_t>(p) * P * W;
        float* v = vc.data.data() + static_cast<int64_t>(p) * P * Wv;
        // Streams of one splitmix64 sequence started far apart: seeds hashed from (sequence, page, k or v).
        Rng rk{Rng{g.seed ^ (static_cast<uint64_t>(g.index) * 2 + 1) * 0xD1B54A32D192ED03ull}.next()};
        Rng rv{Rng{g.seed ^ (static_cast<uint64_t>(g.index) * 2 + 2) * 0xD1B54A32D192ED03ull}.next()};
        for (int64_t i = 0; i < g.used * W; ++i) k[i] = static_cast<float>(rk.ziggurat() * mag);
        for (int64_t i = 0; i < g.used * Wv; ++i) v[i] = static_cast<float>(rv.ziggurat() * vmag);
        for (int64_t row = g.used; row < P; ++row) {
            const float x = poison(static_cast<int64_t>(p) * P + row);
            std::fill_n(k + row * W, W, x);
            std::fill_n(v + row * Wv, Wv, x);
        }
    };
    const int64_t elements = static_cast<int64_t>(pages.size()) * P * std::max(W, Wv);
    const unsigned threads = elements < (int64_t{1} << 20) ? 1u : std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
    std::atomic<size_t> taken{0};
    auto work = [&] {
        for (size_t p; (p = taken.fetch_add(1)) < pages.size();) one(p);
    };
    std::vector<std::thread> helpers;
    for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
    for (auto& t : helpers) t.join();
}

// Values of an FP8 cache put on the format's rounding ties, in half of the
// FP8 paged cases, after the scales: an eighth of the owned elements of K and
// V moved to the float32 x whose x / scale is exactly the midpoint of two
// adjacent codes (there round-to-nearest-even decides), or one float32 step
// either side of it. Drawn values land there almost never (in 4M values, a
// write through the reciprocal of the scale changed no code); a write that
// rounds differently (fp8(k * fl(1 / scale)), truncation) changes codes here.
void fp8_ties(Rng& r, Case& c) {
    const BlockConfig& cfg = c.config;
    const KvCacheDtype d = cfg.kv_cache_dtype;
    const int64_t hd = cfg.head_dim, W = cfg.n_kv_heads * hd;
    const uint8_t top = d == KvCacheDtype::fp8_e4m3 ? 0x7E : 0x7B;  // the largest finite code
    for (const char* name : {"k_cache", "v_cache"}) {
        Tensor& pool = c.inputs.at(name);
        const Tensor& scales = c.inputs.at(name[0] == 'k' ? "k_scale" : "v_scale");
        for_each_owned_row(c, [&](int64_t, int64_t row) {
            for (int64_t j = 0; j < W; ++j) {
                if (r.below(8) != 0) continue;
                float& x = pool.data[static_cast<size_t>(row * W + j)];
                const float s = scales.data[scales.data.size() == 1 ? 0 : static_cast<size_t>(j / hd)];
                const uint8_t code = fp8_bits(std::fabs(x) / s, d) & 0x7F;
                if (code >= top || !std::isfinite(x)) continue;
                const float lo = fp8_float(code, d), hi = fp8_float(static_cast<uint8_t>(code + 1), d);
                const float mid = lo + (hi - lo) / 2;  // exact: a few significant bits
                const int64_t side = r.below(4);       // the tie (half the time), or a step below or above it
                const float want = side < 2 ? mid : std::nextafter(mid, side == 2 ? 0.0f : INFINITY);
                // A float32 y with fl(y / s) == want: near want * s, a few steps either way.
                float y = want * s;
                for (int k = 0; k < 8 && y / s != want; ++k) y = std::nextafter(y, y / s < want ? INFINITY : 0.0f);
                if (y / s == want) x = std::signbit(x) ? -y : y;
            }
        });
    }
}

// An FP8 cache's scales, after every other input: each scale slot (the
// tensor, or a kv head's columns) from the largest |value| the batch writes
// there, as a calibration would (amax / the format's max), times a factor
// per case: calibrated (1), with headroom (up to 4x: a coarser grid), or
// too small (a quarter to 0.9: the largest values saturate, as activations
// past their calibration do). Each slot jittered by up to 25% so that no
// scale is a power of two (a grid a scale-ignoring kernel would share) and
// per-head scales differ.
void kv_scales(Rng& r, Case& c) {
    const BlockConfig& cfg = c.config;
    const int64_t KV = cfg.n_kv_heads, hd = cfg.head_dim, W = KV * hd;
    const int64_t slots = cfg.kv_scale_per_head ? KV : 1;
    const double fmax = fp8_format(cfg.kv_cache_dtype).max;
    const int64_t mode = r.below(3);
    const double u = r.uniform();
    const double factor = mode == 0 ? 1.0 : mode == 1 ? 1.0 + 3.0 * u : 0.25 + 0.65 * u;
    for (const char* name : {"k_scale", "v_scale"}) {
        const bool is_k = std::string(name) == "k_scale";
        std::vector<double> amax(static_cast<size_t>(slots), 0.0);
        auto see = [&](const float* row) {
            for (int64_t j = 0; j < W; ++j) {
                double& m = amax[static_cast<size_t>(slots == 1 ? 0 : j / hd)];
                m = std::max(m, std::fabs(static_cast<double>(row[j])));
            }
        };
        if (c.op == Op::paged_attention) {
            const Tensor& pool = c.inputs.at(is_k ? "k_cache" : "v_cache");
            for_each_owned_row(c, [&](int64_t, int64_t row) { see(pool.data.data() + row * W); });
        } else {
            // decode: the values its cache will be written, estimated as the
            // projections of rmsnorm(x) (+ bias; k normalised per head under
            // QK-norm), before RoPE (a rotation moves an element within its
            // pair's norm: a calibrated scale may clip a little, as a
            // calibration on other data does).
            const Tensor& x = c.inputs.at("x");
            const Tensor& w = c.inputs.at(is_k ? "wk" : "wv");
            const Tensor* b = cfg.qkv_bias ? &c.inputs.at(is_k ? "bk" : "bv") : nullptr;
            const int64_t D = cfg.d_model;
            const Tensor& an = c.inputs.at("attn_norm");
            const double one = cfg.norm_plus_one ? 1.0 : 0.0;  // Gemma's (1 + w)
            std::vector<float> a(static_cast<size_t>(D)), y(static_cast<size_t>(W));
            for (int64_t t = 0; t < x.rows(); ++t) {
                double ss = 0;
                for (int64_t d = 0; d < D; ++d) ss += static_cast<double>(x.data[t * D + d]) * x.data[t * D + d];
                const double inv = 1.0 / std::sqrt(ss / static_cast<double>(D) + cfg.norm_eps);
                for (int64_t d = 0; d < D; ++d) a[d] = static_cast<float>(x.data[t * D + d] * inv * (one + an.data[d]));
                for (int64_t j = 0; j < W; ++j) {
                    double acc = b ? b->data[j] : 0.0;
                    for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(a[d]) * w.data[d * W + j];
                    y[j] = static_cast<float>(acc);
                }
                if (is_k && cfg.qk_norm) {  // each head's slice normalised, times k_norm
                    const Tensor& kn = c.inputs.at("k_norm");
                    for (int64_t g = 0; g < KV; ++g) {
                        double hs = 0;
                        for (int64_t i = 0; i < hd; ++i) hs += static_cast<double>(y[g * hd + i]) * y[g * hd + i];
                        const double hinv = 1.0 / std::sqrt(hs / static_cast<double>(hd) + cfg.norm_eps);
                        for (int64_t i = 0; i < hd; ++i)
                            y[g * hd + i] = static_cast<float>(y[g * hd + i] * hinv * (one + kn.data[i]));
                    }
                }
                see(y.data());
            }
        }
        Tensor sc(1, slots);
        for (int64_t g = 0; g < slots; ++g) {
            const double a = amax[static_cast<size_t>(g)] > 0 ? amax[static_cast<size_t>(g)] : 1.0;
            sc.data[static_cast<size_t>(g)] = static_cast<float>(a / fmax * factor * (0.8 + 0.45 * r.uniform()));
        }
        c.inputs[name] = std::move(sc);
    }
}

// A mixture of experts' inputs: x, then the router's (moe, moe_route) or a
// route (moe_experts: K distinct experts per token, weights in [0.05, 1.55)),
// then the experts' (moe, moe_experts); each twist's tensors after all of these.
void moe_inputs(Rng& r, const CaseSpec& s, Case& c) {
    const BlockConfig& g = s.config;
    const int64_t T = s.T, D = g.d_model, E = g.n_experts, K = g.n_experts_per_tok, F = g.moe_ffn_dim;
    const bool router = s.op != Op::moe_experts, experts = s.op != Op::moe_route;
    c.inputs["x"] = activations(r, T, D, s.mag, s.outliers);
    if (router) {
        c.inputs["w_router"] = weight(r, D, E);
    } else {
        Tensor route(T, E);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t k = 0; k < K; ++k) {
                int64_t e = r.below(E);
                while (route.data[t * E + e] != 0.0f) e = r.below(E);
                route.data[t * E + e] = static_cast<float>(0.05 + 1.5 * r.uniform());
            }
        c.inputs["route"] = std::move(route);
    }
    if (experts) {
        // Each expert's matrices N(0, 1/in), stacked along the rows.
        c.inputs["w13"] = normal(r, E * D, 2 * F, 1.0 / std::sqrt(static_cast<double>(D)));
        c.inputs["w2"] = normal(r, E * F, D, 1.0 / std::sqrt(static_cast<double>(F)));
    }
    // The twists' tensors, each only where its twist is on (conform/twists.h rows).
    if (router && g.moe_router_bias) c.inputs["router_bias"] = normal(r, 1, E, 1.0);
    // DeepSeek's correction bias is of the order of the scores' own spread.
    if (router && g.moe_selection_bias) {
        const bool sigmoid = g.moe_scoring == MoeScoring::sigmoid;
        Tensor b = normal(r, 1, E, sigmoid ? 0.2 : 1.0 / static_cast<double>(E));
        // With groups, in the draws of odd seed, centred at -0.5: sigmoid
        // scores in (0, 1) then have biased scores below 0 in kept groups,
        // where the groups not kept filled with 0.0 (HF) and with -inf
        // (DeepSeek's code, the contract) choose differently. At 0 it took a
        // few hundred draws to come by one (`conform mutants --seed 2` left
        // group_mask_fill_zero alive). (Softmax scores, ~1/E, have such
        // biased scores already.)
        if (sigmoid && g.moe_n_group > 0 && s.seed % 2 == 1)
            for (float& v : b.data) v -= 0.5f;
        c.inputs["e_bias"] = std::move(b);
    }
    if (experts && g.moe_expert_bias) {
        c.inputs["b13"] = normal(r, E, 2 * F, 0.5);
        c.inputs["b2"] = normal(r, E, D, 0.5);
    }
    if (experts && g.moe_shared_ffn_dim > 0) {
        const int64_t Fs = g.moe_shared_ffn_dim;
        c.inputs["ws13"] = normal(r, D, 2 * Fs, 1.0 / std::sqrt(static_cast<double>(D)));
        c.inputs["ws2"] = normal(r, Fs, D, 1.0 / std::sqrt(static_cast<double>(Fs)));
        if (g.moe_shared_gate) c.inputs["ws_gate"] = weight(r, D, 1);
    }
    if (!router) return;
    // A token whose choice is a near-tie is drawn again (its own stream, so
    // the others keep theirs); after 100 tries at smaller magnitudes, down
    // to 2^-20 of the case's, where no score saturates and no logit rounds
    // far (duplicated router columns, which no draw makes, could still tie:
    // the judge then judges a kernel on the experts it took, docs/moe.md).
    Tensor& x = c.inputs.at("x");
    for (int64_t t = 0; t < T; ++t) {
        Rng again{s.seed ^ (static_cast<uint64_t>(t) + 1) * 0x9E3779B97F4A7C15ull};
        for (int tries = 0; tries < 1100 && !route_clear(c, t); ++tries) {
            const double mag = tries < 100 ? s.mag : s.mag * std::ldexp(1.0, -(tries - 100) / 50 - 1);
            const Tensor row = activations(again, 1, D, mag, 0);
            std::copy(row.data.begin(), row.data.end(), x.data.begin() + t * D);
        }
    }
}

}  // namespace

Case materialize(const CaseSpec& s) {
    const RealLayer* R = real_layer(s);
    const bool model = R && s.model_inputs;
    auto weight_or = [&](const char* name, auto draw) -> Tensor {
        return R && R->weights.count(name) ? R->weights.at(name) : draw();
    };
    auto act = [&](const char* name, int64_t begin, int64_t n) { return rows_of(R->acts.at(name), begin, n); };
    Case c;
    c.op = s.op;
    c.seed = s.seed;
    c.id = canonical_id(s);
    c.config = s.config;
    c.prefill = s.prefill;
    Rng r{s.seed * 0x2545F4914F6CDD1Dull + static_cast<uint64_t>(s.op) + 1};
    // The op's tensors, by its shape family (draw.cpp's make()).
    switch (s.op) {
        case Op::rmsnorm:
            c.inputs["x"] = model ? act("x", 0, s.T) : activations(r, s.T, s.config.d_model, s.mag, s.outliers);
            c.inputs["weight"] = weight_or("attn_norm", [&] { return norm_weight(r, s.config.d_model, 0.3, s.config.norm_plus_one); });
            break;
        case Op::rope:
            c.inputs["x"] = model ? act("rope_in", 0, s.T) : activations(r, s.T, s.config.n_heads * s.config.head_dim, s.mag, s.outliers);
            c.positions["positions"] = positions_of(s.pos, s.T, s.shape);
            break;
        case Op::qk_norm:
            c.inputs["x"] = model ? act("q", 0, s.T) : activations(r, s.T, s.config.n_heads * s.config.head_dim, s.mag, s.outliers);
            c.inputs["weight"] = weight_or("q_norm", [&] { return norm_weight(r, s.config.head_dim, 0.5, s.config.norm_plus_one); });
            break;
        case Op::attention:
            if (model) {  // the keys are the stream's first S rows, the queries their last T
                c.inputs["q"] = act("q_rot", s.S - s.T, s.T);
                c.inputs["k"] = act("k_rot", 0, s.S);
                c.inputs["v"] = act("v", 0, s.S);
            } else {
                c.inputs["q"] = activations(r, s.T, s.config.n_heads * s.config.head_dim, s.mag, s.outliers);
                c.inputs["k"] = activations(r, s.S, s.config.n_kv_heads * s.config.head_dim, s.mag, 0);
                c.inputs["v"] = normal(r, s.S, s.config.n_kv_heads * s.config.head_dim, 1.0);
            }
            // The keys' positions in the shape; the queries' the last T of them
            // when they are the keys' tail (a query sees itself and what came
            // before), else their own from pos.
            c.positions["k_positions"] = positions_of(s.kpos, s.S, s.shape);
            if (s.pos == s.kpos + s.S - s.T && s.shape != CaseSpec::Shape::shuffled) {
                const auto& k = c.positions["k_positions"];
                c.positions["q_positions"].assign(k.end() - s.T, k.end());
            } else {
                c.positions["q_positions"] = positions_of(s.pos, s.T, s.shape);
            }
            break;
        case Op::paged_attention:
        case Op::mla_attention: {
            // The pool's pages in a random order; sequence b takes the next
            // ceil(kv_b / P) of them. Every row no sequence's key or value is
            // written into is poison. MLA's: c_kv and k_pe, both at the
            // queries' magnitude (k_nope = c_kv @ w_uk is then too), and its
            // kv_b_proj; its queries [q_nope | q_pe] per head.
            const bool mla = c.op == Op::mla_attention;
            const BlockConfig& g = s.config;
            const int64_t P = g.page_size, pages = pool_pages(s);
            const int64_t W = mla ? g.kv_lora_rank : g.n_kv_heads * g.head_dim, Wv = mla ? g.qk_rope_head_dim : W;
            std::vector<int64_t> order(static_cast<size_t>(pages));
            std::iota(order.begin(), order.end(), int64_t{0});
            for (int64_t i = pages - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(r.below(i + 1))]);
            c.inputs["q"] = activations(r, s.T, mla ? g.n_heads * g.mla_qk_dim() : g.n_heads * g.head_dim, s.mag, s.outliers);
            if (mla) c.inputs["w_kv_b"] = weight(r, g.kv_lora_rank, g.n_heads * (g.qk_nope_head_dim + g.v_head_dim));
            auto& qo = c.positions["qo_indptr"];
            auto& kvp = c.positions["kv_indptr"];
            auto& ids = c.positions["kv_indices"];
            auto& last = c.positions["kv_last_page_len"];
            qo = {0};
            kvp = {0};
            std::vector<PoolPage> fill(static_cast<size_t>(pages));  // what each page of the pool holds
            size_t next = 0;
            for (size_t b = 0; b < s.kv_lens.size(); ++b) {
                const int64_t kv = s.kv_lens[b], n = (kv + P - 1) / P;
                const uint64_t seed = r.next();  // the sequence's keys and values: its own streams, a page each
                for (int64_t i = 0; i < n; ++i) {
                    fill[static_cast<size_t>(order[next])] = {seed, i, std::min(P, kv - i * P)};
                    ids.push_back(order[next++]);
                }
                qo.push_back(qo.back() + s.q_lens[b]);
                kvp.push_back(static_cast<int64_t>(ids.size()));
                last.push_back(n == 0 ? 0 : kv - (n - 1) * P);
            }
            Tensor kc(pages * P, W), vc(pages * P, Wv);
            fill_pool(fill, P, W, s.mag, kc, vc, Wv, mla ? s.mag : 1.0);
            const std::vector<const char*> pools = op_info(c.op).pools();
            c.inputs[pools.at(0)] = std::move(kc);
            c.inputs[pools.at(1)] = std::move(vc);
            break;
        }
        case Op::swiglu:
            c.inputs["x"] = model ? act("ffn_in", 0, s.T) : activations(r, s.T, s.config.d_model, s.mag, s.outliers);
            c.inputs["w1"] = weight_or("w1", [&] { return weight(r, s.config.d_model, s.config.ffn_dim); });
            c.inputs["w3"] = weight_or("w3", [&] { return weight(r, s.config.d_model, s.config.ffn_dim); });
            c.inputs["w2"] = weight_or("w2", [&] { return weight(r, s.config.ffn_dim, s.config.d_model); });
            break;
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts: moe_inputs(r, s, c); break;
        case Op::block:
        case Op::decode: {
            const int64_t D = s.config.d_model, Q = s.config.n_heads * s.config.head_dim, KV = s.config.n_kv_heads * s.config.head_dim;
            if (R) {  // the layer as the checkpoint has it
                c.inputs["x"] = model ? act("x", 0, s.T) : activations(r, s.T, D, s.mag, s.outliers);
                for (const auto& [name, w] : R->weights) {
                    const TensorSpec* spec = op_info(s.op).input(name);
                    if (spec && spec->present(s.config)) c.inputs[name] = w;
                }
                c.positions["positions"] = positions_of(s.pos, s.T, s.shape);
                break;
            }
            c.inputs["x"] = activations(r, s.T, D, s.mag, s.outliers);
            c.inputs["attn_norm"] = norm_weight(r, D, 0.3, s.config.norm_plus_one);
            c.inputs["wq"] = weight(r, D, Q);
            c.inputs["wk"] = weight(r, D, KV);
            c.inputs["wv"] = weight(r, D, KV);
            c.inputs["wo"] = weight(r, Q, D);
            c.inputs["ffn_norm"] = norm_weight(r, D, 0.3, s.config.norm_plus_one);
            c.inputs["w1"] = weight(r, D, s.config.ffn_dim);
            c.inputs["w3"] = weight(r, D, s.config.ffn_dim);
            c.inputs["w2"] = weight(r, s.config.ffn_dim, D);
            if (s.config.qk_norm) {
                c.inputs["q_norm"] = norm_weight(r, s.config.head_dim, 0.5, s.config.norm_plus_one);
                c.inputs["k_norm"] = norm_weight(r, s.config.head_dim, 0.5, s.config.norm_plus_one);
            }
            if (s.config.qkv_bias) {
                // bias_mean + N(0, 1): each vector's own draw, after every weight a case without biases has.
                for (const auto& [name, n] : {std::pair<const char*, int64_t>{"bq", Q}, {"bk", KV}, {"bv", KV}}) {
                    Tensor b = normal(r, 1, n, 1.0);
                    for (float& v : b.data) v = static_cast<float>(v + s.bias_mean);
                    c.inputs[name] = std::move(b);
                }
            }
            // Large scores: QK-norm would normalise a gain on wq and wk away, so it goes on its weights
            // (on the scale 1 + w where Gemma's norms store the offset w).
            if (s.qk_gain != 1.0) {
                const bool norms = s.config.qk_norm;
                const std::array<const char*, 2> scaled = norms ? std::array<const char*, 2>{"q_norm", "k_norm"}
                                                                : std::array<const char*, 2>{"wq", "wk"};
                const double offset = norms && s.config.norm_plus_one ? 1.0 : 0.0;
                for (const char* name : scaled)
                    for (float& v : c.inputs.at(name).data) v = static_cast<float>((v + offset) * s.qk_gain - offset);
            }
            c.positions["positions"] = positions_of(s.pos, s.T, s.shape);
            break;
        }
    }
    if (s.config.attn_sinks && !c.inputs.count("sinks")) {
        // Each head's sink ~ sigma * N(0, 5^2), after every other input: far
        // below the scores (no effect), among them, or far above (it takes
        // the softmax) — per head, so a sink read from another head shows.
        c.inputs["sinks"] = normal(r, 1, s.config.n_heads, 5.0 * score_scale(s));
    }
    if (s.config.sandwich_norm && !c.inputs.count("attn_post_norm")) {
        // Drawn as the pre-norms are, after every other input.
        c.inputs["attn_post_norm"] = norm_weight(r, s.config.d_model, 0.3, s.config.norm_plus_one);
        c.inputs["ffn_post_norm"] = norm_weight(r, s.config.d_model, 0.3, s.config.norm_plus_one);
    }
    if (s.config.kv_cache_dtype != KvCacheDtype::none) kv_scales(r, c);
    if (s.config.kv_cache_dtype != KvCacheDtype::none && c.op == Op::paged_attention && r.below(2) == 0) fp8_ties(r, c);
    return c;
}
}  // namespace conform::gen

#include "gen/gen.h"

#include <chrono>
#include <cstring>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>
#include <numeric>
#include <rapidcheck.h>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "conform/dtype.h"
#include "core/rng.h"

namespace conform::gen {

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
// Every pick shrinks toward the first alternative, so counterexamples shrink to
// small, round cases (T=1, head_dim=4, position 0, theta 10000 ...).
// (RapidCheck's own element/weightedElement never shrink; an index drawn by
// inRange does, toward 0.) The index is drawn at full size: inRange scales its
// range with RapidCheck's size, which grows from 10 to 100 over a run, and
// would leave every later alternative unreachable until the last cases (a
// {5, 1} pick took its second branch only from case 90 on). A weight means
// the same in case 0 as in case 99.
template <typename T>
T pick_index(T n) {
    return *rc::gen::resize(100, rc::gen::inRange<T>(0, n));
}

template <typename T>
T weighted(std::initializer_list<std::pair<int, T>> items) {
    int total = 0;
    for (const auto& it : items) total += it.first;
    int u = pick_index<int>(total);
    for (const auto& it : items) {
        if (u < it.first) return it.second;
        u -= it.first;
    }
    return items.begin()->second;
}

template <typename T, typename... Ts>
T one_of(T first, Ts... rest) {
    const std::array<T, 1 + sizeof...(rest)> all{first, static_cast<T>(rest)...};
    return all[pick_index<size_t>(all.size())];
}

int64_t pick_position() {
    const int cls = weighted<int>({{3, 0}, {3, 1}, {2, 2}, {2, 3}, {1, 4}, {2, 5}, {1, 6}});
    switch (cls) {
        case 0: return 0;
        case 1: return *rc::gen::inRange<int64_t>(0, 64);
        case 2: return *rc::gen::inRange<int64_t>(4000, 4200);    // around 4096
        case 3: return *rc::gen::inRange<int64_t>(8192, 9000);    // past 8192 (llama3's original context)
        case 4: return *rc::gen::inRange<int64_t>(32700, 33000);  // 32k
        case 5: return *rc::gen::inRange<int64_t>(100000, 140000);
        default: return *rc::gen::inRange<int64_t>(400000, 600000);
    }
}

double pick_theta() {
    const int cls = weighted<int>({{3, 0}, {3, 1}, {3, 2}, {2, 3}});
    switch (cls) {
        case 0: return 10000.0;
        case 1: return 500000.0;
        case 2: return 1000000.0;
        default: return std::round(std::pow(10.0, *rc::gen::inRange<int>(300, 700) / 100.0));  // log-uniform 1e3..1e7
    }
}

// Small widths most of the time (cheap, and where indexing bugs show), and
// the head sizes real kernels tile for: 64, 80, 96 (Phi), 128 (Llama 3,
// Qwen3), 256 (Gemma).
int64_t pick_head_dim(int64_t max_hd) {
    for (;;) {
        const int64_t hd = weighted<int64_t>({{4, 4}, {3, 8}, {3, 16}, {1, 2}, {2, 6}, {2, 32}, {2, 64}, {1, 10},
                                              {2, 128}, {1, 80}, {1, 96}, {2, 256}});
        if (hd <= max_hd) return hd;
    }
}

int64_t pick_rows(int64_t max) {
    // 1 and sizes that are not multiples of 4/8/16 are the interesting ones.
    const int cls = weighted<int>({{2, 0}, {5, 1}, {1, 2}});
    if (cls == 0) return 1;
    if (cls == 1) return *rc::gen::inRange<int64_t>(1, max + 1);
    return std::min<int64_t>(max, one_of<int64_t>(17, 33, 31, 15));
}

// Keys for attention: mostly a few, a steady fraction crossing the tiles
// kernels use (64, 128 keys) with a remainder, and some long (past 2048)
// with a remainder off every power of two from 16 to 256.
int64_t pick_keys(const GenReach& reach) {
    const int cls = weighted<int>({{6, 0}, {2, 1}, {1, 2}});
    if (cls == 0) return pick_rows(reach.rows);
    // One past a tile, one short of one, and between: 16, 32, 64, 128, 256 keys.
    if (cls == 1) return one_of<int64_t>(65, 127, 129, 191, 257, 100, 33, 17, 200, 80);
    return one_of<int64_t>(2049, 1000, 2100, 1537, 777);
}

// MHA (KV = H), GQA (1 < KV < H), MQA (KV = 1), all common; and GQA with
// groups above 4 (Llama 3 8B 32/8 is 4; TinyLlama 32/4 and Llama 3 70B 64/8
// are 8, Qwen2.5 7B 28/4 is 7): where a kernel that maps query heads to kv
// heads one way for small groups and another for large ones differs (h % KV
// against h / group needs 1 < KV and group > 1 to tell). Up to 32 heads, so
// a case stays cheap; only where max_heads allows 8 or more.
void pick_heads(CaseSpec& s, int64_t max_heads) {
    const int cls = max_heads >= 8 ? weighted<int>({{2, 0}, {3, 1}, {2, 2}, {1, 3}})
                                   : weighted<int>({{2, 0}, {3, 1}, {2, 2}});
    if (cls == 0) {
        s.config.n_heads = s.config.n_kv_heads = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(5, max_heads) + 1);
    } else if (cls == 1) {
        s.config.n_kv_heads = *rc::gen::inRange<int64_t>(2, 5);
        const int64_t group = *rc::gen::inRange<int64_t>(2, 5);
        s.config.n_heads = s.config.n_kv_heads * group;
    } else if (cls == 2) {
        s.config.n_kv_heads = 1;
        s.config.n_heads = *rc::gen::inRange<int64_t>(2, 9);
    } else {
        s.config.n_kv_heads = *rc::gen::inRange<int64_t>(2, 5);
        const int64_t group = *rc::gen::inRange<int64_t>(5, 32 / s.config.n_kv_heads + 1);
        s.config.n_heads = s.config.n_kv_heads * group;
    }
}


int64_t pick_width(int64_t small_max, std::initializer_list<int64_t> large) {
    const bool big = weighted<int>({{5, 0}, {1, 1}}) == 1;
    if (!big) return *rc::gen::inRange<int64_t>(1, small_max + 1);
    std::vector<int64_t> l(large);
    return l[pick_index<size_t>(l.size())];
}

void pick_inputs(CaseSpec& s) {
    s.mag = weighted<double>({{6, 1.0}, {2, 1e-3}, {2, 30.0}});
    s.outliers = weighted<int64_t>({{4, 0}, {1, 1}, {1, 3}});
    s.seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
}

// The block's score scale (CaseSpec::qk_gain): mostly the drawn ~N(0, 1)
// scores, sometimes ~N(0, 16²) or ~N(0, 256²). Drawn last of all, so a case
// with gain 1 is the case its seed drew before the gain existed.
void pick_qk_gain(CaseSpec& s) { s.qk_gain = weighted<double>({{6, 1.0}, {2, 4.0}, {1, 16.0}}); }

// Qwen2's projection biases, in a third of the block's cases, their mean
// zero, moderate or large. Drawn last, so a case without them is the case its
// seed drew before they existed.
void pick_qkv_bias(CaseSpec& s) {
    s.config.qkv_bias = weighted<int>({{2, 0}, {1, 1}}) == 1;
    if (s.config.qkv_bias) s.bias_mean = weighted<double>({{2, 0.0}, {1, 3.0}, {1, -8.0}});
}

// A sliding window (Mistral, Gemma 2/3, gpt-oss) in a quarter of the cases,
// where kernels break: one key (the query's own), half the context, one
// short of it, equal, one past (where it no longer binds), and on the tiles
// and pages kernels step by (64, 65; a page, a page and one). Drawn last.
void pick_window(CaseSpec& s) {
    if (weighted<int>({{3, 0}, {1, 1}}) == 0) return;
    int64_t context = s.T;  // the keys a query can reach: block, decode
    if (s.op == Op::attention) context = s.S;
    if (s.op == Op::paged_attention)
        context = std::max<int64_t>(1, s.kv_lens.empty() ? 1 : *std::max_element(s.kv_lens.begin(), s.kv_lens.end()));
    const int64_t step = s.op == Op::paged_attention ? std::max<int64_t>(1, s.config.page_size) : 64;
    s.config.sliding_window =
        std::max<int64_t>(1, one_of<int64_t>(1, context / 2, context - 1, context, context + 1, step, step + 1));
}

// Logit soft-capping (Gemma 2) in a quarter of the cases, the cap near the
// scores' own scale σ (score_scale), where tanh bends them and a cap taken
// after the mask makes its masked keys count; or Gemma 2's 50, where it
// barely bends them. A float, as a kernel holds it. Drawn last.
void pick_softcap(CaseSpec& s) {
    if (weighted<int>({{3, 0}, {1, 1}}) == 0) return;
    const double sigma = score_scale(s);
    s.config.attn_logit_softcapping =
        static_cast<float>(weighted<double>({{2, sigma / 2}, {2, sigma}, {1, 3 * sigma}, {1, 50.0}}));
}

// Attention sinks (gpt-oss) in a quarter of the cases; their values are
// drawn with the inputs (materialize). Drawn last.
void pick_sinks(CaseSpec& s) { s.config.attn_sinks = weighted<int>({{3, 0}, {1, 1}}) == 1; }

// An FP8 KV cache in two cases of five, e4m3 or e5m2, its scales per
// tensor or per kv head (their values drawn with the inputs, materialize).
// Drawn last.
void pick_kv_cache(CaseSpec& s) {
    s.config.kv_cache_dtype = weighted<KvCacheDtype>(
        {{3, KvCacheDtype::none}, {1, KvCacheDtype::fp8_e4m3}, {1, KvCacheDtype::fp8_e5m2}});
    s.config.kv_scale_per_head = s.config.kv_cache_dtype != KvCacheDtype::none && *rc::gen::arbitrary<bool>();
}

// Gemma's (1 + w) norms in a quarter of the cases (the weights then drawn as
// offsets, materialize). Drawn last.
void pick_norm_plus_one(CaseSpec& s) { s.config.norm_plus_one = weighted<int>({{3, 0}, {1, 1}}) == 1; }

// A score scale other than 1/sqrt(head_dim) in a quarter of the cases, as
// query_pre_attn_scalar^-1/2 with the scalar hd·9/8 (Gemma 2 27B: 144 for
// head_dim 128), hd/2 or 2·hd: scores 6%, 41% larger or 29% smaller than a
// kernel with 1/sqrt(hd) makes them. Drawn last.
void pick_attn_scale(CaseSpec& s) {
    if (weighted<int>({{3, 0}, {1, 1}}) == 0) return;
    const double q = static_cast<double>(s.config.head_dim) * weighted<double>({{2, 9.0 / 8}, {1, 0.5}, {1, 2.0}});
    s.config.attn_scale = 1.0 / std::sqrt(q);
}

// Gemma's GeGLU (gelu_tanh gate) in a quarter of the cases. Drawn last.
void pick_hidden_act(CaseSpec& s) {
    s.config.hidden_act = weighted<HiddenAct>({{3, HiddenAct::silu}, {1, HiddenAct::gelu_tanh}});
}

// Gemma 2/3's sandwich norms in a quarter of the block's cases (their
// weights drawn last of the inputs, materialize). Drawn last.
void pick_sandwich_norm(CaseSpec& s) { s.config.sandwich_norm = weighted<int>({{3, 0}, {1, 1}}) == 1; }

// A NoPE layer (SmolLM3, Llama 4) in a quarter of the block's cases.
// Drawn last.
void pick_nope(CaseSpec& s) { s.config.nope = weighted<int>({{3, 0}, {1, 1}}) == 1; }

// Llama 4's chunked attention in a fifth of the cases, the chunk where
// kernels break: 1 (a query sees its own key only), 2, half the context,
// one short of it (the last chunk holds one query), equal or longer (it no
// longer binds), and on the tiles and pages kernels step by. Drawn last.
void pick_chunk(CaseSpec& s) {
    if (weighted<int>({{4, 0}, {1, 1}}) == 0) return;
    int64_t context = s.op == Op::attention ? s.S + s.kpos : s.T + s.pos;  // the positions the queries reach
    if (s.op == Op::paged_attention)
        context = std::max<int64_t>(1, s.kv_lens.empty() ? 1 : *std::max_element(s.kv_lens.begin(), s.kv_lens.end()));
    const int64_t step = s.op == Op::paged_attention ? std::max<int64_t>(1, s.config.page_size) : 64;
    s.config.attention_chunk_size =
        std::max<int64_t>(1, one_of<int64_t>(1, 2, context / 2, context - 1, context, step, step + 1));
}

// Partial rotary (GPT-NeoX, Phi, GLM: a half or a quarter of the head), then
// RoPE scaling with the parameters real checkpoints use. Drawn after
// everything else, so a case without them is the case its seed drew before
// they existed; every pick shrinks to "none" first.
void pick_rope_extras(CaseSpec& s) {
    const int64_t part = weighted<int64_t>({{5, 1}, {1, 2}, {1, 4}});
    if (part > 1 && s.config.head_dim % (2 * part) == 0) s.config.rotary_dim = s.config.head_dim / part;
    const int64_t rd = s.config.rotary_dim > 0 ? s.config.rotary_dim : s.config.head_dim;
    RopeScaling& sc = s.config.rope_scaling;
    sc.type = weighted<RopeScalingType>({{5, RopeScalingType::none},
                                         {1, RopeScalingType::linear},
                                         {1, RopeScalingType::llama3},
                                         {1, RopeScalingType::yarn},
                                         {2, RopeScalingType::dynamic}});
    if (sc.type == RopeScalingType::dynamic && rd <= 2) sc.type = RopeScalingType::linear;  // its exponent is rd / (rd - 2)
    switch (sc.type) {
        case RopeScalingType::none: break;
        case RopeScalingType::linear: sc.factor = one_of(2.0, 4.0, 8.0, 3.0); break;
        case RopeScalingType::llama3:
            // Llama 3.1 / 3.2 config.json
            sc.factor = 8;
            sc.low_freq_factor = 1;
            sc.high_freq_factor = 4;
            sc.original_max_position = 8192;
            s.config.rope_theta = 500000;
            break;
        case RopeScalingType::yarn:
            // Qwen2.5 / Qwen3 long context; attention_factor as HF's get_mscale(factor)
            sc.factor = 4;
            sc.original_max_position = 32768;
            sc.beta_fast = 32;
            sc.beta_slow = 1;
            sc.attention_factor = 0.1 * std::log(sc.factor) + 1.0;
            break;
        case RopeScalingType::dynamic: {
            // The original context placed around the case's own length L, so
            // that cases fall on both sides of it, and on its edge (L = orig
            // is still unscaled); or short (16..64), wherever pos fell. pos
            // itself is left as drawn, so that shrinking to no scaling keeps
            // a failing case failing.
            sc.factor = one_of(2.0, 3.0, 4.0);
            const int cls = weighted<int>({{2, 0}, {1, 1}, {1, 2}, {1, 3}});
            const auto ps = positions_of(s.pos, s.T, s.shape);
            const int64_t L = *std::max_element(ps.begin(), ps.end()) + 1;  // max position + 1
            if (cls == 0) {
                sc.original_max_position = std::max<int64_t>(1, L + *rc::gen::inRange<int64_t>(-16, 17));
            } else if (cls == 1) {
                sc.original_max_position = L;  // the last position inside
            } else if (cls == 2) {
                sc.original_max_position = std::max<int64_t>(1, L - 1);  // one past
            } else {
                sc.original_max_position = *rc::gen::inRange<int64_t>(16, 65);  // wherever pos fell
            }
            break;
        }
    }
}

// paged_attention's batch (CaseSpec::kv_lens, q_lens). Page sizes as
// engines use them (vLLM 16, FlashInfer 1 to 256, llama.cpp-like 5); per
// sequence the key counts that sit on page boundaries (0, 1, P-1, P, P+1,
// kP±1), short and middling ones and, rarely, one past 8k; queries one (a
// decode step), a few, the whole sequence (a prefill) or a chunk after a
// cached prefix. The batch is a RapidCheck container, so a failing batch
// shrinks by dropping sequences, wherever they are.
constexpr std::array<int64_t, 7> kPageSizes = {1, 5, 8, 16, 64, 128, 256};  // shrinking takes the next larger
int64_t pick_page_size() { return weighted<int64_t>({{3, 16}, {2, 8}, {2, 5}, {1, 1}, {1, 64}, {1, 128}, {1, 256}}); }

rc::Gen<std::pair<int64_t, int64_t>> sequence_gen(int64_t P) {
    return rc::gen::exec([P] {
        int64_t kv = 0;
        switch (weighted<int>({{4, 0}, {3, 1}, {1, 2}, {2, 3}, {1, 4}})) {
            case 0: kv = *rc::gen::inRange<int64_t>(1, 41); break;
            case 1: {
                const int64_t k = one_of<int64_t>(1, 2, 3);
                kv = std::max<int64_t>(0, k * P + one_of<int64_t>(-1, 0, 1));
                break;
            }
            case 2: kv = 0; break;  // empty: its queries see no key
            case 3: kv = *rc::gen::inRange<int64_t>(41, 600); break;
            default: kv = weighted<int64_t>({{4, 0}, {1, 1}}) ? one_of<int64_t>(8191, 8193, 8200) : 1; break;
        }
        int64_t q = 1;
        switch (weighted<int>({{4, 0}, {2, 1}, {2, 2}, {1, 3}, {1, 4}})) {
            case 0: q = 1; break;                                   // a decode step
            case 1: q = *rc::gen::inRange<int64_t>(2, 9); break;    // a few (speculative decoding)
            case 2: q = kv <= 300 ? kv : 16; break;                 // a prefill (past 300 keys: its last 16)
            case 3: q = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(1, std::min<int64_t>(kv, 64)) + 1); break;  // a chunk
            default: q = 0; break;                                  // in the batch with no new token
        }
        if (kv == 0) q = std::min<int64_t>(q, 1);
        q = std::min(q, std::max<int64_t>(kv, q == 0 ? 0 : 1));
        if (kv > 600) q = std::min<int64_t>(q, 8);  // a long sequence decodes or takes a short chunk
        return std::make_pair(kv, q);
    });
}

// Pages the batch needs, and the pool it is drawn from (three times as many,
// and one more, so that a batch of empty sequences still has a cache).
int64_t pages_needed(const CaseSpec& s) {
    int64_t n = 0;
    for (int64_t kv : s.kv_lens) n += (kv + s.config.page_size - 1) / s.config.page_size;
    return n;
}
int64_t pool_pages(const CaseSpec& s) { return s.pool * pages_needed(s) + 1; }
// A batch's T and S, from its sequences' queries and keys.
void batch_totals(CaseSpec& s) {
    s.T = std::accumulate(s.q_lens.begin(), s.q_lens.end(), int64_t{0});
    s.S = std::max<int64_t>(1, std::accumulate(s.kv_lens.begin(), s.kv_lens.end(), int64_t{0}));
}

void pick_batch(CaseSpec& s) {
    pick_heads(s, 8);
    s.config.head_dim = pick_head_dim(op_info(Op::paged_attention).reach.head_dim_max);
    s.config.page_size = pick_page_size();
    const int64_t most = weighted<int64_t>({{5, 4}, {2, 1}, {2, 20}});
    const auto batch = *rc::gen::resize(most, rc::gen::nonEmpty(rc::gen::container<std::vector<std::pair<int64_t, int64_t>>>(
                                                 sequence_gen(s.config.page_size))));
    s.kv_lens.clear();
    s.q_lens.clear();
    for (const auto& [kv, q] : batch) s.kv_lens.push_back(kv), s.q_lens.push_back(q);
    if (std::all_of(s.q_lens.begin(), s.q_lens.end(), [](int64_t q) { return q == 0; })) s.q_lens[0] = 1;
    batch_totals(s);
    // The pool at most 2^22 floats per cache: narrower heads where it is large.
    while (pool_pages(s) * s.config.page_size * s.config.n_kv_heads * s.config.head_dim > (int64_t{1} << 22) &&
           s.config.head_dim > 8)
        s.config.head_dim /= 2;
    if (s.S > 4000) s.config.head_dim = std::min<int64_t>(s.config.head_dim, 64);
    s.config.head_dim += s.config.head_dim % 2;
}

// A pinned stream: the configuration every drawn case takes, as far as its op
// reads it (its config fields and the dims of its inputs, conform/op_info.h).
void pin(CaseSpec& s, const BlockConfig& c) {
    const OpInfo& info = op_info(s.op);
    if (info.uses(kRope)) {
        s.config.head_dim = c.head_dim;
        s.config.rotary_dim = c.rotary_dim;
        s.config.rope_layout = c.rope_layout;
        s.config.rope_theta = c.rope_theta;
        s.config.rope_scaling = c.rope_scaling;
    }
    if (info.reads("n_heads")) {
        s.config.n_heads = c.n_heads;
        s.config.n_kv_heads = c.n_kv_heads;
    }
    if (info.reads("head_dim")) s.config.head_dim = c.head_dim;
    if (info.reads("page_size") && c.page_size > 0) s.config.page_size = c.page_size;
    if (info.has_dim(Dim::D)) s.config.d_model = c.d_model;
    if (info.has_dim(Dim::F)) s.config.ffn_dim = c.ffn_dim;
    if (info.reads("qk_norm")) s.config.qk_norm = c.qk_norm;
    if (info.reads("sliding_window")) s.config.sliding_window = c.sliding_window;
    if (info.reads("attention_chunk_size")) s.config.attention_chunk_size = c.attention_chunk_size;
    if (info.reads("attn_logit_softcapping")) s.config.attn_logit_softcapping = c.attn_logit_softcapping;
    if (info.reads("attn_sinks")) s.config.attn_sinks = c.attn_sinks;
    if (info.reads("attn_scale")) s.config.attn_scale = c.attn_scale;
    if (info.reads("norm_plus_one")) s.config.norm_plus_one = c.norm_plus_one;
    if (info.reads("sandwich_norm")) s.config.sandwich_norm = c.sandwich_norm;
    if (info.reads("nope")) s.config.nope = c.nope;
    if (info.reads("hidden_act")) s.config.hidden_act = c.hidden_act;
    if (info.reads("kv_cache_dtype")) {
        s.config.kv_cache_dtype = c.kv_cache_dtype;
        s.config.kv_scale_per_head = c.kv_scale_per_head;
    }
    if (info.reads("qkv_bias")) {
        if (!c.qkv_bias) s.bias_mean = 0.0;
        s.config.qkv_bias = c.qkv_bias;
    }
    if (info.reads("norm_eps")) s.config.norm_eps = c.norm_eps;
}

// A checkpoint's layer: its weights; with model inputs, the first T rows of
// its real stream at the positions they were computed at (so the drawn
// position, shape, magnitude and outliers give way to the stream's).
void take_layer(CaseSpec& s, const std::shared_ptr<const RealLayer>& real) {
    // A paged batch takes no weights and no stream: its inputs stay drawn,
    // at the checkpoint's heads and head_dim (the pin).
    if (op_info(s.op).uses(kPaged)) return;
    s.layer = real->layer;
    s.real = real;
    s.model_inputs = real->model_inputs;
    if (!s.model_inputs) return;
    const int64_t n = real->rows;
    s.mag = 1;
    s.outliers = 0;
    s.qk_gain = 1;  // the checkpoint's own q and k
    s.shape = CaseSpec::Shape::contiguous;
    s.T = std::min(s.T, n);
    if (s.op == Op::attention) {
        s.S = std::min(s.S, n);
        s.T = std::min(s.T, s.S);
        s.kpos = real->start;
        s.pos = real->start + s.S - s.T;  // the keys' last T: a prefill, a chunk, a decode step
    } else {
        s.pos = real->start;
    }
    s.prefill = std::min(s.prefill, s.T);
    // rope and qk_norm take q's rows: all of the model's query heads.
    if ((s.op == Op::rope || s.op == Op::qk_norm) && real->n_heads > 0) s.config.n_heads = s.config.n_kv_heads = real->n_heads;
}

CaseSpec make(const Stream& st) {
    const Op op = st.op;
    const std::optional<BlockConfig>& pinned = st.pin;
    // Rows of the ops with weights, at most st.max_rows (a full-size block).
    auto cap = [&](int64_t rows) { return st.max_rows > 0 ? std::min(rows, st.max_rows) : rows; };
    CaseSpec s;
    s.op = op;
    const GenReach& reach = op_info(op).reach;
    switch (op) {
        case Op::rmsnorm:
            s.T = pick_rows(reach.rows);
            s.config.d_model = pick_width(130, {1024, 2048, 4096, 5120, 1031, 4100});  // and tails off the vector width
            s.config.norm_eps = one_of(1e-5, 1e-6);
            break;
        case Op::rope:
            s.T = pick_rows(reach.rows);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.config.n_heads = *rc::gen::inRange<int64_t>(1, 6);
            s.config.rope_layout = one_of(RopeLayout::neox, RopeLayout::interleaved);
            s.config.rope_theta = pick_theta();
            s.pos = pick_position();
            s.shape = weighted<CaseSpec::Shape>({{6, CaseSpec::Shape::contiguous},
                                                 {1, CaseSpec::Shape::gaps},
                                                 {1, CaseSpec::Shape::restarts},
                                                 {1, CaseSpec::Shape::shuffled}});
            break;
        case Op::qk_norm:
            s.T = pick_rows(reach.rows);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.config.n_heads = *rc::gen::inRange<int64_t>(1, 6);
            s.config.norm_eps = one_of(1e-6, 1e-5);
            break;
        case Op::attention: {
            pick_heads(s, 8);
            s.config.head_dim = pick_head_dim(reach.head_dim_max);
            s.S = pick_keys(reach);
            // Every pairing: a prefill (T = S), a chunk after a cached prefix
            // (T < S), one decoding query (T = 1), a few queries over many keys.
            const int tq = weighted<int>({{3, 0}, {3, 1}, {1, 2}, {1, 3}});
            switch (tq) {
                case 0: s.T = s.S <= 300 ? s.S : 64; break;  // a prefill (past 300 keys: its last 64 queries)
                case 1: s.T = *rc::gen::inRange<int64_t>(1, std::min<int64_t>(s.S, 64) + 1); break;
                case 2: s.T = 1; break;
                default: s.T = std::min<int64_t>(s.S, one_of<int64_t>(2, 5, 8)); break;
            }
            if (s.S > 256) s.config.head_dim = std::min<int64_t>(s.config.head_dim, 128);  // long keys: keep T·S·hd small
            s.kpos = pick_position();
            // Mostly the queries are the tail of the keys (prefill, chunked
            // prefill, decode); sometimes elsewhere, so some rows see few or no keys.
            const bool tail = weighted<int>({{5, 0}, {1, 1}}) == 0;
            s.pos = tail ? s.kpos + s.S - s.T : s.kpos + *rc::gen::inRange<int64_t>(-4, s.S + 4);
            // Queries before the first key stay there (keys moved up), so that
            // rows seeing no key at all occur from position 0 on as well.
            if (s.pos < 0) s.kpos -= s.pos, s.pos = 0;
            s.shape = weighted<CaseSpec::Shape>({{6, CaseSpec::Shape::contiguous},
                                                 {1, CaseSpec::Shape::gaps},
                                                 {1, CaseSpec::Shape::restarts},
                                                 {1, CaseSpec::Shape::shuffled}});
            break;
        }
        case Op::paged_attention: pick_batch(s); break;
        case Op::swiglu:
            s.T = cap(pick_rows(reach.rows));
            s.config.d_model = pick_width(96, {512, 520});
            s.config.ffn_dim = pick_width(200, {1376, 2816, 1400});
            break;
        case Op::block:
        case Op::decode: {
            // Mostly short; some long (a block of up to 512 tokens; a decode
            // of 300+ steps after its prefill), then with narrow widths so
            // the case stays cheap.
            const bool long_run = weighted<int>({{9, 0}, {1, 1}}) == 1;
            s.T = cap(!long_run ? pick_rows(reach.rows)
                                : op == Op::block ? one_of<int64_t>(64, 130, 257, 512) : one_of<int64_t>(317, 40, 129, 333));
            pick_heads(s, long_run ? 4 : 8);
            s.config.head_dim = pick_head_dim(long_run ? 32 : reach.head_dim_max);
            s.config.d_model = *rc::gen::inRange<int64_t>(4, long_run ? 49 : 97);
            s.config.ffn_dim = *rc::gen::inRange<int64_t>(4, long_run ? 97 : 193);
            s.config.rope_layout = one_of(RopeLayout::neox, RopeLayout::interleaved);
            s.config.rope_theta = pick_theta();
            s.config.qk_norm = *rc::gen::arbitrary<bool>();
            s.config.norm_eps = one_of(1e-5, 1e-6);
            s.pos = pick_position();
            s.shape = weighted<CaseSpec::Shape>({{5, CaseSpec::Shape::contiguous}, {1, CaseSpec::Shape::gaps}});
            if (op == Op::decode)
                s.prefill = long_run ? one_of<int64_t>(0, 7, s.T / 2) : *rc::gen::inRange<int64_t>(0, s.T + 1);
            break;
        }
    }
    pick_inputs(s);
    // Scores past ±5e4 (a kernel's "-inf" of -5e4 then masks real keys,
    // flashinfer #4267): q and k at magnitude 300 make scores ~N(0, 9e4²).
    if (op_info(op).uses(kPaged) && weighted<int>({{8, 0}, {1, 1}})) s.mag = 300.0;
    if (op_info(op).uses(kRope)) pick_rope_extras(s);
    if (op_info(op).uses(kResidual)) pick_qk_gain(s);
    if (op_info(op).uses(kQkvBias)) pick_qkv_bias(s);
    if (op_info(op).uses(kWindow)) pick_window(s);
    if (op_info(op).uses(kSoftcap)) pick_softcap(s);
    if (op_info(op).uses(kSinks)) pick_sinks(s);
    if (op_info(op).uses(kNormPlusOne)) pick_norm_plus_one(s);
    if (op_info(op).uses(kFp8Cache)) pick_kv_cache(s);
    if (op_info(op).uses(kGeglu)) pick_hidden_act(s);
    if (op_info(op).uses(kAttnScale)) pick_attn_scale(s);
    if (op_info(op).uses(kSandwichNorm)) pick_sandwich_norm(s);
    if (op_info(op).uses(kNope)) pick_nope(s);
    if (op_info(op).uses(kChunk)) pick_chunk(s);
    if (pinned) pin(s, *pinned);
    if (st.real) take_layer(s, st.real);
    return s;
}

// ---- canonical ids -----------------------------------------------------------------

std::string num(double v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
}

using Fields = std::vector<std::pair<std::string, std::string>>;

// The RoPE fields of an id beyond theta, each only when not the default: the
// rotated width, and a scaling's type and the parameters that type takes
// (conform/config.h's table, by their id names).
void rope_extras(const CaseSpec& s, Fields& f) {
    if (s.config.rotary_dim != 0) f.emplace_back("rd", std::to_string(s.config.rotary_dim));
    const RopeScaling& sc = s.config.rope_scaling;
    if (sc.type == RopeScalingType::none) return;
    f.emplace_back("scaling", to_string(sc.type));
    BlockConfig c;
    c.rope_scaling = sc;
    for_each_field(c, [&](const ConfigField& cf, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, double>) {
            if (cf.applies(sc.type)) f.emplace_back(cf.id, num(v));
        } else if constexpr (std::is_same_v<V, int64_t>) {
            if (cf.applies(sc.type)) f.emplace_back(cf.id, std::to_string(v));
        }
    });
}

// The positions' shape, only when not contiguous (so older ids still parse to the same case).
void shape_field(const CaseSpec& s, Fields& f) {
    if (s.shape != CaseSpec::Shape::contiguous) f.emplace_back("positions", to_string(s.shape));
}

// The sliding window, the soft-cap and the sinks, only when there is one (older ids parse to the same case).
void window_field(const CaseSpec& s, Fields& f) {
    if (s.config.sliding_window > 0) f.emplace_back("window", std::to_string(s.config.sliding_window));
    if (s.config.attention_chunk_size > 0) f.emplace_back("chunk", std::to_string(s.config.attention_chunk_size));
    if (s.config.attn_logit_softcapping > 0) f.emplace_back("softcap", num(s.config.attn_logit_softcapping));
    if (s.config.attn_sinks) f.emplace_back("sinks", "1");
    if (s.config.attn_scale > 0) f.emplace_back("attn_scale", num(s.config.attn_scale));
}

// An FP8 cache, only when there is one (older ids parse to the same case).
void kv_cache_field(const CaseSpec& s, Fields& f) {
    if (s.config.kv_cache_dtype == KvCacheDtype::none) return;
    f.emplace_back("kv_dtype", to_string(s.config.kv_cache_dtype));
    f.emplace_back("kv_scale", s.config.kv_scale_per_head ? "head" : "tensor");
}

// Gemma's norms, only when on (older ids parse to the same case).
void norm_field(const CaseSpec& s, Fields& f) {
    if (s.config.norm_plus_one) f.emplace_back("plus_one", "1");
    if (s.config.sandwich_norm) f.emplace_back("sandwich", "1");
    if (s.config.nope) f.emplace_back("nope", "1");
}

// GeGLU, only when on (older ids parse to the same case).
void act_field(const CaseSpec& s, Fields& f) {
    if (s.config.hidden_act != HiddenAct::silu) f.emplace_back("act", to_string(s.config.hidden_act));
}

bool is_rope_extra(const std::string& k) {
    bool extra = k == "rd" || k == "scaling";
    for_each_field(BlockConfig{}, [&](const ConfigField& cf, const auto&) { extra = extra || (cf.is_scaling_param() && k == cf.id); });
    return extra;
}

Fields fields(const CaseSpec& s) {
    auto I = [](int64_t v) { return std::to_string(v); };
    Fields f;
    auto add = [&](const char* k, std::string v) { f.emplace_back(k, std::move(v)); };
    switch (s.op) {
        case Op::rmsnorm: add("T", I(s.T)); add("D", I(s.config.d_model)); add("eps", num(s.config.norm_eps)); norm_field(s, f); break;
        case Op::rope:
            add("T", I(s.T)); add("n", I(s.config.n_heads)); add("hd", I(s.config.head_dim));
            add("layout", to_string(s.config.rope_layout)); add("theta", num(s.config.rope_theta)); rope_extras(s, f); add("pos", I(s.pos));
            shape_field(s, f);
            break;
        case Op::qk_norm: add("T", I(s.T)); add("n", I(s.config.n_heads)); add("hd", I(s.config.head_dim)); add("eps", num(s.config.norm_eps)); norm_field(s, f); break;
        case Op::attention:
            add("T", I(s.T)); add("S", I(s.S)); add("H", I(s.config.n_heads)); add("KV", I(s.config.n_kv_heads));
            add("hd", I(s.config.head_dim)); add("qpos", I(s.pos)); add("kpos", I(s.kpos));
            shape_field(s, f);
            window_field(s, f);
            break;
        case Op::swiglu: add("T", I(s.T)); add("D", I(s.config.d_model)); add("F", I(s.config.ffn_dim)); act_field(s, f); break;
        case Op::paged_attention: {
            auto list = [&](const std::vector<int64_t>& v) {
                std::string o;
                for (int64_t x : v) o += (o.empty() ? "" : "/") + I(x);
                return o;
            };
            add("H", I(s.config.n_heads)); add("KV", I(s.config.n_kv_heads)); add("hd", I(s.config.head_dim));
            add("P", I(s.config.page_size)); add("kv", list(s.kv_lens)); add("q", list(s.q_lens));
            if (s.pool != 3) add("pool", I(s.pool));
            window_field(s, f);
            kv_cache_field(s, f);
            break;
        }
        case Op::block:
        case Op::decode:
            add("T", I(s.T)); add("D", I(s.config.d_model)); add("H", I(s.config.n_heads)); add("KV", I(s.config.n_kv_heads));
            add("hd", I(s.config.head_dim)); add("F", I(s.config.ffn_dim)); add("layout", to_string(s.config.rope_layout));
            add("theta", num(s.config.rope_theta)); rope_extras(s, f); add("qk_norm", s.config.qk_norm ? "1" : "0"); add("eps", num(s.config.norm_eps));
            add("pos", I(s.pos));
            shape_field(s, f);
            if (s.op == Op::decode) add("prefill", I(s.prefill));
            if (s.qk_gain != 1.0) add("qk_gain", num(s.qk_gain));
            if (s.config.qkv_bias) add("bias", "1");
            if (s.bias_mean != 0.0) add("bias_mean", num(s.bias_mean));
            window_field(s, f);
            norm_field(s, f);
            act_field(s, f);
            if (s.op == Op::decode) kv_cache_field(s, f);
            break;
    }
    add("mag", num(s.mag));
    add("outliers", I(s.outliers));
    add("seed", std::to_string(s.seed));
    if (s.layer >= 0) {
        add("layer", I(s.layer));
        if (s.model_inputs) add("inputs", "model");
    }
    return f;
}

}  // namespace

const char* to_string(CaseSpec::Shape s) {
    switch (s) {
        case CaseSpec::Shape::contiguous: return "contiguous";
        case CaseSpec::Shape::gaps: return "gaps";
        case CaseSpec::Shape::restarts: return "restarts";
        case CaseSpec::Shape::shuffled: return "shuffled";
    }
    return "?";
}

std::vector<int64_t> positions_of(int64_t start, int64_t n, CaseSpec::Shape shape) {
    std::vector<int64_t> p(static_cast<size_t>(std::max<int64_t>(n, 0)));
    int64_t gap = 0;
    int64_t k = 1;
    if (shape == CaseSpec::Shape::shuffled && n > 1) {
        k = (n / 2) | 1;  // odd, and stepped until coprime with n
        while (std::gcd(k, n) != 1) k += 2;
    }
    for (int64_t i = 0; i < n; ++i) {
        switch (shape) {
            case CaseSpec::Shape::contiguous: p[i] = start + i; break;
            case CaseSpec::Shape::gaps: gap += (i * 7) % 3; p[i] = start + i + gap; break;
            case CaseSpec::Shape::restarts: p[i] = start + i % ((n + 1) / 2); break;
            case CaseSpec::Shape::shuffled: p[i] = start + (i * k) % n; break;
        }
    }
    return p;
}

rc::Gen<CaseSpec> spec_gen(const Stream& s) {
    return rc::gen::exec([s] { return make(s); });
}

rc::Gen<CaseSpec> spec_gen(Op op, const std::optional<BlockConfig>& pin) { return spec_gen(Stream{op, 0, pin, {}, 0}); }

std::string canonical_id(const CaseSpec& s) {
    std::string id = std::string(to_string(s.op)) + "(";
    bool first = true;
    for (const auto& [k, v] : fields(s)) {
        id += (first ? "" : ",") + k + "=" + v;
        first = false;
    }
    return id + ")";
}

namespace {

// A scaling parameter's id field (conform/config.h's table) into sc; false
// when k names none. std::stod / std::stoll throw on a value that is not a number.
bool scaling_param(const std::string& k, const std::string& v, RopeScaling& sc) {
    BlockConfig c;
    c.rope_scaling = sc;
    bool found = false;
    for_each_field(c, [&](const ConfigField& cf, auto& field) {
        using V = std::decay_t<decltype(field)>;
        if (!cf.is_scaling_param() || k != cf.id) return;
        if constexpr (std::is_same_v<V, double>) field = std::stod(v), found = true;
        else if constexpr (std::is_same_v<V, int64_t>) field = std::stoll(v), found = true;
    });
    if (found) sc = c.rope_scaling;
    return found;
}

}  // namespace

std::optional<CaseSpec> parse_case_id(const std::string& id, std::string* error) {
    auto fail = [&](const std::string& msg) -> std::optional<CaseSpec> {
        if (error) *error = "case id '" + id + "': " + msg;
        return std::nullopt;
    };
    const auto open = id.find('(');
    if (open == std::string::npos || id.empty() || id.back() != ')') return fail("expected op(key=value,...)");
    const auto op = parse_op(id.substr(0, open));
    if (!op) return fail("unknown op '" + id.substr(0, open) + "'");
    CaseSpec s;
    s.op = *op;
    std::map<std::string, std::string> kv;
    std::stringstream body(id.substr(open + 1, id.size() - open - 2));
    std::string item;
    while (std::getline(body, item, ',')) {
        const auto eq = item.find('=');
        if (eq == std::string::npos) return fail("field '" + item + "' is not key=value");
        kv[item.substr(0, eq)] = item.substr(eq + 1);
    }
    // Every field the op's id carries must be present, and nothing else.
    for (const auto& [k, v] : fields(s)) {
        (void)v;
        if (!kv.count(k)) return fail("missing field '" + k + "'");
    }
    // Fields that belong to one convention: refused on an op without it.
    static const std::pair<const char*, Convention> kOwned[] = {
        {"bias", kQkvBias}, {"bias_mean", kQkvBias}, {"window", kWindow}, {"sinks", kSinks},
        {"plus_one", kNormPlusOne}, {"softcap", kSoftcap}, {"P", kPaged}, {"kv", kPaged}, {"q", kPaged},
        {"pool", kPaged}, {"qk_gain", kResidual}, {"kv_dtype", kFp8Cache}, {"kv_scale", kFp8Cache}, {"act", kGeglu}, {"attn_scale", kAttnScale},
        {"sandwich", kSandwichNorm}, {"nope", kNope}, {"chunk", kChunk}};
    for (const auto& [k, v] : kv)
        for (const auto& [field, bit] : kOwned)
            if (k == field && !op_info(s.op).uses(bit))
                return fail("field '" + k + "' does not apply to op " + std::string(to_string(s.op)));
    // The conventions an id carries as 0 / 1 (anything else is refused by name).
    auto switch_field = [](const std::string& k) -> bool BlockConfig::* {
        static const std::pair<const char*, bool BlockConfig::*> kSwitches[] = {
            {"sinks", &BlockConfig::attn_sinks}, {"plus_one", &BlockConfig::norm_plus_one},
            {"sandwich", &BlockConfig::sandwich_norm}, {"nope", &BlockConfig::nope}};
        for (const auto& [name, field] : kSwitches)
            if (k == name) return field;
        return nullptr;
    };
    try {
        for (const auto& [k, v] : kv) {
            if (k == "T") s.T = std::stoll(v);
            else if (k == "S") s.S = std::stoll(v);
            else if (k == "n" || k == "H") s.config.n_heads = std::stoll(v);
            else if (k == "KV") s.config.n_kv_heads = std::stoll(v);
            else if (k == "hd") s.config.head_dim = std::stoll(v);
            else if (k == "D") s.config.d_model = std::stoll(v);
            else if (k == "F") s.config.ffn_dim = std::stoll(v);
            else if (k == "layout") {
                auto l = parse_rope_layout(v);
                if (!l) return fail("layout must be neox or interleaved, found '" + v + "'");
                s.config.rope_layout = *l;
            } else if (k == "theta") s.config.rope_theta = std::stod(v);
            else if (k == "qk_norm") s.config.qk_norm = v == "1";
            else if (k == "bias") s.config.qkv_bias = v == "1";
            else if (k == "window") s.config.sliding_window = std::stoll(v);
            else if (k == "chunk") {
                s.config.attention_chunk_size = std::stoll(v);
                if (s.config.attention_chunk_size < 1) return fail("chunk must be a count of positions >= 1, found '" + v + "'");
            }
            else if (bool BlockConfig::*flag = switch_field(k)) {
                if (v != "0" && v != "1") return fail(k + " must be 0 or 1, found '" + v + "'");
                s.config.*flag = v == "1";
            }
            else if (k == "attn_scale") {
                s.config.attn_scale = std::stod(v);
                if (!(s.config.attn_scale > 0) || !std::isfinite(s.config.attn_scale))
                    return fail("attn_scale must be a number > 0, found '" + v + "'");
            }
            else if (k == "act") {
                const auto a = parse_hidden_act(v);
                if (!a) return fail("act must be silu or gelu_tanh, found '" + v + "'");
                s.config.hidden_act = *a;
            }
            else if (k == "softcap") {
                s.config.attn_logit_softcapping = std::stod(v);
                if (!(s.config.attn_logit_softcapping >= 0) || !std::isfinite(s.config.attn_logit_softcapping))
                    return fail("softcap must be a number >= 0, found '" + v + "'");
            }
            else if (k == "kv_dtype") {
                const auto d = parse_kv_cache_dtype(v);
                if (!d || *d == KvCacheDtype::none) return fail("kv_dtype must be fp8_e4m3 or fp8_e5m2, found '" + v + "'");
                s.config.kv_cache_dtype = *d;
            }
            else if (k == "kv_scale") {
                if (v != "head" && v != "tensor") return fail("kv_scale must be head or tensor, found '" + v + "'");
                s.config.kv_scale_per_head = v == "head";
            }
            else if (k == "bias_mean") s.bias_mean = std::stod(v);
            else if (k == "eps") s.config.norm_eps = std::stod(v);
            else if (k == "pos" || k == "qpos") s.pos = std::stoll(v);
            else if (k == "kpos") s.kpos = std::stoll(v);
            else if (k == "P") s.config.page_size = std::stoll(v);
            else if (k == "pool") {
                s.pool = std::stoll(v);
                if (s.pool < 1) return fail("pool must be >= 1 (pages per page the batch needs), found '" + v + "'");
            }
            else if (k == "kv" || k == "q") {
                std::vector<int64_t>& list = k == "kv" ? s.kv_lens : s.q_lens;
                std::stringstream items(v);
                std::string one;
                while (std::getline(items, one, '/')) {
                    size_t used = 0;
                    const int64_t n = std::stoll(one, &used);
                    if (used != one.size() || n < 0) return fail("field '" + k + "' must be '/'-separated counts >= 0, found '" + v + "'");
                    list.push_back(n);
                }
            }
            else if (k == "prefill") s.prefill = std::stoll(v);
            else if (k == "mag") s.mag = std::stod(v);
            else if (k == "qk_gain") {
                s.qk_gain = std::stod(v);
                if (!(s.qk_gain > 0) || !std::isfinite(s.qk_gain)) return fail("qk_gain must be a positive number, found '" + v + "'");
            }
            else if (k == "outliers") s.outliers = std::stoll(v);
            else if (k == "seed") s.seed = std::stoull(v);
            else if (k == "layer") {
                s.layer = std::stoll(v);
                if (s.layer < 0) return fail("layer must be >= 0, found '" + v + "'");
            } else if (k == "inputs") {
                if (v != "model") return fail("inputs must be model (drawn inputs have no field), found '" + v + "'");
                s.model_inputs = true;
            }
            else if (k == "positions") {
                // A block's positions are one sequence: increasing, holes allowed.
                const bool any_order = !op_info(s.op).uses(kResidual);
                if (op_info(s.op).positions.empty()) return fail("field 'positions' does not apply to op " + std::string(to_string(s.op)));
                bool found = false;
                for (auto sh : {CaseSpec::Shape::gaps, CaseSpec::Shape::restarts, CaseSpec::Shape::shuffled})
                    if (v == to_string(sh) && (any_order || sh == CaseSpec::Shape::gaps)) s.shape = sh, found = true;
                if (!found)
                    return fail(std::string("positions must be ") + (any_order ? "gaps, restarts or shuffled" : "gaps (a block's are increasing)") +
                                ", found '" + v + "'");
            }
            else if (k == "rd") s.config.rotary_dim = std::stoll(v);
            else if (k == "scaling") {
                auto t = parse_rope_scaling_type(v);
                if (!t || *t == RopeScalingType::none)
                    return fail("scaling must be linear, llama3, yarn or dynamic, found '" + v + "'");
                s.config.rope_scaling.type = *t;
            } else if (!scaling_param(k, v, s.config.rope_scaling)) {
                return fail("unknown field '" + k + "'");
            }
        }
    } catch (const std::exception&) {
        return fail("a field's value is not a number");
    }
    // The RoPE extras: exactly those the case's id would carry (a scaling's
    // parameters, none of another type's), and values that make a RoPE.
    {
        Fields extras;
        const bool rope = op_info(s.op).uses(kRope);
        if (rope) rope_extras(s, extras);
        for (const auto& [k, v] : extras)
            if (!kv.count(k))
                return fail("missing field '" + k + "' (scaling=" + to_string(s.config.rope_scaling.type) + " needs it)");
        for (const auto& [k, v] : kv) {
            if (!is_rope_extra(k)) continue;
            bool printed = false;
            for (const auto& e : extras) printed = printed || e.first == k;
            if (!printed)
                return fail("field '" + k + "' does not apply to " +
                            (rope ? "scaling=" + std::string(to_string(s.config.rope_scaling.type))
                                  : "op " + std::string(to_string(s.op))));
        }
        if (s.config.head_dim % 2 == 0 && s.config.head_dim > 0)
            if (auto bad = rope_config_problem(s.config)) return fail(bad->first + ": " + bad->second);
    }
    if (s.model_inputs && s.layer < 0) return fail("inputs=model needs layer=N (a checkpoint's layer)");
    if (kv.count("kv_dtype") != kv.count("kv_scale"))
        return fail("kv_dtype and kv_scale come together (an FP8 cache and its scales' layout)");
    if (op_info(s.op).uses(kPaged)) {
        if (s.kv_lens.empty() || s.kv_lens.size() != s.q_lens.size())
            return fail("kv and q must list the same number (>= 1) of sequences, found " + std::to_string(s.kv_lens.size()) +
                        " and " + std::to_string(s.q_lens.size()));
        if (s.config.page_size < 1) return fail("P (page_size) must be >= 1");
        if (pool_pages(s) * s.config.page_size * s.config.n_kv_heads * s.config.head_dim > (int64_t(1) << 28))
            return fail("case too large (its pool of pages)");
        batch_totals(s);
    }
    if (!op_info(s.op).uses(kHeads)) s.config.n_kv_heads = s.config.n_heads;  // heads in x only (rope, qk_norm): no kv heads
    if (s.T < 1 || s.S < 1 || s.config.n_heads < 1 || s.config.n_kv_heads < 1 || s.config.head_dim < 1 || s.config.d_model < 1 || s.config.ffn_dim < 1)
        return fail("sizes must be >= 1");
    if (s.T * std::max<int64_t>(s.config.d_model, s.config.n_heads * s.config.head_dim) > (int64_t(1) << 28)) return fail("case too large");
    return s;
}

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
void fill_pool(const std::vector<PoolPage>& pages, int64_t P, int64_t W, double mag, Tensor& kc, Tensor& vc) {
    auto one = [&](size_t p) {
        const PoolPage& g = pages[p];
        float* k = kc.data.data() + static_cast<int64_t>(p) * P * W;
        float* v = vc.data.data() + static_cast<int64_t>(p) * P * W;
        // Streams of one splitmix64 sequence started far apart: seeds hashed from (sequence, page, k or v).
        Rng rk{Rng{g.seed ^ (static_cast<uint64_t>(g.index) * 2 + 1) * 0xD1B54A32D192ED03ull}.next()};
        Rng rv{Rng{g.seed ^ (static_cast<uint64_t>(g.index) * 2 + 2) * 0xD1B54A32D192ED03ull}.next()};
        for (int64_t i = 0; i < g.used * W; ++i) k[i] = static_cast<float>(rk.ziggurat() * mag);
        for (int64_t i = 0; i < g.used * W; ++i) v[i] = static_cast<float>(rv.ziggurat());
        for (int64_t row = g.used; row < P; ++row) {
            const float x = poison(static_cast<int64_t>(p) * P + row);
            std::fill_n(k + row * W, W, x);
            std::fill_n(v + row * W, W, x);
        }
    };
    const int64_t elements = static_cast<int64_t>(pages.size()) * P * W;
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

}  // namespace

CaseSpec spec_at(Op op, const BlockConfig& c, int64_t T, int64_t S, int64_t start, uint64_t seed) {
    CaseSpec s;
    s.op = op;
    s.T = T;
    s.S = S;
    s.config = c;
    s.kpos = start;
    s.pos = op == Op::attention ? start + S - T : start;
    s.seed = seed;
    if (op_info(op).uses(kPaged)) {  // one sequence of S keys, its last T the queries, in pages of 16 unless the config says
        if (s.config.page_size <= 0) s.config.page_size = 16;
        s.kv_lens = {S};
        s.q_lens = {std::min(T, S)};
        s.T = s.q_lens[0];
    }
    return s;
}

double score_scale(const CaseSpec& s) {
    const double g = op_info(s.op).uses(kResidual) ? s.qk_gain : s.mag;
    return g * g;
}

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
        case Op::paged_attention: {
            // The pool's pages in a random order; sequence b takes the next
            // ceil(kv_b / P) of them. Every row no sequence's key or value is
            // written into is poison.
            const int64_t P = s.config.page_size, pages = pool_pages(s), W = s.config.n_kv_heads * s.config.head_dim;
            std::vector<int64_t> order(static_cast<size_t>(pages));
            std::iota(order.begin(), order.end(), int64_t{0});
            for (int64_t i = pages - 1; i > 0; --i) std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(r.below(i + 1))]);
            c.inputs["q"] = activations(r, s.T, s.config.n_heads * s.config.head_dim, s.mag, s.outliers);
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
            Tensor kc(pages * P, W), vc(pages * P, W);
            fill_pool(fill, P, W, s.mag, kc, vc);
            c.inputs["k_cache"] = std::move(kc);
            c.inputs["v_cache"] = std::move(vc);
            break;
        }
        case Op::swiglu:
            c.inputs["x"] = model ? act("ffn_in", 0, s.T) : activations(r, s.T, s.config.d_model, s.mag, s.outliers);
            c.inputs["w1"] = weight_or("w1", [&] { return weight(r, s.config.d_model, s.config.ffn_dim); });
            c.inputs["w3"] = weight_or("w3", [&] { return weight(r, s.config.d_model, s.config.ffn_dim); });
            c.inputs["w2"] = weight_or("w2", [&] { return weight(r, s.config.ffn_dim, s.config.d_model); });
            break;
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
    return c;
}

namespace {

// A paged batch with these sequences.
CaseSpec with_batch(CaseSpec s, std::vector<int64_t> kv, std::vector<int64_t> q) {
    s.kv_lens = std::move(kv);
    s.q_lens = std::move(q);
    batch_totals(s);
    return s;
}

// Smaller batches than s, most reduced first: a sequence dropped; a
// sequence a page shorter (its last page's length kept: the boundary a bug
// may need), or down to that last page alone; its queries down to one, or
// one fewer; pages one size larger (fewer of them). Every candidate has a
// query somewhere, and no sequence more queries than keys.
std::vector<CaseSpec> smaller_batches(const CaseSpec& s) {
    std::vector<CaseSpec> out;
    const int64_t P = s.config.page_size, B = static_cast<int64_t>(s.kv_lens.size());
    auto add = [&](std::vector<int64_t> kv, std::vector<int64_t> q) {
        if (std::all_of(q.begin(), q.end(), [](int64_t n) { return n == 0; })) return;
        for (size_t b = 0; b < kv.size(); ++b) q[b] = std::min(q[b], std::max<int64_t>(kv[b], std::min<int64_t>(q[b], 1)));
        out.push_back(with_batch(s, std::move(kv), std::move(q)));
    };
    for (int64_t b = 0; b < B && B > 1; ++b) {
        auto kv = s.kv_lens, q = s.q_lens;
        kv.erase(kv.begin() + b);
        q.erase(q.begin() + b);
        add(kv, q);
    }
    for (int64_t b = 0; b < B; ++b) {
        const int64_t kv_b = s.kv_lens[static_cast<size_t>(b)];
        if (kv_b <= P) continue;
        const int64_t tail = (kv_b - 1) % P + 1;  // its last page's rows
        for (int64_t shorter : {tail, kv_b - P}) {
            if (shorter == kv_b - P && shorter == tail) break;  // two pages: the one candidate already added
            auto kv = s.kv_lens;
            kv[static_cast<size_t>(b)] = shorter;
            add(kv, s.q_lens);
        }
    }
    for (int64_t b = 0; b < B; ++b) {
        const int64_t q_b = s.q_lens[static_cast<size_t>(b)];
        if (q_b <= 1) continue;
        for (int64_t fewer : {int64_t{1}, q_b - 1}) {
            if (fewer == q_b - 1 && fewer == 1) break;  // two queries: the one candidate already added
            auto q = s.q_lens;
            q[static_cast<size_t>(b)] = fewer;
            add(s.kv_lens, q);
        }
    }
    for (int64_t larger : kPageSizes)
        if (larger > P) {
            CaseSpec t = s;
            t.config.page_size = larger;
            out.push_back(std::move(t));
            break;
        }
    return out;
}

// RapidCheck shrinks a batch by dropping sequences and by each sequence's
// drawn choices, which need not make it shorter: a length drawn among
// 41..599 shrinks to 41, three pages of 16. Then the batch itself, greedily:
// the first smaller batch that still fails is taken, until none does (or the
// limits are reached), so a bug that needs two sequences of one page each
// ends there.
void shrink_batch(Shrunk& out, const std::function<bool(const CaseSpec&)>& still_fails, const ShrinkLimits& limits,
                  const std::function<double()>& elapsed) {
    for (bool progressed = true; progressed;) {
        progressed = false;
        for (const CaseSpec& candidate : smaller_batches(out.spec)) {
            if (out.tried >= limits.max_tries) return void(out.stopped = Shrunk::Stop::tries);
            if (limits.max_seconds > 0 && elapsed() > limits.max_seconds) return void(out.stopped = Shrunk::Stop::time);
            // Only what is smaller: fewer sequences, pages or queries.
            if (candidate.kv_lens.size() == out.spec.kv_lens.size() && pages_needed(candidate) >= pages_needed(out.spec) &&
                candidate.T >= out.spec.T && candidate.S >= out.spec.S)
                continue;
            ++out.tried;
            if (still_fails(candidate)) {
                out.spec = candidate;
                ++out.steps;
                progressed = true;
                break;
            }
        }
    }
}

rc::Random random_for(Op op, uint64_t seed, int index) {
    return rc::Random(seed * 1000003ull + static_cast<uint64_t>(op) * 7919ull + static_cast<uint64_t>(index));
}
// RapidCheck's size grows over a run (small cases first); so do ours.
int size_for(int index) { return std::min(100, 10 + index); }
}  // namespace

CaseSpec draw(const Stream& s, int index) {
    return spec_gen(s)(random_for(s.op, s.seed, index), size_for(index)).value();
}

Shrunk shrink(const Stream& s, int index, const std::function<bool(const CaseSpec&)>& still_fails,
              const ShrinkLimits& limits) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto current = spec_gen(s)(random_for(s.op, s.seed, index), size_for(index));
    Shrunk out{current.value(), 0, 0};
    bool progressed = true;
    while (progressed && out.stopped == Shrunk::Stop::done) {
        progressed = false;
        auto shrinks = current.shrinks();
        while (auto next = shrinks.next()) {
            if (out.tried >= limits.max_tries) {
                out.stopped = Shrunk::Stop::tries;
                break;
            }
            if (limits.max_seconds > 0 && elapsed() > limits.max_seconds) {
                out.stopped = Shrunk::Stop::time;
                break;
            }
            ++out.tried;
            const CaseSpec candidate = next->value();
            if (still_fails(candidate)) {
                current = std::move(*next);
                out.spec = candidate;
                ++out.steps;
                progressed = true;
                break;
            }
        }
    }
    if (op_info(out.spec.op).uses(kPaged) && out.stopped == Shrunk::Stop::done)
        shrink_batch(out, still_fails, limits, elapsed);
    out.seconds = elapsed();
    return out;
}

}  // namespace conform::gen

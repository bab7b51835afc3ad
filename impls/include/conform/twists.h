// conform/twists.h — the twist record: one row per served twist (a convention
// a served model changes in an op it shares with the Llama block), holding
// every fact about it (PyTorch's OpInfo, for conventions). Every consumer
// loops over the rows: the config's codecs (worker JSON, fixture attributes,
// case ids, the report), the flags, validation, the generator's draws, what
// an implementation is offered (its declared twists), coverage, diagnosis
// (each twist's "ignored" bug and its bugs as config edits), the generated
// mutants, the worker protocol, plugin ABI 2.0's named parameters, the
// Python package (through `conform list --twists --json`) and docs/twists.md.
//
// A new twist is a BlockConfig member (config.h), one row below, and its
// meaning in the kernels, the reference and the workers: ARCHITECTURE.md,
// "A new twist".
//
// Header-only and on the config alone: implementations may read it too.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "conform/config.h"
#include "conform/ops.h"

namespace conform {

// What an op's result depends on: what a kernel can get wrong, and so what
// diagnosis tries, generators vary, coverage counts and implementations declare.
enum Convention : uint32_t {
    kRope = 1u << 0,      // rotary embedding: layout, theta, scaling, rotary_dim
    kHeads = 1u << 1,     // query heads grouped over kv heads (MHA / GQA / MQA)
    kCausal = 1u << 2,    // a causal mask by position, softmax, 1/sqrt(head_dim)
    kRmsNorm = 1u << 3,   // RMSNorm: eps inside the root, a weight per channel
    kQkNorm = 1u << 4,    // Qwen3's per-head RMSNorm of q and k (the block: iff config.qk_norm)
    kSwiglu = 1u << 5,    // silu(x @ w1) * (x @ w3), then @ w2
    kResidual = 1u << 6,  // the residual stream: h = x + ..., out = h + ...
    kKvCache = 1u << 7,   // decode: tokens one at a time through a cache of rotated k and v
    kPaged = 1u << 8,     // a batch of ragged sequences over a paged KV cache (PagedIndex)
    kQkvBias = 1u << 9,   // Qwen2's projection biases (the block: iff config.qkv_bias)
    kWindow = 1u << 10,   // sliding-window attention (config.sliding_window > 0)
    kSoftcap = 1u << 11,  // logit soft-capping (config.attn_logit_softcapping > 0)
    kSinks = 1u << 12,    // attention sinks (config.attn_sinks: input sinks [1, H])
    kNormPlusOne = 1u << 13,  // Gemma's RMSNorm: * (1 + w) (config.norm_plus_one)
    kFp8Cache = 1u << 14,     // an FP8 KV cache (config.kv_cache_dtype: inputs k_scale, v_scale)
    kGeglu = 1u << 15,        // Gemma's GeGLU: the FFN gate through gelu_tanh, not silu (config.hidden_act)
    kAttnScale = 1u << 16,    // a score scale other than 1/sqrt(head_dim) (config.attn_scale: query_pre_attn_scalar)
    kSandwichNorm = 1u << 17, // each sublayer's output normed before the residual add (config.sandwich_norm: Gemma 2/3)
    kNope = 1u << 18,         // a layer without RoPE (config.nope: SmolLM3's, Llama 4's NoPE layers)
    kChunk = 1u << 19,        // chunked attention (config.attention_chunk_size: Llama 4)
    kMoeRoute = 1u << 20,     // a mixture-of-experts router: scores, top-k, weights (config.moe_*)
    kMoeExperts = 1u << 21,   // a mixture-of-experts' experts and their combine (config.moe_*)
    kMla = 1u << 22,          // latent attention: keys and values through kv_b_proj, one RoPE key shared by the heads
};

// How a twist's value is written and bounded.
//   toggle  off or on (bool; spelled as the row says, 0 / 1 unless)
//   count   a whole number, 0 (off) or in [lo, hi]
//   number  a real number, 0 (off) or in [lo, hi], finite
//   choice  one of its names, the first is off
enum class TwistKind { toggle, count, number, choice };

inline const char* to_string(TwistKind k) {
    switch (k) {
        case TwistKind::toggle: return "toggle";
        case TwistKind::count: return "count";
        case TwistKind::number: return "number";
        case TwistKind::choice: return "choice";
    }
    return "?";
}

// The field a row names, as a typed reference into a config (so the codecs'
// overloads per type apply to it as to every other field).
using TwistField = std::variant<bool& (*)(BlockConfig&), int64_t& (*)(BlockConfig&), double& (*)(BlockConfig&),
                                HiddenAct& (*)(BlockConfig&), KvCacheDtype& (*)(BlockConfig&),
                                RopeScalingType& (*)(BlockConfig&), MoeScoring& (*)(BlockConfig&),
                                MoeGroupScore& (*)(BlockConfig&)>;

// A draw's picks. The generator implements them with RapidCheck's (so a
// case shrinks toward the first alternative); a row's draw only asks.
struct TwistPicker {
    virtual ~TwistPicker() = default;
    // An index into `weights`, each chosen in proportion to its weight.
    virtual size_t pick(std::initializer_list<int> weights) = 0;
    virtual bool coin() = 0;
    // A whole number in [lo, hi], uniformly (shrinks toward lo).
    virtual int64_t between(int64_t lo, int64_t hi) = 0;
};

// What a row's draw sees of the case drawn so far.
struct TwistDraw {
    Op op;
    const BlockConfig& config;  // the case's config as drawn so far (rows drawn in draw_rank order)
    int64_t keys;       // the keys a query can reach: attention S, a paged batch's longest sequence, the block's T
    int64_t reach;      // the position after the last query: attention S + kpos, the block T + pos (paged: keys)
    int64_t step;       // the tile or page kernels step by: 64, or the paged cache's page size
    double sigma;       // the scale of the case's attention scores
    TwistPicker& picker;
    double tensor_mean = 0.0;  // out: the mean of the tensors the twist brings, where its draw sets one
    size_t pick(std::initializer_list<int> w) { return picker.pick(w); }
    bool coin() { return picker.coin(); }
    int64_t between(int64_t lo, int64_t hi) { return picker.between(lo, hi); }
    // one of `n` values, equally likely
    size_t uniform(size_t n) {
        // pick() over n equal weights, as gen's one_of draws it (a single index over n)
        switch (n) {
            case 2: return picker.pick({1, 1});
            case 3: return picker.pick({1, 1, 1});
            case 4: return picker.pick({1, 1, 1, 1});
            case 7: return picker.pick({1, 1, 1, 1, 1, 1, 1});
            default: return 0;
        }
    }
};

// What coverage classes a case's twist by (harness/run/select.cpp gives it the case).
struct TwistSample {
    virtual ~TwistSample() = default;
    virtual const BlockConfig& config() const = 0;
    virtual Op op() const = 0;
    virtual int64_t keys() const = 0;  // the longest context a query of the case reaches
    virtual double sigma() const = 0;  // the scale of its attention scores (1 for a fixture's)
    // An input's values (nullptr where the case has none).
    virtual const std::vector<float>* input(const char* name) const = 0;
    // Whether some (query, key) pair the causal mask shows satisfies `hidden(k_pos, q_pos, param)`.
    virtual bool some_causal_pair(bool (*hidden)(int64_t k_pos, int64_t q_pos, double param), double param) const = 0;
    // The largest |value| / (scale * the format's max) an FP8 cache write
    // sees: above 1, some written value saturates (0 without a cache).
    virtual double cache_saturation() const = 0;
};

// One of the twist's bugs, as the config a kernel with it computes.
struct TwistBug {
    const char* id;  // the bug's name (a hypothesis; a generated mutant carries it)
    // The configs it computes instead of `meant` (none: the bug does not show on it).
    std::vector<BlockConfig> (*as)(const BlockConfig& meant);
    // What a kernel with it did, for the report.
    std::string (*why)(const BlockConfig& meant, const BlockConfig& computed);
    // The mutants that carry it, one per config of `as` (impls/mutants/): "" for none.
    std::vector<const char*> mutants;
};

struct Twist {
    Twist(const char* name_, const char* h5_, const char* id_, const char* flag_, const char* flag_alias_, TwistKind kind_,
          uint32_t convention_, TwistField field_)
        : name(name_), h5(h5_), id(id_), flag(flag_), flag_alias(flag_alias_), kind(kind_), convention(convention_),
          field(field_) {}
    // Its field: the BlockConfig member's name, the worker JSON key and the report's
    // ("rope_scaling.truncate" nests under rope_scaling), its fixture attribute, its case-id key.
    const char* name;
    const char* h5;
    const char* id;
    // The flag that sets it (the configuration flags of every command) and an older spelling.
    const char* flag;
    const char* flag_alias;
    TwistKind kind;
    // The ops that read it: those whose row uses every bit (conform/op_info.h).
    uint32_t convention;
    TwistField field;
    double lo = 0, hi = 0;                 // count, number: an on value's range
    const char* value = "";                // count, number: what a value is ("a count of keys")
    const char* off = "none";              // count, number: what 0 means
    std::vector<const char*> spell;        // toggle: how ids and flags spell off and on ({"0", "1"} when empty)
    // Whether it can be on in a config (kv_scale_per_head: with an FP8 cache; yarn's truncate: under yarn).
    bool (*applies)(const BlockConfig&) = nullptr;
    // Inputs present only when it is on (fixtures/SCHEMA.md), and the id key of their drawn mean.
    std::vector<const char*> tensors;
    const char* mean_id = nullptr;
    const char* summary = "";   // what it computes, one line (docs/twists.md, --help)
    const char* models = "";    // the served models that have it
    const char* lacks = "";     // what an op without it lacks ("no attention to window"): fixture messages
    // Its codec is the config's core (conform/config.h's core fields, ABI 1.0 / 1.1): the row adds the rest.
    bool core = false;
    // The draw: its value (0: off) for a case of an op that reads it; drawn in
    // draw_rank order, after everything else a case draws, so a case with it
    // off is the case its seed drew before it existed. nullptr: drawn with the core (RoPE, QK-norm).
    double (*draw)(TwistDraw&) = nullptr;
    int draw_rank = 0;
    // Coverage: its dimension's name (nullptr: none), the classes of a case
    // (the first: off; none listed: off / on), and which a case is in, as a
    // bitmask over them (nullptr: off / on).
    const char* dim = nullptr;
    std::vector<const char*> classes;
    uint32_t (*classify)(const TwistSample&) = nullptr;
    // Diagnosis: the bug of a kernel that ignores it (the field reset to its default; nullptr: none),
    // whether a generated mutant carries it, and its other bugs as config edits.
    const char* ignored = nullptr;
    std::string (*ignored_why)(const BlockConfig& meant) = nullptr;
    bool ignored_mutant = false;
    std::vector<TwistBug> bugs;
};

namespace twist_detail {

inline std::string num(double v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
}
inline std::string g(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}
inline std::string I(int64_t v) { return std::to_string(v); }

// The whole text as a finite number (at most max_len characters), else nullopt.
inline std::optional<double> finite_number(const std::string& text, size_t max_len) {
    if (text.empty() || text.size() > max_len) return std::nullopt;
    size_t used = 0;
    double v = 0;
    try {
        v = std::stod(text, &used);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (used != text.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

template <class V>
using Ref = V& (*)(BlockConfig&);

// One config edited by f.
template <class F>
std::vector<BlockConfig> edited(const BlockConfig& c, F&& f) {
    BlockConfig e = c;
    f(e);
    return {e};
}

}  // namespace twist_detail

// ---- the table ----------------------------------------------------------------------
// In the order ids write them. A new twist goes at the end, with the next draw_rank.
inline const std::vector<Twist>& twist_table() {
    using namespace twist_detail;
    using K = TwistKind;
    static const std::vector<Twist> table = [] {
        std::vector<Twist> t;

        // ---- the ABI 1.0 / 1.1 core's twists: their codec is the core's, their draw the core's
        {
            Twist w{"qk_norm", "qk_norm", "qk_norm", "--qk-norm", "", K::toggle, kQkNorm | kResidual,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.qk_norm; })};
            w.tensors = {"q_norm", "k_norm"};
            w.summary = "per-head RMSNorm of q and k, before RoPE (weights q_norm, k_norm [hd])";
            w.models = "Qwen3, Gemma 3, OLMo 2";
            w.lacks = "no q and k to norm";
            w.core = true;
            w.ignored = "qk_norm_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("QK-norm skipped although the config has qk_norm (Qwen3: q_norm, k_norm)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"rotary_dim", "rotary_dim", "rd", "", "", K::count, kRope,
                    Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.rotary_dim; })};
            w.lo = 2, w.hi = 1 << 20;
            w.value = "a count of dims", w.off = "the whole head";
            w.summary = "partial rotary: only the first rotary_dim dims of each head are rotated";
            w.models = "GPT-NeoX, Phi, GLM, StableLM";
            w.lacks = "no RoPE";
            w.core = true;
            w.ignored = "partial_rotary_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                return "the whole head rotated (inv_freq over head_dim = " + I(c.head_dim) +
                       "); the config rotates only the first rotary_dim = " + I(c.rotary()) +
                       " dims and passes the rest through";
            };
            t.push_back(std::move(w));
        }
        {
            Twist w{"rope_scaling", "rope_scaling", "scaling", "", "", K::choice, kRope,
                    Ref<RopeScalingType>([](BlockConfig& c) -> RopeScalingType& { return c.rope_scaling.type; })};
            w.summary = "RoPE scaled for long context: linear, llama3, yarn or dynamic NTK (with their parameters)";
            w.models = "Llama 3.1+, Qwen2.5 / Qwen3 long context, gpt-oss, DeepSeek";
            w.lacks = "no RoPE";
            w.core = true;
            w.classes = {"none", "linear", "llama3", "yarn", "dynamic"};
            w.classify = [](const TwistSample& s) { return 1u << static_cast<unsigned>(s.config().rope_scaling.type); };
            w.ignored = "rope_scaling_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                return std::string("rope_scaling ignored or misparsed (`type` vs `rope_type`): plain RoPE, the config says ") +
                       to_string(c.rope_scaling.type) + " scaling with factor " + g(c.rope_scaling.factor);
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }

        // ---- the served twists
        {
            Twist w{"qkv_bias", "qkv_bias", "bias", "--qkv-bias", "", K::toggle, kQkvBias,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.qkv_bias; })};
            w.dim = "qkv bias";
            w.tensors = {"bq", "bk", "bv"};
            w.mean_id = "bias_mean";
            w.summary = "q, k, v = h @ wq + bq, h @ wk + bk, h @ wv + bv (o_proj has no bias)";
            w.models = "Qwen2, Qwen2.5, gpt-oss";
            w.lacks = "no projections to bias";
            // A third of the block's cases, their mean zero, moderate or large
            // (Qwen2's k biases reach tens: a shift a dropped bias cannot hide as noise).
            w.draw = [](TwistDraw& d) {
                if (d.pick({2, 1}) == 0) return 0.0;
                const double means[] = {0.0, 3.0, -8.0};
                d.tensor_mean = means[d.pick({2, 1, 1})];
                return 1.0;
            };
            w.draw_rank = 0;
            w.classes = {"none", "mean ~0", "large mean"};
            w.classify = [](const TwistSample& s) {
                if (!s.config().qkv_bias) return 1u;
                double sum = 0;
                size_t n = 0;
                for (const char* b : {"bq", "bk", "bv"})
                    if (const auto* v = s.input(b))
                        for (float x : *v) sum += x, ++n;
                return std::abs(n ? sum / static_cast<double>(n) : 0.0) < 1.0 ? 2u : 4u;
            };
            w.ignored = "qkv_bias_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("q, k and v projection biases dropped (Qwen2: q_proj, k_proj, v_proj have bias=True; "
                                   "GGUF attn_q.bias ...)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"sliding_window", "sliding_window", "window", "--sliding-window", "", K::count, kWindow,
                    Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.sliding_window; })};
            w.dim = "sliding window";
            w.lo = 1, w.hi = int64_t{1} << 40;
            w.value = "a count of keys";
            w.summary = "W: a query sees its last W keys, its own included (k_pos > q_pos - W)";
            w.models = "Mistral, Gemma 2/3 (sliding layers), gpt-oss, Qwen2 (max_window_layers)";
            w.lacks = "no attention to window";
            // A quarter of the cases, where kernels break: one key (the
            // query's own), half the context, one short of it, equal, one past
            // (where it no longer binds), and the tiles and pages kernels step by.
            w.draw = [](TwistDraw& d) {
                if (d.pick({3, 1}) == 0) return 0.0;
                const int64_t v[] = {1, d.keys / 2, d.keys - 1, d.keys, d.keys + 1, d.step, d.step + 1};
                return static_cast<double>(std::max<int64_t>(1, v[d.uniform(7)]));
            };
            w.draw_rank = 1;
            w.classes = {"none", "W < keys", "W >= keys"};
            w.classify = [](const TwistSample& s) {
                const int64_t W = s.config().sliding_window;
                return W <= 0 ? 1u : W < s.keys() ? 2u : 4u;
            };
            w.ignored = "window_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                const std::string W = I(c.sliding_window);
                return "the sliding window ignored: every earlier key seen, where a query sees only the last " + W +
                       " (k_pos > q_pos - " + W + ")";
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "window_off_by_one",
                [](const BlockConfig& c) {
                    std::vector<BlockConfig> out;
                    for (int64_t d : {-1, +1})
                        if (c.sliding_window + d >= 1) {
                            BlockConfig e = c;
                            e.sliding_window += d;
                            out.push_back(e);
                        }
                    return out;
                },
                [](const BlockConfig& c, const BlockConfig& e) {
                    const int64_t n = e.sliding_window;
                    return "a sliding window of " + I(n) + " key" + (n == 1 ? "" : "s") + " where the config's is " +
                           I(c.sliding_window) +
                           ": HF's sliding_window and llama.cpp's n_swa count the query's own key (k_pos > q_pos - W), "
                           "FlashAttention's window_size left is W - 1";
                },
                {"window_off_by_one", "window_one_too_wide"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"attention_chunk_size", "attention_chunk_size", "chunk", "--attention-chunk-size", "", K::count,
                    kChunk, Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.attention_chunk_size; })};
            w.dim = "attention chunk";
            w.lo = 1, w.hi = int64_t{1} << 40;
            w.value = "a chunk of positions";
            w.summary = "C: a query sees only the keys of its own chunk of C positions (k_pos // C == q_pos // C); "
                        "not a sliding window";
            w.models = "Llama 4 (its RoPE layers)";
            w.lacks = "no attention to chunk";
            // A fifth of the cases: 1 (a query sees its own key only), 2, half
            // the context, one short of it (the last chunk holds one query),
            // equal or longer (it no longer binds), the tiles and pages.
            w.draw = [](TwistDraw& d) {
                if (d.pick({4, 1}) == 0) return 0.0;
                const int64_t v[] = {1, 2, d.reach / 2, d.reach - 1, d.reach, d.step, d.step + 1};
                return static_cast<double>(std::max<int64_t>(1, v[d.uniform(7)]));
            };
            w.draw_rank = 11;
            // Binding: some query has an earlier key in another chunk.
            w.classes = {"none", "C < keys", "C >= keys"};
            w.classify = [](const TwistSample& s) {
                const int64_t C = s.config().attention_chunk_size;
                if (C <= 0) return 1u;
                const bool binds = s.some_causal_pair(
                    [](int64_t k, int64_t q, double c) { return !same_chunk(k, q, static_cast<int64_t>(c)); },
                    static_cast<double>(C));
                return binds ? 2u : 4u;
            };
            w.ignored = "chunk_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                const std::string C = I(c.attention_chunk_size);
                return "chunked attention ignored: every earlier key seen, where a query sees only the keys of its own "
                       "chunk of " + C + " (k_pos // " + C + " == q_pos // " + C + ", Llama 4)";
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "chunk_as_window",
                [](const BlockConfig& c) {
                    // (No chunk, no such bug: the edit would be the window ignored, another bug's.)
                    if (c.attention_chunk_size <= 0) return std::vector<BlockConfig>{};
                    return edited(c, [](BlockConfig& e) {
                        const int64_t C = e.attention_chunk_size;
                        e.sliding_window = e.sliding_window > 0 ? std::min(e.sliding_window, C) : C;
                        e.attention_chunk_size = 0;
                    });
                },
                [](const BlockConfig& c, const BlockConfig&) {
                    const std::string C = I(c.attention_chunk_size);
                    return "the chunk size " + C + " read as a sliding window (k_pos > q_pos - " + C +
                           "): a query past a chunk's start saw the previous chunk's last keys; chunks restart at every "
                           "multiple of " + C;
                },
                {"chunk_as_window"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"attn_logit_softcapping", "attn_logit_softcapping", "softcap", "--attn-softcap",
                    "--attn-logit-softcapping", K::number, kSoftcap,
                    Ref<double>([](BlockConfig& c) -> double& { return c.attn_logit_softcapping; })};
            w.dim = "soft-cap";
            w.lo = 1e-30, w.hi = 1e30;
            w.value = "a cap";
            w.summary = "cap: each attention score s becomes cap * tanh(s / cap) before the mask and the softmax";
            w.models = "Gemma 2 (50), Grok";
            w.lacks = "no attention scores to cap";
            // A quarter of the cases, the cap near the scores' own scale σ
            // (tanh bends them; a cap taken after the mask makes its masked
            // keys count), or Gemma 2's 50, where it barely bends them. A float.
            w.draw = [](TwistDraw& d) {
                if (d.pick({3, 1}) == 0) return 0.0;
                const double caps[] = {d.sigma / 2, d.sigma, 3 * d.sigma, 50.0};
                return static_cast<double>(static_cast<float>(caps[d.pick({2, 2, 1, 1})]));
            };
            w.draw_rank = 2;
            w.classes = {"none", "cap < 4 sigma", "cap >= 4 sigma"};
            w.classify = [](const TwistSample& s) {
                const double cap = s.config().attn_logit_softcapping;
                return cap <= 0 ? 1u : cap < 4 * s.sigma() ? 2u : 4u;
            };
            w.ignored = "softcap_missing";
            w.ignored_why = [](const BlockConfig& c) {
                const std::string cap = g(c.attn_logit_softcapping);
                return "logit soft-capping missing: the scores go to the softmax as they are, where the config caps them "
                       "to " + cap + " * tanh(s / " + cap + ") (Gemma 2's attn_logit_softcapping)";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"attn_sinks", "attn_sinks", "sinks", "--attn-sinks", "", K::toggle, kSinks,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.attn_sinks; })};
            w.dim = "sinks";
            w.tensors = {"sinks"};
            w.summary = "a learned logit per query head (input sinks [H]) in each softmax's denominator, with no value";
            w.models = "gpt-oss";
            w.lacks = "no softmax to sink";
            w.draw = [](TwistDraw& d) { return d.pick({3, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 3;
            // Per head against the case's scale σ: one sink that takes most of
            // a softmax (> 2σ) and one that gives way (< -2σ) in the same case.
            w.classes = {"none", "on", "high and low heads"};
            w.classify = [](const TwistSample& s) {
                const auto* v = s.input("sinks");
                if (!s.config().attn_sinks || !v) return 1u;
                bool high = false, low = false;
                for (float x : *v) high = high || x > 2 * s.sigma(), low = low || x < -2 * s.sigma();
                return high && low ? 4u : 2u;
            };
            w.ignored = "sink_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("attention sinks dropped: each head's sink logit belongs in its softmax's denominator "
                                   "(gpt-oss: softmax(cat([scores, sinks])) with the sink's column dropped)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"attn_scale", "attn_scale", "attn_scale", "--attn-scale", "", K::number, kAttnScale,
                    Ref<double>([](BlockConfig& c) -> double& { return c.attn_scale; })};
            w.dim = "score scale";
            w.lo = 1e-30, w.hi = 1e30;
            w.value = "a scale", w.off = "1/sqrt(head_dim)";
            w.summary = "the scores' multiplier, q·k · S, instead of 1/sqrt(head_dim)";
            w.models = "Gemma 2/3 (query_pre_attn_scalar^-1/2), Granite (attention_multiplier), DeepSeek-V2/V3's MLA "
                       "(mscale^2 / sqrt(dn + dr) under YaRN)";
            w.lacks = "no attention scores to scale";
            // A quarter of the cases, as query_pre_attn_scalar^-1/2 with the
            // scalar hd·9/8 (Gemma 2 27B: 144 for head_dim 128), hd/2 or 2·hd.
            // Never a scale of 1 (hd 2, hd/2): there scaling by both it and
            // 1/sqrt(hd) is ignoring it, and attention_scale_wrong could not be
            // told from attn_scale_ignored (issue 53); 2·hd instead.
            w.draw = [](TwistDraw& d) {
                if (d.pick({3, 1}) == 0) return 0.0;
                if (d.op == Op::mla_attention) {  // DeepSeek under YaRN: mscale^2 / sqrt(dn + dr), factor 40 in V3
                    const double factor[] = {40.0, 4.0, 32.0};
                    const double mscale = 0.1 * std::log(factor[d.pick({2, 1, 1})]) + 1.0;
                    return mscale * mscale / std::sqrt(static_cast<double>(d.config.mla_qk_dim()));
                }
                const double f[] = {9.0 / 8, 0.5, 2.0};
                const double scalar = static_cast<double>(d.config.head_dim) * f[d.pick({2, 1, 1})];
                return 1.0 / std::sqrt(scalar == 1.0 ? 2.0 * static_cast<double>(d.config.head_dim) : scalar);
            };
            w.draw_rank = 8;
            w.classes = {"1/sqrt(hd)", "attn_scale"};
            w.ignored = "attn_scale_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                if (c.kv_lora_rank > 0)  // latent attention: DeepSeek's YaRN mscale^2 dropped
                    return "scores scaled by 1/sqrt(qk_nope + qk_rope) = 1/sqrt(" + I(c.mla_qk_dim()) +
                           ") where the config's attn_scale is " + g(c.attn_scale) + " (DeepSeek's mscale^2 / sqrt(" +
                           I(c.mla_qk_dim()) + ") under YaRN)";
                return "scores scaled by 1/sqrt(head_dim) = 1/sqrt(" + I(c.head_dim) + ") where the config's attn_scale is " +
                       g(c.attn_scale) + " (Gemma 2/3's query_pre_attn_scalar^-1/2)";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"norm_plus_one", "norm_plus_one", "plus_one", "--norm-plus-one", "", K::toggle, kNormPlusOne,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.norm_plus_one; })};
            w.dim = "norm (1 + w)";
            w.summary = "every RMSNorm scales by (1 + w), its weight stored as the offset from one";
            w.models = "Gemma 1, 2, 3";
            w.lacks = "no RMSNorm to offset";
            w.draw = [](TwistDraw& d) { return d.pick({3, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 4;
            // Scales 1 + w both under and over 1/2 in one case (offsets on both
            // sides of -1/2): trained Gemma norms are far from 1.
            w.classes = {"off", "on", "offsets both sides of -1/2"};
            w.classify = [](const TwistSample& s) {
                if (!s.config().norm_plus_one) return 1u;
                bool below = false, above = false;
                for (const char* n : {"weight", "attn_norm", "ffn_norm", "q_norm", "k_norm", "attn_post_norm", "ffn_post_norm"})
                    if (const auto* v = s.input(n))
                        for (float x : *v) below = below || x < -0.5f, above = above || x > -0.5f;
                return below && above ? 4u : 2u;
            };
            w.ignored = "norm_plus_one_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the norms scale by w where the config's (Gemma's) scale by 1 + w: its RMSNorm weights "
                                   "are stored as offsets from one (GemmaRMSNorm: output * (1.0 + weight))");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "norm_plus_one_spurious",
                [](const BlockConfig& c) {
                    return c.norm_plus_one ? std::vector<BlockConfig>{}
                                           : edited(c, [](BlockConfig& e) { e.norm_plus_one = true; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("the norms scale by 1 + w (Gemma's RMSNorm) where the config's scale by w");
                },
                {"norm_plus_one_spurious"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"sandwich_norm", "sandwich_norm", "sandwich", "--sandwich-norm", "", K::toggle, kSandwichNorm,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.sandwich_norm; })};
            w.dim = "sandwich norms";
            w.tensors = {"attn_post_norm", "ffn_post_norm"};
            w.summary = "each sublayer's output RMSNormed before its residual add (weights attn_post_norm, ffn_post_norm)";
            w.models = "Gemma 2, 3";
            w.lacks = "no sublayer outputs to norm";
            w.draw = [](TwistDraw& d) { return d.pick({3, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 9;
            w.classes = {"off", "on"};
            w.ignored = "sandwich_norm_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("Gemma 2/3's sandwich norms dropped: each sublayer's output added as it is, where it "
                                   "must first go through its own RMSNorm (post_attention_layernorm, "
                                   "post_feedforward_layernorm)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"nope", "nope", "nope", "--nope", "", K::toggle, kNope,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.nope; })};
            w.dim = "rope in the layer";
            w.summary = "a layer without RoPE: q and k attend unrotated (causal by position all the same)";
            w.models = "SmolLM3 (every 4th layer), Llama 4 (no_rope_layers)";
            w.lacks = "no layer to leave RoPE out of";
            w.draw = [](TwistDraw& d) { return d.pick({3, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 10;
            w.classes = {"rotated", "NoPE"};
            w.ignored = "nope_ignored";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("q and k rotated on a NoPE layer: this layer has no RoPE (SmolLM3's every 4th, Llama "
                                   "4's no_rope_layers), attention sees them unrotated");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "rope_missing",
                [](const BlockConfig& c) {
                    return c.nope ? std::vector<BlockConfig>{} : edited(c, [](BlockConfig& e) { e.nope = true; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("q and k left unrotated (as on a NoPE layer) where this layer has RoPE");
                },
                {"rope_missing"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"hidden_act", "hidden_act", "act", "--hidden-act", "", K::choice, kGeglu,
                    Ref<HiddenAct>([](BlockConfig& c) -> HiddenAct& { return c.hidden_act; })};
            w.dim = "ffn gate";
            w.summary = "the FFN gate's activation: silu (SwiGLU) or gelu_tanh (GeGLU)";
            w.models = "Gemma 1, 2, 3 (gelu_pytorch_tanh)";
            w.lacks = "no FFN gate";
            w.draw = [](TwistDraw& d) { return static_cast<double>(d.pick({3, 1})); };
            w.draw_rank = 7;
            w.classes = {"silu", "gelu_tanh"};
            w.ignored = "geglu_as_swiglu";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("SiLU on the gate where the config's FFN is GeGLU (Gemma's hidden_activation "
                                   "gelu_pytorch_tanh): a Llama FFN kernel");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "swiglu_as_geglu",
                [](const BlockConfig& c) {
                    return c.hidden_act != HiddenAct::silu
                               ? std::vector<BlockConfig>{}
                               : edited(c, [](BlockConfig& e) { e.hidden_act = HiddenAct::gelu_tanh; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("gelu_tanh on the gate (Gemma's GeGLU) where the config's FFN is SwiGLU");
                },
                {""}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"kv_cache_dtype", "kv_cache_dtype", "kv_dtype", "--kv-cache-dtype", "", K::choice, kFp8Cache,
                    Ref<KvCacheDtype>([](BlockConfig& c) -> KvCacheDtype& { return c.kv_cache_dtype; })};
            w.dim = "fp8 cache";
            w.tensors = {"k_scale", "v_scale"};
            w.summary = "an FP8 KV cache: K and V written as fp8(x / scale) (float32 division, round to nearest even, "
                        "saturating) and read as code * scale";
            w.models = "vLLM / SGLang / FlashInfer kv_cache_dtype fp8";
            w.lacks = "no KV cache to store in FP8";
            w.draw = [](TwistDraw& d) { return static_cast<double>(d.pick({3, 1, 1})); };
            w.draw_rank = 5;
            // A case whose scales make some written values saturate (a write that does not saturate shows).
            w.classes = {"none", "e4m3", "e5m2", "values saturate"};
            w.classify = [](const TwistSample& s) {
                const KvCacheDtype d = s.config().kv_cache_dtype;
                if (d == KvCacheDtype::none || !s.input("k_scale")) return 1u;
                return (d == KvCacheDtype::fp8_e4m3 ? 2u : 4u) | (s.cache_saturation() > 1 ? 8u : 0u);
            };
            w.ignored = "kv_fp8_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                return std::string("the KV cache not quantised: attention over K and V as given, where the config stores "
                                   "them as ") + to_string(c.kv_cache_dtype) + " (code = fp8(x / scale), read as code * scale)";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"kv_scale_per_head", "kv_scale_per_head", "kv_scale", "--kv-scale", "", K::toggle, kFp8Cache,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.kv_scale_per_head; })};
            w.spell = {"tensor", "head"};
            w.applies = [](const BlockConfig& c) { return c.kv_cache_dtype != KvCacheDtype::none; };
            w.summary = "an FP8 cache's scales: one per kv head ([1, KV]) instead of one per tensor ([1, 1])";
            w.models = "vLLM (per-head k_scale / v_scale), FlashInfer";
            w.lacks = "no FP8 KV cache to scale: it needs an FP8 kv_cache_dtype";
            w.draw = [](TwistDraw& d) {
                return d.config.kv_cache_dtype != KvCacheDtype::none && d.picker.coin() ? 1.0 : 0.0;
            };
            w.draw_rank = 6;
            t.push_back(std::move(w));
        }
        {
            // The first twist through this table (a row, the ramp's two lines in each RoPE).
            Twist w{"rope_scaling.truncate", "rope_truncate", "truncate", "--yarn-truncate", "", K::toggle, kRope,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.rope_scaling.truncate; })};
            w.applies = [](const BlockConfig& c) { return c.rope_scaling.type == RopeScalingType::yarn; };
            w.summary = "YaRN's correction range as found, not rounded: low, high = find_correction_dim(beta_fast), "
                        "(beta_slow) where truncate floors / ceils them to whole dims (0: truncate false)";
            w.models = "gpt-oss (8.093 / 17.398 at head_dim 64, where truncate gives 8 / 18)";
            w.lacks = "no YaRN to truncate: it needs rope_scaling yarn";
            // Half the YaRN cases.
            w.draw = [](TwistDraw& d) {
                return d.config.rope_scaling.type == RopeScalingType::yarn && d.picker.coin() ? 0.0 : 1.0;
            };
            w.draw_rank = 12;
            w.ignored = "yarn_truncated";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("YaRN's correction range rounded (floor / ceil: HF's truncate: true, llama.cpp's "
                                   "ggml_rope_yarn_corr_dims) where the config says truncate: false (gpt-oss)");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "yarn_not_truncated",
                [](const BlockConfig& c) {
                    if (c.rope_scaling.type != RopeScalingType::yarn || !c.rope_scaling.truncate) return std::vector<BlockConfig>{};
                    return edited(c, [](BlockConfig& e) { e.rope_scaling.truncate = false; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("YaRN's correction range left unrounded (gpt-oss's truncate: false) where the "
                                       "config truncates it: floor(low), ceil(high)");
                },
                {"yarn_not_truncated"}});
            t.push_back(std::move(w));
        }

        // ---- a mixture-of-experts FFN (moe, moe_route, moe_experts; docs/moe.md) ----
        // The router's. (gpt-oss's softmax over the chosen k is softmax with
        // norm_topk_prob, the same function; Llama 4's sigmoid of the chosen
        // is sigmoid's, sigmoid being monotone.)
        {
            Twist w{"moe_scoring", "moe_scoring", "scoring", "--moe-scoring", "", K::choice, kMoeRoute,
                    Ref<MoeScoring>([](BlockConfig& c) -> MoeScoring& { return c.moe_scoring; })};
            w.dim = "moe scoring";
            w.summary = "the router's scores: softmax over the E logits, or sigmoid of each (the top-k of them chosen)";
            w.models = "DeepSeek-V3/R1, Kimi-K2, GLM-4.5, Llama 4 (sigmoid)";
            w.lacks = "no router";
            w.draw = [](TwistDraw& d) { return static_cast<double>(d.pick({3, 2})); };
            w.draw_rank = 13;
            w.classes = {"softmax", "sigmoid"};
            w.ignored = "sigmoid_scored_as_softmax";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the router's scores through a softmax over all experts where the config's are "
                                   "each logit's sigmoid (DeepSeek-V3's scoring_func sigmoid)");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "softmax_scored_as_sigmoid",
                [](const BlockConfig& c) {
                    return c.moe_scoring != MoeScoring::softmax
                               ? std::vector<BlockConfig>{}
                               : edited(c, [](BlockConfig& e) { e.moe_scoring = MoeScoring::sigmoid; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("each logit's sigmoid where the config's router takes a softmax over all experts");
                },
                {""}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_router_bias", "moe_router_bias", "router_bias", "--moe-router-bias", "", K::toggle, kMoeRoute,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_router_bias; })};
            w.tensors = {"router_bias"};
            w.summary = "the router's logits l = x @ w_router + router_bias (input router_bias [1, E])";
            w.models = "gpt-oss";
            w.lacks = "no router";
            w.draw = [](TwistDraw& d) { return d.pick({2, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 14;
            w.ignored = "router_bias_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the router's bias dropped (gpt-oss's router is a Linear with a bias)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_selection_bias", "moe_selection_bias", "sel_bias", "--moe-selection-bias", "", K::toggle,
                    kMoeRoute, Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_selection_bias; })};
            w.tensors = {"e_bias"};
            w.summary = "e_bias [1, E] added to the scores for the top-k choice only; the weights are the unbiased scores";
            w.models = "DeepSeek-V3/R1, Kimi-K2, GLM-4.5 (e_score_correction_bias)";
            w.lacks = "no router";
            w.draw = [](TwistDraw& d) { return d.pick({2, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 15;
            w.ignored = "selection_bias_ignored";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("e_score_correction_bias ignored: the top-k taken on the unbiased scores");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_n_group", "moe_n_group", "n_group", "--moe-n-group", "", K::count, kMoeRoute,
                    Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.moe_n_group; })};
            w.dim = "moe groups";
            w.lo = 2, w.hi = 1 << 16;
            w.value = "a count of expert groups";
            w.summary = "grouped top-k: the experts in n_group groups, only the best topk_group groups' experts chosen from";
            w.models = "DeepSeek-V2/V3/R1, Kimi-K2 (n_group, topk_group)";
            w.lacks = "no router";
            // A third of the cases whose E splits into groups of two or more.
            w.draw = [](TwistDraw& d) {
                const int64_t E = d.config.n_experts;
                std::vector<int64_t> ok;
                for (int64_t g : {2, 4, 8})
                    if (E % g == 0 && E / g >= 2) ok.push_back(g);
                if (ok.empty() || d.pick({2, 1}) == 0) return 0.0;
                return static_cast<double>(ok[static_cast<size_t>(d.between(0, static_cast<int64_t>(ok.size()) - 1))]);
            };
            w.draw_rank = 16;
            w.classes = {"none", "grouped"};
            w.classify = [](const TwistSample& s) { return s.config().moe_n_group > 0 ? 2u : 1u; };
            w.ignored = "group_limit_ignored";
            w.ignored_why = [](const BlockConfig& c) {
                return "the top-k over every expert, where only the best " + I(c.moe_topk_group) + " of " +
                       I(c.moe_n_group) + " groups may be chosen from (n_group / topk_group ignored)";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_topk_group", "moe_topk_group", "topk_group", "--moe-topk-group", "", K::count, kMoeRoute,
                    Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.moe_topk_group; })};
            w.lo = 1, w.hi = 1 << 16;
            w.value = "a count of groups kept";
            w.summary = "grouped top-k: how many groups are kept (the rest's experts cannot be chosen)";
            w.models = "DeepSeek-V2/V3/R1, Kimi-K2";
            w.lacks = "no groups to keep: it needs moe_n_group";
            w.applies = [](const BlockConfig& c) { return c.moe_n_group > 0; };
            // Enough groups to hold the top-k: from the fewest that can, to all but one.
            w.draw = [](TwistDraw& d) {
                const BlockConfig& c = d.config;
                if (c.moe_n_group <= 0) return 0.0;
                const int64_t size = c.n_experts / c.moe_n_group;
                const int64_t least = std::max<int64_t>(1, (c.n_experts_per_tok + size - 1) / size);
                return static_cast<double>(d.between(least, std::max(least, c.moe_n_group - 1)));
            };
            w.draw_rank = 17;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_group_score", "moe_group_score", "group_score", "--moe-group-score", "", K::choice, kMoeRoute,
                    Ref<MoeGroupScore>([](BlockConfig& c) -> MoeGroupScore& { return c.moe_group_score; })};
            w.summary = "a group's score: the sum of its two best selection scores (V3) or its best (V2)";
            w.models = "DeepSeek-V2 (max)";
            w.lacks = "no groups to score: it needs moe_n_group";
            w.applies = [](const BlockConfig& c) { return c.moe_n_group > 0; };
            w.draw = [](TwistDraw& d) { return d.config.moe_n_group > 0 && d.pick({2, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 18;
            w.ignored = "group_score_top2_for_max";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("each group scored by the sum of its two best experts where the config's takes "
                                   "its best (DeepSeek-V2)");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "group_score_max_for_top2",
                [](const BlockConfig& c) {
                    return c.moe_n_group <= 0 || c.moe_group_score != MoeGroupScore::top2_sum
                               ? std::vector<BlockConfig>{}
                               : edited(c, [](BlockConfig& e) { e.moe_group_score = MoeGroupScore::max; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("each group scored by its best expert where the config's sums its two best "
                                       "(DeepSeek-V3's noaux_tc; vllm#13474)");
                },
                {"group_score_max_for_top2"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_norm_topk_prob", "moe_norm_topk_prob", "renorm", "--moe-norm-topk-prob", "", K::toggle,
                    kMoeRoute, Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_norm_topk_prob; })};
            w.dim = "moe renorm";
            w.summary = "the chosen k's weights divided by their sum (+ 1e-20) (gpt-oss's softmax over the k chosen is "
                        "this with softmax scoring)";
            w.models = "Mixtral, Qwen3-MoE, gpt-oss, DeepSeek-V3 (norm_topk_prob)";
            w.lacks = "no router";
            w.draw = [](TwistDraw& d) { return d.coin() ? 1.0 : 0.0; };
            w.draw_rank = 19;
            w.classes = {"raw", "renormalised"};
            w.classify = [](const TwistSample& s) { return s.config().moe_norm_topk_prob ? 2u : 1u; };
            w.ignored = "renorm_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the chosen k's weights not renormalised to sum 1 (norm_topk_prob ignored; with "
                                   "softmax scoring, gpt-oss's softmax over the k taken over all experts)");
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "renorm_spurious",
                [](const BlockConfig& c) {
                    return c.moe_norm_topk_prob ? std::vector<BlockConfig>{}
                                                : edited(c, [](BlockConfig& e) { e.moe_norm_topk_prob = true; });
                },
                [](const BlockConfig&, const BlockConfig&) {
                    return std::string("the chosen k's weights renormalised to sum 1 where the config's are the raw "
                                       "scores (norm_topk_prob false: Qwen2-MoE, OLMoE)");
                },
                {"renorm_spurious"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_routed_scaling_factor", "moe_routed_scaling_factor", "rsf", "--moe-routed-scaling-factor", "",
                    K::number, kMoeRoute,
                    Ref<double>([](BlockConfig& c) -> double& { return c.moe_routed_scaling_factor; })};
            w.lo = 1e-3, w.hi = 1e3;
            w.value = "a factor";
            w.summary = "the chosen weights times routed_scaling_factor, after any renormalisation";
            w.models = "DeepSeek-V3/R1 (2.5), Kimi-K2 (2.827)";
            w.lacks = "no router";
            w.draw = [](TwistDraw& d) {
                const double v[] = {0.0, 2.5, 2.827, 16.0};
                return v[d.pick({3, 2, 1, 1})];
            };
            w.draw_rank = 20;
            w.ignored = "routed_scaling_dropped";
            w.ignored_why = [](const BlockConfig& c) {
                return "routed_scaling_factor " + g(c.moe_routed_scaling_factor) + " dropped (sglang-jax#1282)";
            };
            w.ignored_mutant = true;
            w.bugs.push_back(TwistBug{
                "routed_scaling_twice",
                [](const BlockConfig& c) {
                    if (c.moe_routed_scaling_factor <= 0 || c.moe_routed_scaling_factor == 1) return std::vector<BlockConfig>{};
                    return edited(c, [](BlockConfig& e) { e.moe_routed_scaling_factor *= e.moe_routed_scaling_factor; });
                },
                [](const BlockConfig& c, const BlockConfig&) {
                    return "routed_scaling_factor " + g(c.moe_routed_scaling_factor) +
                           " applied twice (vllm#45037: Kimi-K2.5)";
                },
                {"routed_scaling_twice"}});
            t.push_back(std::move(w));
        }
        // The experts'.
        {
            Twist w{"moe_weight_on_input", "moe_weight_on_input", "w_on_input", "--moe-weight-on-input", "", K::toggle,
                    kMoeExperts, Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_weight_on_input; })};
            w.summary = "the routing weight on the expert's input, expert(w * x), not on its output";
            w.models = "Llama 4";
            w.lacks = "no experts";
            w.draw = [](TwistDraw& d) { return d.pick({3, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 21;
            w.ignored = "router_weight_on_output";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the routing weight applied to the expert's output where Llama 4 applies it to "
                                   "its input (transformers#40609)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_gate_up_interleaved", "moe_gate_up_interleaved", "interleaved", "--moe-gate-up-interleaved", "",
                    K::toggle, kMoeExperts, Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_gate_up_interleaved; })};
            w.summary = "w13's columns gate, up, gate, up, ... (gpt-oss's gate_up_proj) instead of [gate | up]";
            w.models = "gpt-oss";
            w.lacks = "no experts";
            w.draw = [](TwistDraw& d) { return d.pick({2, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 22;
            w.bugs.push_back(TwistBug{
                "gate_up_interleave_swapped",
                [](const BlockConfig& c) {
                    return edited(c, [](BlockConfig& e) { e.moe_gate_up_interleaved = !e.moe_gate_up_interleaved; });
                },
                [](const BlockConfig& c, const BlockConfig&) {
                    return std::string(c.moe_gate_up_interleaved ? "w13 read as [gate | up] where its columns interleave gate and up"
                                                                 : "w13 read as interleaved gate, up where its columns are [gate | up]") +
                           " (vllm#29273, ROCm/ATOM#845)";
                },
                {"gate_up_interleave_swapped"}});
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_swiglu_limit", "moe_swiglu_limit", "swiglu_limit", "--moe-swiglu-limit", "", K::number,
                    kMoeExperts, Ref<double>([](BlockConfig& c) -> double& { return c.moe_swiglu_limit; })};
            w.dim = "expert activation";
            w.lo = 1e-3, w.hi = 1e6;
            w.value = "a clamp limit";
            w.summary = "gpt-oss's SwiGLU: g = min(gate, L), u = clamp(up, -L, L), g * sigmoid(1.702 g) * (u + 1)";
            w.models = "gpt-oss (7)";
            w.lacks = "no experts";
            w.draw = [](TwistDraw& d) {
                const double v[] = {0.0, 7.0, 1.5};
                return v[d.pick({3, 2, 1})];
            };
            w.draw_rank = 23;
            w.classes = {"silu", "clamped"};
            w.classify = [](const TwistSample& s) { return s.config().moe_swiglu_limit > 0 ? 2u : 1u; };
            w.ignored = "swiglu_oai_as_silu";
            w.ignored_why = [](const BlockConfig& c) {
                return "silu(gate) * up where the config's experts take gpt-oss's clamped SwiGLU (limit " +
                       g(c.moe_swiglu_limit) + ", alpha 1.702, up + 1)";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_expert_bias", "moe_expert_bias", "expert_bias", "--moe-expert-bias", "", K::toggle, kMoeExperts,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_expert_bias; })};
            w.tensors = {"b13", "b2"};
            w.summary = "per-expert biases: b13 [E, 2 Fe] on x @ w13, b2 [E, D] on the expert's output, before its weight";
            w.models = "gpt-oss";
            w.lacks = "no experts";
            w.draw = [](TwistDraw& d) { return d.pick({2, 1}) == 1 ? 1.0 : 0.0; };
            w.draw_rank = 24;
            w.ignored = "expert_bias_missing";
            w.ignored_why = [](const BlockConfig&) { return std::string("the experts' biases (b13, b2) dropped"); };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_shared_ffn_dim", "moe_shared_ffn_dim", "shared", "--moe-shared-ffn-dim", "", K::count,
                    kMoeExperts, Ref<int64_t>([](BlockConfig& c) -> int64_t& { return c.moe_shared_ffn_dim; })};
            w.dim = "shared expert";
            w.lo = 1, w.hi = int64_t{1} << 20;
            w.value = "a shared expert's width";
            w.tensors = {"ws13", "ws2"};
            w.summary = "a shared expert every token takes, unweighted: SwiGLU over ws13 [D, 2 Fs], ws2 [Fs, D]";
            w.models = "DeepSeek-V2/V3, Kimi-K2, Qwen2-MoE, Llama 4";
            w.lacks = "no experts";
            w.draw = [](TwistDraw& d) {
                if (d.pick({2, 1}) == 0) return 0.0;
                const double v[] = {8.0, 3.0, 16.0};
                return v[d.pick({1, 1, 1})];
            };
            w.draw_rank = 25;
            w.classes = {"none", "shared"};
            w.classify = [](const TwistSample& s) { return s.config().moe_shared_ffn_dim > 0 ? 2u : 1u; };
            w.ignored = "shared_expert_missing";
            w.ignored_why = [](const BlockConfig& c) {
                return "the shared expert (width " + I(c.moe_shared_ffn_dim) + ") dropped";
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        {
            Twist w{"moe_shared_gate", "moe_shared_gate", "shared_gate", "--moe-shared-gate", "", K::toggle, kMoeExperts,
                    Ref<bool>([](BlockConfig& c) -> bool& { return c.moe_shared_gate; })};
            w.tensors = {"ws_gate"};
            w.summary = "the shared expert times sigmoid(x @ ws_gate) per token (input ws_gate [D, 1])";
            w.models = "Qwen2-MoE (shared_expert_gate)";
            w.lacks = "no shared expert to gate: it needs moe_shared_ffn_dim";
            w.applies = [](const BlockConfig& c) { return c.moe_shared_ffn_dim > 0; };
            w.draw = [](TwistDraw& d) { return d.config.moe_shared_ffn_dim > 0 && d.coin() ? 1.0 : 0.0; };
            w.draw_rank = 26;
            w.ignored = "shared_gate_missing";
            w.ignored_why = [](const BlockConfig&) {
                return std::string("the shared expert's sigmoid gate dropped (Qwen2-MoE's shared_expert_gate)");
            };
            w.ignored_mutant = true;
            t.push_back(std::move(w));
        }
        return t;
    }();
    return table;
}

// ---- reading and writing a row's field ---------------------------------------------------

// The field's value as a number: a toggle 0 / 1, a count or number itself, a choice its index.
inline double twist_value(const Twist& t, const BlockConfig& c) {
    return std::visit(
        [&](auto ref) -> double {
            const auto& v = ref(const_cast<BlockConfig&>(c));
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_enum_v<V>) return static_cast<double>(static_cast<int64_t>(v));
            else return static_cast<double>(v);
        },
        t.field);
}

inline void set_twist_value(const Twist& t, BlockConfig& c, double x) {
    std::visit(
        [&](auto ref) {
            auto& v = ref(c);
            using V = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<V, bool>) v = x != 0;
            else if constexpr (std::is_enum_v<V>) v = static_cast<V>(static_cast<int64_t>(x));
            else v = static_cast<V>(x);
        },
        t.field);
}

inline double twist_default(const Twist& t) { return twist_value(t, BlockConfig{}); }

// Whether it is on in c: its value is not the default (a toggle whose default is on is on when off).
inline bool twist_on(const Twist& t, const BlockConfig& c) { return twist_value(t, c) != twist_default(t); }

// Back to its default: what a kernel that ignores it computes. RoPE scaling
// resets its parameters too; a twist that another needs takes it along.
inline void reset_twist(const Twist& t, BlockConfig& c) {
    if (std::string_view(t.name) == "rope_scaling") {
        const double theta = c.rope_theta;
        c.rope_scaling = RopeScaling{};
        c.rope_theta = theta;
    } else {
        set_twist_value(t, c, twist_default(t));
    }
    for (const Twist& other : twist_table())
        if (other.applies && !other.applies(c)) set_twist_value(other, c, twist_default(other));
}

inline const Twist* find_twist(std::string_view name) {
    for (const Twist& t : twist_table())
        if (name == t.name) return &t;
    return nullptr;
}

inline size_t twist_index(const Twist& t) { return static_cast<size_t>(&t - twist_table().data()); }

// The names of a choice's values, the first the off one.
inline std::vector<std::string> twist_choices(const Twist& t) {
    std::vector<std::string> out;
    std::visit(
        [&](auto ref) {
            using V = std::decay_t<decltype(ref(std::declval<BlockConfig&>()))>;
            if constexpr (std::is_same_v<V, HiddenAct>) out = {"silu", "gelu_tanh"};
            else if constexpr (std::is_same_v<V, KvCacheDtype>) out = {"none", "fp8_e4m3", "fp8_e5m2"};
            else if constexpr (std::is_same_v<V, RopeScalingType>) out = {"none", "linear", "llama3", "yarn", "dynamic"};
            else if constexpr (std::is_same_v<V, MoeScoring>) out = {"softmax", "sigmoid"};
            else if constexpr (std::is_same_v<V, MoeGroupScore>) out = {"top2_sum", "max"};
        },
        t.field);
    return out;
}

// Its value as ids, flags and fixture strings write it.
inline std::string twist_text(const Twist& t, const BlockConfig& c) {
    const double v = twist_value(t, c);
    switch (t.kind) {
        case TwistKind::toggle: {
            const bool on = v != 0;
            return t.spell.empty() ? (on ? "1" : "0") : t.spell[on ? 1 : 0];
        }
        case TwistKind::count: return std::to_string(static_cast<int64_t>(v));
        case TwistKind::number: return twist_detail::num(v);
        case TwistKind::choice: return twist_choices(t)[static_cast<size_t>(v)];
    }
    return "";
}

// What a value of it must be, for messages: "0 or 1", "a count of keys >= 0
// (0: none)", "\"silu\" or \"gelu_tanh\"".
inline std::string twist_expected(const Twist& t) {
    switch (t.kind) {
        case TwistKind::toggle:
            return t.spell.empty() ? "0 or 1" : std::string(t.spell[0]) + " or " + t.spell[1];
        case TwistKind::count:
        case TwistKind::number: return std::string(t.value) + " >= 0 (0: " + t.off + ")";
        case TwistKind::choice: {
            const auto names = twist_choices(t);
            std::string e;
            for (size_t i = 0; i < names.size(); ++i)
                e += (i ? i + 1 == names.size() ? " or " : ", " : "") + ("\"" + names[i] + "\"");
            return e;
        }
    }
    return "";
}

// A value from its text: the whole text, in range; nullopt with `why` said.
inline std::optional<double> parse_twist_text(const Twist& t, const std::string& text, std::string* why) {
    auto fail = [&](const std::string&) -> std::optional<double> {
        if (why) *why = "expected " + twist_expected(t) + ", found '" + text.substr(0, 64) + (text.size() > 64 ? "...'" : "'");
        return std::nullopt;
    };
    switch (t.kind) {
        case TwistKind::toggle: {
            const char* off = t.spell.empty() ? "0" : t.spell[0];
            const char* on = t.spell.empty() ? "1" : t.spell[1];
            if (text == on) return 1.0;
            if (text == off) return 0.0;
            return fail(std::string(off) + " or " + on);
        }
        case TwistKind::count: {
            const std::string expected = "0 or a whole number in [" + twist_detail::I(static_cast<int64_t>(t.lo)) + ", " +
                                         twist_detail::I(static_cast<int64_t>(t.hi)) + "]";
            if (text.empty() || text.size() > 19) return fail(expected);
            int64_t v = 0;
            for (char ch : text) {
                if (ch < '0' || ch > '9') return fail(expected);
                v = v * 10 + (ch - '0');
            }
            if (v != 0 && (static_cast<double>(v) < t.lo || static_cast<double>(v) > t.hi)) return fail(expected);
            return static_cast<double>(v);
        }
        case TwistKind::number: {
            const std::string expected = "0 or a finite number in [" + twist_detail::g(t.lo) + ", " + twist_detail::g(t.hi) + "]";
            const auto v = twist_detail::finite_number(text, 64);
            if (!v || (*v != 0 && (*v < t.lo || *v > t.hi))) return fail(expected);
            return *v;
        }
        case TwistKind::choice: {
            const auto names = twist_choices(t);
            for (size_t i = 0; i < names.size(); ++i)
                if (text == names[i]) return static_cast<double>(i);
            std::string expected;
            for (size_t i = 0; i < names.size(); ++i) expected += (i ? i + 1 == names.size() ? " or " : ", " : "") + names[i];
            return fail(expected);
        }
    }
    return std::nullopt;
}

// The ops that read a twist (conform/op_info.h rows that use its convention)
// are asked with op_info(op).uses(t.convention); this header stays below the op table.

// ---- every field of the config, once ------------------------------------------------------
// f(const ConfigField&, field&) for every field, in the order ids and
// attributes write them: the core's, then each twist's row (a twist's field
// is `optional`: absent means off, so a format writes it only when on and
// files from before it read as what they were). Config: BlockConfig or const BlockConfig.
template <class Config, class F>
void for_each_field(Config&& c, F&& f) {
    using namespace config_fields;
    using T = RopeScalingType;
    f(ConfigField{"d_model", "d_model", "D"}, c.d_model);
    f(ConfigField{"n_heads", "n_heads", "H"}, c.n_heads);
    f(ConfigField{"n_kv_heads", "n_kv_heads", "KV"}, c.n_kv_heads);
    f(ConfigField{"head_dim", "head_dim", "hd"}, c.head_dim);
    f(ConfigField{"ffn_dim", "ffn_dim", "F"}, c.ffn_dim);
    f(ConfigField{"rope_layout", "rope_layout", "layout"}, c.rope_layout);
    f(ConfigField{"rope_theta", "rope_theta", "theta"}, c.rope_theta);
    f(ConfigField{"rotary_dim", "rotary_dim", "rd"}, c.rotary_dim);
    f(ConfigField{"rope_scaling.type", "rope_scaling", "scaling"}, c.rope_scaling.type);
    f(ConfigField{"rope_scaling.factor", "rope_factor", "factor", kScaled}, c.rope_scaling.factor);
    f(ConfigField{"rope_scaling.low_freq_factor", "rope_low_freq_factor", "low_freq", bit(T::llama3)},
      c.rope_scaling.low_freq_factor);
    f(ConfigField{"rope_scaling.high_freq_factor", "rope_high_freq_factor", "high_freq", bit(T::llama3)},
      c.rope_scaling.high_freq_factor);
    f(ConfigField{"rope_scaling.original_max_position", "rope_original_max_position", "orig",
                  bit(T::llama3) | bit(T::yarn) | bit(T::dynamic)},
      c.rope_scaling.original_max_position);
    f(ConfigField{"rope_scaling.beta_fast", "rope_beta_fast", "beta_fast", bit(T::yarn)}, c.rope_scaling.beta_fast);
    f(ConfigField{"rope_scaling.beta_slow", "rope_beta_slow", "beta_slow", bit(T::yarn)}, c.rope_scaling.beta_slow);
    f(ConfigField{"rope_scaling.attention_factor", "rope_attention_factor", "attn_factor", bit(T::yarn)},
      c.rope_scaling.attention_factor);
    f(ConfigField{"qk_norm", "qk_norm", "qk_norm"}, c.qk_norm);
    for (const Twist& t : twist_table()) {
        if (t.core) continue;
        std::visit([&](auto ref) { f(ConfigField{t.name, t.h5, t.id, 0, true}, ref(const_cast<BlockConfig&>(c))); },
                   t.field);
    }
    f(ConfigField{"norm_eps", "norm_eps", "eps"}, c.norm_eps);
    f(ConfigField{"page_size", "page_size", "P"}, c.page_size);
    f(ConfigField{"n_experts", "n_experts", "E"}, c.n_experts);
    f(ConfigField{"n_experts_per_tok", "n_experts_per_tok", "K"}, c.n_experts_per_tok);
    f(ConfigField{"moe_ffn_dim", "moe_ffn_dim", "Fe"}, c.moe_ffn_dim);
    f(ConfigField{"kv_lora_rank", "kv_lora_rank", "dc"}, c.kv_lora_rank);
    f(ConfigField{"qk_nope_head_dim", "qk_nope_head_dim", "dn"}, c.qk_nope_head_dim);
    f(ConfigField{"qk_rope_head_dim", "qk_rope_head_dim", "dr"}, c.qk_rope_head_dim);
    f(ConfigField{"v_head_dim", "v_head_dim", "dv"}, c.v_head_dim);
}

// ---- what an implementation declares -----------------------------------------------------
// Per twist, the values it computes: bit 0 (off) always; a toggle, count or
// number's on values as bit 1; a choice's i-th name as bit i.
struct TwistSet {
    std::array<uint32_t, 32> allowed{};

    static TwistSet all() {
        TwistSet s;
        s.allowed.fill(~0u);
        return s;
    }
    static TwistSet none() {
        TwistSet s;
        s.allowed.fill(1u);
        return s;
    }
    bool operator==(const TwistSet& o) const { return allowed == o.allowed; }
    bool operator!=(const TwistSet& o) const { return !(*this == o); }
    bool operator<(const TwistSet& o) const { return allowed < o.allowed; }

    // The bit of value v.
    static uint32_t bit(const Twist& t, double v) {
        if (t.kind == TwistKind::choice) return 1u << static_cast<unsigned>(v);
        return v == twist_default(t) ? 1u : 2u;
    }
    bool allows(const Twist& t, const BlockConfig& c) const {
        return (allowed[twist_index(t)] & bit(t, twist_value(t, c))) != 0;
    }
    // Whether the twist is declared at all (some on value).
    bool declares(const Twist& t) const { return (allowed[twist_index(t)] & ~1u) != 0; }
    void add(const Twist& t) { allowed[twist_index(t)] = ~0u; }
    void add(const Twist& t, double v) { allowed[twist_index(t)] |= bit(t, v); }
    // The first twist that is on in c (for an op that reads it) and not declared; nullptr: c is offered.
    template <class Reads>
    const Twist* refused(const BlockConfig& c, Reads&& op_reads) const {
        for (const Twist& t : twist_table())
            if (op_reads(t) && twist_on(t, c) && !allows(t, c)) return &t;
        return nullptr;
    }
    // "name" (every value) or "name=value" (one value of a choice or toggle); false with why said.
    bool declare(const std::string& entry, std::string* why) {
        const auto eq = entry.find('=');
        const std::string name = entry.substr(0, eq);
        const Twist* t = find_twist(name);
        if (!t) {
            if (why) {
                *why = "unknown twist '" + name.substr(0, 64) + "' (twists:";
                for (const Twist& r : twist_table()) *why += std::string(" ") + r.name;
                *why += ")";
            }
            return false;
        }
        if (eq == std::string::npos) {
            add(*t);
            return true;
        }
        const auto v = parse_twist_text(*t, entry.substr(eq + 1), why);
        if (!v) {
            if (why) *why = name + ": " + *why;
            return false;
        }
        add(*t, *v);
        return true;
    }
    // As declarations are written (a hello's `twists`): "name" for every value, "name=value" for some.
    std::vector<std::string> entries() const {
        std::vector<std::string> out;
        for (const Twist& t : twist_table()) {
            const uint32_t a = allowed[twist_index(t)];
            if ((a & ~1u) == 0) continue;
            if (t.kind != TwistKind::choice || a == ~0u) {
                out.push_back(t.name);
                continue;
            }
            const auto names = twist_choices(t);
            for (size_t i = 1; i < names.size(); ++i)
                if (a & (1u << i)) out.push_back(std::string(t.name) + "=" + names[i]);
        }
        return out;
    }
};

}  // namespace conform

// GGUF as the block's weights: llama.cpp's tensor names (llama-arch.cpp) and
// the configuration from the metadata, each field recorded with its key.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "config/hf_config.h"
#include "core/limits.h"
#include "weights/checkpoint_impl.h"
#include "weights/rope_factors.h"

namespace conform::weights {

namespace {

// The architectures read, and the RoPE each runs with in llama.cpp
// (llama_model_rope_type: LLAMA -> NORM, QWEN2 / QWEN3 -> NEOX).
struct Arch {
    const char* name;
    RopeLayout layout;
    const char* why;
    bool qk_norm_required;
};
constexpr Arch kArchs[] = {
    {"llama", RopeLayout::interleaved,
     "llama.cpp runs llama with NORMAL rope on the converter-permuted attn_q/attn_k", false},
    {"qwen2", RopeLayout::neox, "llama.cpp runs qwen2 with NEOX rope; its converter does not permute attn_q/attn_k", false},
    {"qwen3", RopeLayout::neox, "llama.cpp runs qwen3 with NEOX rope; its converter does not permute attn_q/attn_k", true},
    {"gemma", RopeLayout::neox, "llama.cpp runs gemma with NEOX rope; its converter does not permute attn_q/attn_k", false},
    {"gemma2", RopeLayout::neox, "llama.cpp runs gemma2 with NEOX rope; its converter does not permute attn_q/attn_k", false},
    {"gemma3", RopeLayout::neox, "llama.cpp runs gemma3 with NEOX rope; its converter does not permute attn_q/attn_k", true},
    {"smollm3", RopeLayout::interleaved,
     "llama.cpp runs smollm3 with NORMAL rope on the converter-permuted attn_q/attn_k", false},
    // Its attention only: the FFN is a mixture of experts (ModelConfig::ffn_unmodelled).
    {"gpt-oss", RopeLayout::neox, "llama.cpp runs gpt-oss with NEOX rope; its converter does not permute attn_q/attn_k",
     false},
};

// Served architectures llama.cpp runs whose twists conform does not model:
// refused saying what, rather than with the generic list.
struct Unmodelled {
    const char* name;
    const char* what;
};
constexpr Unmodelled kUnmodelled[] = {
    {"llama4", "a mixture-of-experts FFN, chunked attention, L2-normed q and k and its NoPE layers' attention "
               "temperature"},
    {"gemma3n", "per-layer embeddings, AltUp and laurel blocks around Gemma 3's layers"},
};

struct Name {
    const char* schema;
    const char* gguf;  // after "blk.N."
    bool matrix;
};
constexpr Name kLayer[] = {
    {"attn_norm", "attn_norm.weight", false}, {"wq", "attn_q.weight", true},       {"wk", "attn_k.weight", true},
    {"wv", "attn_v.weight", true},            {"wo", "attn_output.weight", true},  {"ffn_norm", "ffn_norm.weight", false},
    {"w1", "ffn_gate.weight", true},          {"w3", "ffn_up.weight", true},       {"w2", "ffn_down.weight", true},
    {"q_norm", "attn_q_norm.weight", false},  {"k_norm", "attn_k_norm.weight", false},
    {"bq", "attn_q.bias", false},             {"bk", "attn_k.bias", false},        {"bv", "attn_v.bias", false},
    {"attn_post_norm", "post_attention_norm.weight", false}, {"ffn_post_norm", "post_ffw_norm.weight", false},
    {"bo", "attn_output.bias", false},        {"sinks", "attn_sinks.weight", false},
};

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

// A float32 value as the decimal it was written from: the shortest one that
// rounds to it (1e-05, not 9.99999974737875e-06).
double widen(const GgufValue& v) {
    if (v.type != GgufType::f32) return *v.number();
    const float x = static_cast<float>(v.f);
    for (int digits = 1; digits <= 9; ++digits) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "%.*g", digits, static_cast<double>(x));
        if (std::strtof(buf, nullptr) == x) return std::strtod(buf, nullptr);
    }
    return v.f;
}

class Meta {
   public:
    Meta(Checkpoint::Impl& c, const GgufFile& g, std::string arch) : c_(c), g_(g), arch_(std::move(arch)) {}

    std::string key(const std::string& suffix) const { return arch_ + "." + suffix; }
    [[noreturn]] void fail(const std::string& k, const std::string& what) const {
        throw WeightsError(g_.path() + ": " + k + ": " + what);
    }
    const GgufValue* find(const std::string& suffix) const { return g_.find(key(suffix)); }

    // A positive integer: the key's value, or `fallback` (recorded) when the
    // key is absent and fallback > 0; absent without a fallback is an error.
    // A declared size, a positive integer at most max (core/limits.h), checked
    // before anything loops over it or allocates for it.
    int64_t size(const std::string& field, const std::string& suffix, int64_t fallback = 0, const std::string& why = "",
                 int64_t max = limits::kWidth) {
        const GgufValue* v = find(suffix);
        if (!v) {
            if (fallback <= 0) fail(key(suffix), "missing (llama.cpp requires it for " + arch_ + ")");
            record(field, std::to_string(fallback), key(suffix) + " absent: " + why);
            return fallback;
        }
        const auto n = v->integer();
        if (!n || *n <= 0 || *n > max)
            fail(key(suffix), "expected a positive integer <= " + std::to_string(max) + ", found " + v->describe());
        record(field, std::to_string(*n), key(suffix));
        return *n;
    }
    double positive(const std::string& field, const std::string& suffix, double fallback = 0, const std::string& why = "") {
        const GgufValue* v = find(suffix);
        if (!v) {
            if (fallback <= 0) fail(key(suffix), "missing (llama.cpp requires it for " + arch_ + ")");
            record(field, num(fallback), key(suffix) + " absent: " + why);
            return fallback;
        }
        if (!v->number() || !std::isfinite(*v->number()) || !(*v->number() > 0))
            fail(key(suffix), "expected a positive number, found " + v->describe());
        const double d = widen(*v);
        record(field, num(d), key(suffix));
        return d;
    }
    void record(const std::string& field, const std::string& value, const std::string& from) {
        c_.note(field + " = " + value + " (" + from + ")");
        if (from.find(" absent: ") != std::string::npos) c_.model.defaults.push_back(field + ": " + from + ", took " + value);
    }

   private:
    Checkpoint::Impl& c_;
    const GgufFile& g_;
    std::string arch_;
};

// Sliding / full layers as llama.cpp loads them where an architecture has a
// swa pattern (gemma2, gemma3, gpt-oss): the window W (n_swa), the period from
// attention.sliding_window_pattern (`period` if absent; layer il slides iff
// il % p < p - 1, 0: every layer), the sliding layers' RoPE base
// rope.freq_base_swa (`local` if absent), unscaled.
void swa_layers(Checkpoint::Impl& c, const Meta& m, int64_t W, int64_t period, double local) {
    config::ModelConfig& model = c.model;
    if (const GgufValue* p = m.find("attention.sliding_window_pattern")) {
        const auto n = p->integer();
        if (!n || *n < 0)
            m.fail(m.key("attention.sliding_window_pattern"),
                   "expected a period >= 0, found " + p->describe() + " (a per-layer array is not read)");
        period = *n;
    }
    model.block.sliding_window = W;
    for (int64_t l = 0; l < model.layers; ++l) model.pattern.sliding.push_back(period == 0 || l % period < period - 1);
    if (const GgufValue* f = m.find("rope.freq_base_swa")) {
        if (!f->number() || !(*f->number() > 1)) m.fail(m.key("rope.freq_base_swa"), "expected a number > 1, found " + f->describe());
        local = widen(*f);
    }
    if (local != model.block.rope_theta) model.pattern.local_rope_theta = local;
    if (std::count(model.pattern.sliding.begin(), model.pattern.sliding.end(), false) == 0) model.pattern.sliding.clear();
    c.note("sliding_window: " + std::to_string(W) + " on " +
           (model.pattern.empty() ? std::string("every layer") : model.pattern.describe() + " layers") + " (period " +
           std::to_string(period) + ", llama.cpp's swa pattern)" +
           (model.pattern.local_rope_theta > 0 ? "; sliding layers' RoPE base " + num(model.pattern.local_rope_theta) + ", unscaled" : ""));
}

}  // namespace

void open_gguf(Checkpoint::Impl& c, const std::string& path) {
    c.gguf = GgufFile::open(path);
    const GgufFile& g = *c.gguf;
    c.note("format: gguf v" + std::to_string(g.version()) + " (" + path + "), " + std::to_string(g.tensors().size()) +
           " tensors, " + std::to_string(g.metadata().size()) + " metadata keys, alignment " +
           std::to_string(g.alignment()) + (g.find("general.alignment") ? " (general.alignment)" : " (the default)"));

    // ---- the architecture ---------------------------------------------------------
    const GgufValue* a = g.find("general.architecture");
    if (!a) throw WeightsError(path + ": general.architecture: missing (every GGUF model names its architecture)");
    if (a->type != GgufType::string)
        throw WeightsError(path + ": general.architecture: expected a string, found " + a->describe());
    const Arch* arch = nullptr;
    for (const auto& k : kArchs)
        if (a->s == k.name) arch = &k;
    for (const auto& u : kUnmodelled)
        if (a->s == u.name)
            throw WeightsError(path + ": general.architecture: " + a->describe().substr(7) + " has " + u.what +
                               ", which conform does not model; refused rather than run as another model");
    if (!arch)
        throw WeightsError(path + ": general.architecture: " + a->describe().substr(7) +
                           " is not supported (llama, qwen2, qwen3, gemma, gemma2, gemma3, smollm3 are; gpt-oss's attention)");
    Meta m(c, g, arch->name);
    config::ModelConfig& model = c.model;
    model.name = path;
    model.origin = "gguf " + path;
    model.architecture = arch->name;
    c.note("architecture: " + std::string(arch->name) + " (general.architecture)");
    if (const GgufValue* n = g.find("general.name"); n && n->type == GgufType::string)
        c.note("name: " + n->describe().substr(7) + " (general.name)");

    // ---- sizes and conventions -------------------------------------------------------
    BlockConfig& b = model.block;
    b.d_model = m.size("d_model", "embedding_length");
    model.layers = m.size("layers", "block_count", 0, "", limits::kLayers);
    b.n_heads = m.size("n_heads", "attention.head_count", 0, "", limits::kHeads);
    b.n_kv_heads = m.size("n_kv_heads", "attention.head_count_kv", b.n_heads, "head_count, as llama.cpp takes it (no GQA)", limits::kHeads);
    if (b.d_model % b.n_heads != 0 && !m.find("attention.key_length"))
        m.fail(m.key("attention.key_length"), "missing, and embedding_length " + std::to_string(b.d_model) +
                                                  " is not a multiple of head_count " + std::to_string(b.n_heads));
    b.head_dim = m.size("head_dim", "attention.key_length", b.d_model / b.n_heads, "embedding_length / head_count", limits::kHeadDim);
    if (const GgufValue* v = m.find("attention.value_length"); v && v->integer() != std::optional<int64_t>(b.head_dim))
        m.fail(m.key("attention.value_length"), "expected key_length " + std::to_string(b.head_dim) +
                                                    " (the block's v heads are head_dim wide), found " + v->describe());
    const bool gptoss = std::string_view(arch->name) == "gpt-oss";
    // gpt-oss: each expert's width (the block's FFN is not run for it).
    b.ffn_dim = gptoss ? m.size("ffn_dim", "expert_feed_forward_length") : m.size("ffn_dim", "feed_forward_length");
    model.max_position = m.size("max_position", "context_length", 0, "", limits::kPosition);
    b.rope_theta = m.positive("rope_theta", "rope.freq_base", 10000.0, "10000, llama.cpp's default");
    b.norm_eps = m.positive("norm_eps", "attention.layer_norm_rms_epsilon");
    const int64_t rotary = m.size("rotary_dim", "rope.dimension_count", b.head_dim, "key_length, as llama.cpp takes it");
    if (rotary > b.head_dim || rotary % 2 != 0)
        m.fail(m.key("rope.dimension_count"), "expected an even number <= key_length " + std::to_string(b.head_dim) +
                                                  ", found " + std::to_string(rotary));
    b.rotary_dim = rotary == b.head_dim ? 0 : rotary;
    const std::string_view an = arch->name;
    const bool gemma2 = an == "gemma2", gemma3 = an == "gemma3", gemma23 = gemma2 || gemma3;
    if (gptoss) {
        // llama.cpp's gpt-oss (models/openai-moe.cpp): n_swa from attention.sliding_window
        // (required), period 2 unless attention.sliding_window_pattern says, the sliding layers'
        // RoPE base the global one unless rope.freq_base_swa says; a sink per head; a mixture of
        // experts, which conform does not compute.
        const GgufValue* w = m.find("attention.sliding_window");
        if (!w) m.fail(m.key("attention.sliding_window"), "missing (llama.cpp requires it for gpt-oss)");
        const auto n = w->integer();
        if (!n || *n < 1) m.fail(m.key("attention.sliding_window"), "expected a positive integer, found " + w->describe());
        swa_layers(c, m, *n, 2, b.rope_theta);
        b.attn_sinks = true;
        c.note("attention sinks: on (gpt-oss: blk.N.attn_sinks.weight, one logit per head)");
        const int64_t experts = m.size("experts", "expert_count", 0, "", limits::kExperts),
                      used = m.size("experts_used", "expert_used_count", 0, "", limits::kExperts);
        model.ffn_unmodelled = "a mixture of " + std::to_string(experts) + " experts, " + std::to_string(used) +
                               " per token (llama.cpp's gpt-oss MoE: a router, experts with a clamped SwiGLU and "
                               "biases): conform reads around it and does not compute it";
        c.note("ffn: not read (" + model.ffn_unmodelled + ")");
    } else if (gemma23) {
        // Sliding / full layers as llama.cpp's gemma2 / gemma3 load them: n_swa
        // from attention.sliding_window (gemma2: 4096 if absent; gemma3: no
        // window if absent), the period from attention.sliding_window_pattern
        // (2 / 6; layer il slides iff il % p < p - 1, 0: every layer), the
        // sliding layers' RoPE base rope.freq_base_swa (gemma2: the global
        // base; gemma3: 10000) and no scaling.
        int64_t W = gemma2 ? 4096 : 0;
        if (const GgufValue* w = m.find("attention.sliding_window")) {
            const auto n = w->integer();
            if (!n || *n < 0) m.fail(m.key("attention.sliding_window"), "expected a non-negative integer, found " + w->describe());
            W = *n;
        } else if (gemma2) {
            c.note("sliding_window: 4096 (" + m.key("attention.sliding_window") + " absent: llama.cpp's gemma2 default)");
        }
        if (W > 0) swa_layers(c, m, W, gemma2 ? 2 : 6, gemma2 ? b.rope_theta : 10000.0);
        // llama.cpp: f_attention_scale = 1/sqrt(n_embd / n_head) for the 27B models
        // (gemma2 46 layers, gemma3 62), else 1/sqrt(head_dim): query_pre_attn_scalar
        // is not in the file, it is inferred from the layer count.
        const bool is_27b = model.layers == (gemma2 ? 46 : 62);
        if (is_27b && b.d_model / b.n_heads != b.head_dim) b.attn_scale = 1.0 / std::sqrt(static_cast<double>(b.d_model / b.n_heads));
        c.note(std::string("attention scale: ") + (b.attn_scale > 0 ? "1/sqrt(d_model / n_heads)" : "1/sqrt(head_dim)") +
               " (llama.cpp's " + arch->name + (is_27b ? " 27B" : "") + " f_attention_scale, by layer count)");
        // Soft-caps: gemma2 caps the scores (50 unless the key says) and the
        // logits (30 unless); gemma3 only the logits, and only where the key is.
        if (gemma2) b.attn_logit_softcapping = m.positive("attn_logit_softcapping", "attn_logit_softcapping", 50.0, "50, llama.cpp's default");
        if (gemma2 || m.find("final_logit_softcapping"))
            model.final_logit_softcapping =
                m.positive("final_logit_softcapping", "final_logit_softcapping", gemma2 ? 30.0 : 0.0, "30, llama.cpp's default");
        b.sandwich_norm = true;
        c.note("sandwich norms: on (" + std::string(arch->name) + ": blk.N.post_attention_norm and post_ffw_norm norm each sublayer's output)");
    } else {
        // A sliding window: llama.cpp reads <arch>.attention.sliding_window
        // (n_swa) only for the architectures that apply one (gemma2/3, phi3,
        // ...); its llama, qwen2 and qwen3 graphs read no window and attend over
        // every key, as transformers' llama does. Read, checked and reported
        // here, never silently taken or silently dropped.
        if (const GgufValue* w = m.find("attention.sliding_window")) {
            const auto n = w->integer();
            if (!n || *n < 0) m.fail(m.key("attention.sliding_window"), "expected a non-negative integer, found " + w->describe());
            if (*n > 0)
                c.note("sliding_window: " + std::to_string(*n) + " not used (" + m.key("attention.sliding_window") +
                       "): llama.cpp's " + arch->name + " graph reads no window and attends over every key, as this "
                       "model does; a kernel that applies the window differs once a query sees more than " +
                       std::to_string(*n) + " keys");
        }
        if (m.find("attention.sliding_window_pattern"))
            c.note(m.key("attention.sliding_window_pattern") + ": not used (llama.cpp's " + arch->name +
                   " graph has no sliding-window layers)");
    }
    if (an == "smollm3") {
        // llama.cpp's smollm3 graph: use_rope = (il + 1) % n_no_rope_layer_step != 0, the step fixed at 4
        // (not a key): every 4th layer NoPE, as SmolLM3Config's no_rope_layer_interval.
        for (int64_t l = 0; l < model.layers; ++l) model.pattern.nope.push_back((l + 1) % 4 == 0);
        if (std::count(model.pattern.nope.begin(), model.pattern.nope.end(), true) == 0) model.pattern.nope.clear();
        c.note("NoPE layers: every 4th (general.architecture = smollm3: llama.cpp's n_no_rope_layer_step, 4)");
    }
    if (an == "gemma" || gemma23) {
        // llama.cpp's gemma graphs: inpL = ggml_scale(inpL, sqrtf(n_embd)); LLM_FFN_GELU with a
        // parallel gate (GeGLU, ggml_gelu's tanh form); plain RMSNorm on weights its converter
        // stored as 1 + w (GemmaModel.modify_tensors: norm.weight + 1). So the model is GeGLU
        // with the embedding scaled, and norms that scale by w as stored: norm_plus_one off.
        b.hidden_act = HiddenAct::gelu_tanh;
        model.embedding_multiplier = std::sqrt(static_cast<double>(b.d_model));
        c.note("hidden_act: gelu_tanh (general.architecture = " + std::string(an) + ": llama.cpp's Gemma FFN is GeGLU)");
        c.note("embedding x sqrt(d_model) = " + num(model.embedding_multiplier) + " (general.architecture = " +
               std::string(an) + ": llama.cpp scales inpL by sqrtf(n_embd), as GemmaModel does)");
        c.note("norms: weights read as stored, scaling by w: llama.cpp's converter stores Gemma's 1 + w "
               "(norm.weight + 1), so norm_plus_one is off for a GGUF Gemma");
    }
    b.rope_layout = arch->layout;
    c.note(std::string("rope layout: ") + to_string(b.rope_layout) + " (general.architecture = " + arch->name + ": " +
           arch->why + ")");
    if (b.n_kv_heads < b.n_heads)
        c.note("GQA: " + std::to_string(b.n_heads / std::max<int64_t>(b.n_kv_heads, 1)) +
               " query heads per kv head" + (std::string(arch->name) == "llama" ? " (a Mistral-style llama)" : ""));

    // The sizes agree with each other before any tensor is held against them.
    try {
        config::validate_block(b, path);
    } catch (const config::ConfigError& e) {
        throw WeightsError(e.what());
    }

    // ---- tensors ----------------------------------------------------------------------
    std::set<std::string> used;
    auto info = [&](const std::string& name, const std::string& why) -> const GgufTensorInfo& {
        const GgufTensorInfo* t = g.tensor(name);
        if (!t) throw WeightsError(path + ": " + name + ": missing (" + why + ")");
        used.insert(name);
        return *t;
    };
    auto get = [&](const std::string& name, bool matrix, const std::vector<int64_t>& want,
                   const std::vector<std::string>& symbols, const std::string& why) {
        Slot s{g.stored(info(name, why)), matrix};
        expect_shape(c, s.t, want, symbols);
        return s;
    };

    const bool has_q_norm = g.tensor("blk.0.attn_q_norm.weight") || g.tensor("blk.0.attn_k_norm.weight");
    b.qk_norm = has_q_norm || arch->qk_norm_required;
    if (b.qk_norm)
        c.note(std::string("qk_norm: on (") +
               (has_q_norm ? "blk.0.attn_q_norm.weight / attn_k_norm.weight present" : "qwen3 norms q and k per head") +
               ")");

    // Projection biases: llama.cpp adds attn_{q,k,v}.bias wherever the file
    // has them (qwen2 always; llama when converted with them). An output
    // bias the block does not model is refused, not dropped.
    const bool has_bias = g.tensor("blk.0.attn_q.bias") || g.tensor("blk.0.attn_k.bias") || g.tensor("blk.0.attn_v.bias");
    b.qkv_bias = has_bias || std::string_view(arch->name) == "qwen2";
    if (b.qkv_bias)
        c.note(std::string("qkv_bias: on (") +
               (has_bias ? "blk.0.attn_{q,k,v}.bias present" : "qwen2 adds biases to q, k and v") +
               ": q = attn_in @ wq + bq ...)");
    if (gptoss && g.tensor("blk.0.attn_output.bias")) {
        model.o_bias = true;
        c.note("o_bias: on (blk.0.attn_output.bias present: h = x + attn @ wo + bo)");
    } else if (g.tensor("blk.0.attn_output.bias"))
        throw WeightsError(path + ": blk.0.attn_output.bias: an output projection bias, which the block does not "
                                  "model (its biases are q, k and v's); refused rather than dropped");

    // The vocabulary is the embedding's rows; a key that says otherwise is refused.
    const GgufTensorInfo& embd = info("token_embd.weight", "every model has one");
    if (embd.ne.size() != 2)
        throw WeightsError(path + ": token_embd.weight: ne: expected 2 dims [D, vocab], found " + std::to_string(embd.ne.size()));
    model.vocab = static_cast<int64_t>(embd.ne[1]);
    c.note("vocab = " + std::to_string(model.vocab) + " (token_embd.weight ne[1])");
    if (const GgufValue* v = m.find("vocab_size"); v && v->integer() != std::optional<int64_t>(model.vocab))
        m.fail(m.key("vocab_size"), "expected token_embd.weight's " + std::to_string(model.vocab) + " rows, found " + v->describe());
    if (const GgufValue* t = g.find("tokenizer.ggml.tokens");
        t && (t->type != GgufType::array || t->length != static_cast<uint64_t>(model.vocab)))
        throw WeightsError(path + ": tokenizer.ggml.tokens: expected " + std::to_string(model.vocab) +
                           " tokens (token_embd.weight's rows), found " + t->describe());

    const int64_t D = b.d_model, V = model.vocab;
    c.embedding = get("token_embd.weight", false, {V, D}, {"vocab", "D"}, "every model has one");
    c.final_norm = get("output_norm.weight", false, {D}, {"D"}, "every model has one");
    if (g.tensor("output.weight")) {
        c.lm_head = get("output.weight", true, {V, D}, {"vocab", "D"}, "");
        c.note("lm_head: output.weight");
    } else {
        c.lm_head = c.embedding;
        model.tie_embeddings = true;
        c.note("lm_head: output.weight absent: tied to token_embd.weight (as llama.cpp does)");
    }
    const std::string implied = m.key("block_count") + " = " + std::to_string(model.layers) + " implies it";
    for (int64_t l = 0; l < model.layers; ++l) {
        const std::string prefix = "blk." + std::to_string(l) + ".";
        std::map<std::string, Slot> layer;
        for (const Name& n : kLayer) {
            const std::string schema = n.schema;
            const LayerTensor lt = layer_tensor(schema, model);
            if (!lt.present) continue;
            const bool bias = schema == "bq" || schema == "bk" || schema == "bv";
            const bool post = schema == "attn_post_norm" || schema == "ffn_post_norm";
            const std::string why = schema == "q_norm" || schema == "k_norm" ? "qk_norm is on: every layer has one"
                                    : bias                                   ? "qkv_bias is on: every layer has one"
                                    : schema == "bo" ? "o_bias is on: every layer has one"
                                    : schema == "sinks" ? "gpt-oss has a sink per head in every layer"
                                    : post ? "sandwich norms (" + std::string(arch->name) + "): every layer has one"
                                                                             : implied;
            layer[schema] = get(prefix + n.gguf, n.matrix, lt.shape, lt.symbols, why);
        }
        c.layers.push_back(std::move(layer));
    }

    // ---- RoPE scaling: metadata, or llama3's per-pair factors -------------------------
    // As llama.cpp reads it: the type defaults to linear, the factor to
    // rope.scale_linear, else 1 (no scaling).
    std::string type = "linear", type_from = m.key("rope.scaling.type") + " absent: linear, llama.cpp's default";
    if (const GgufValue* v = m.find("rope.scaling.type")) {
        if (v->type != GgufType::string) m.fail(m.key("rope.scaling.type"), "expected a string, found " + v->describe());
        type = v->s, type_from = m.key("rope.scaling.type");
    }
    double factor = 1.0;
    std::string factor_from = "no rope.scaling.factor or rope.scale_linear";
    for (const char* k : {"rope.scaling.factor", "rope.scale_linear"})
        if (const GgufValue* v = m.find(k); v && factor == 1.0) {
            if (!v->number() || !std::isfinite(*v->number()) || *v->number() < 0)
                m.fail(m.key(k), "expected a non-negative number, found " + v->describe());
            if (*v->number() == 0) continue;  // llama.cpp: 0 means unset
            factor = widen(*v), factor_from = m.key(k);
        }
    if (type != "none" && type != "linear")
        m.fail(m.key("rope.scaling.type"), "'" + type +
                                               "' is not mapped (none and linear are, and llama3's per-pair factors "
                                               "through rope_freqs.weight)");
    if (type == "linear" && factor != 1.0) {
        if (factor < 1) m.fail(factor_from, "expected a factor >= 1, found " + num(factor));
        b.rope_scaling.type = RopeScalingType::linear;
        b.rope_scaling.factor = factor;
        c.note("rope scaling: linear, factor " + num(factor) + " (" + type_from + "; " + factor_from + ")");
    }
    if (const GgufTensorInfo* rf = g.tensor("rope_freqs.weight")) {
        used.insert(rf->name);
        const StoredTensor t = g.stored(*rf);
        expect_shape(c, t, {b.rotary() / 2}, {"rotary/2"});
        if (b.rope_scaling.type != RopeScalingType::none)
            throw WeightsError(path + ": rope_freqs.weight: present together with linear scaling (" + factor_from +
                               "); the block cannot apply both");
        c.rope_factors.resize(static_cast<size_t>(t.numel()));
        decode_rows(t, 0, t.rows(), c.rope_factors.data());
        int64_t original = 0;
        if (const GgufValue* v = m.find("rope.scaling.original_context_length")) {
            const auto n = v->integer();
            if (!n || *n <= 0)
                m.fail(m.key("rope.scaling.original_context_length"), "expected a positive integer, found " + v->describe());
            original = *n;
        }
        const FactorFit fit = fit_rope_factors(c.rope_factors, b.rope_theta, b.rotary(), original, path + ": rope_freqs.weight");
        b.rope_scaling = fit.scaling;
        c.note("rope scaling: " + config::describe(fit.scaling) + " (" + fit.how + ")");
    }
    try {
        config::validate_block(b, path);
    } catch (const config::ConfigError& e) {
        throw WeightsError(e.what());
    }

    std::vector<std::string> unused;
    for (const auto& t : g.tensors())
        if (!used.count(t.name)) unused.push_back(t.name);
    if (!unused.empty()) {
        std::string list;
        for (size_t k = 0; k < unused.size() && k < 4; ++k) list += (k ? ", " : "") + unused[k];
        c.note(std::to_string(unused.size()) + " tensors the block does not use: " + list +
               (unused.size() > 4 ? ", ..." : ""));
    }
}

}  // namespace conform::weights

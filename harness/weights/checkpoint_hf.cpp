// Hugging Face safetensors as the block's weights: transformers' names
// (modeling_llama.py / modeling_qwen3.py), the configuration from config.json.
#include <filesystem>
#include <set>
#include <string_view>

#include "config/hf_config.h"
#include "weights/checkpoint_impl.h"

namespace conform::weights {

namespace {

struct Name {
    const char* schema;
    const char* hf;  // after "model.layers.N."
    bool matrix;
};
constexpr Name kLayer[] = {
    {"attn_norm", "input_layernorm.weight", false}, {"wq", "self_attn.q_proj.weight", true},
    {"wk", "self_attn.k_proj.weight", true},        {"wv", "self_attn.v_proj.weight", true},
    {"wo", "self_attn.o_proj.weight", true},        {"ffn_norm", "post_attention_layernorm.weight", false},
    {"w1", "mlp.gate_proj.weight", true},           {"w3", "mlp.up_proj.weight", true},
    {"w2", "mlp.down_proj.weight", true},           {"q_norm", "self_attn.q_norm.weight", false},
    {"k_norm", "self_attn.k_norm.weight", false},   {"bq", "self_attn.q_proj.bias", false},
    {"bk", "self_attn.k_proj.bias", false},          {"bv", "self_attn.v_proj.bias", false},
    {"attn_post_norm", "post_attention_layernorm.weight", false},
    {"ffn_post_norm", "post_feedforward_layernorm.weight", false},
    {"bo", "self_attn.o_proj.bias", false},           {"sinks", "self_attn.sinks", false},
};

// Gemma 2 and 3 (sandwich_norm) name their four norms after where they sit:
// post_attention_layernorm is the attention's output norm there, and the
// FFN's input norm is pre_feedforward_layernorm (Llama's
// post_attention_layernorm is that input norm).
const char* hf_name(const Name& n, bool sandwich) {
    if (sandwich && std::string_view(n.schema) == "ffn_norm") return "pre_feedforward_layernorm.weight";
    return n.hf;
}

}  // namespace

void open_safetensors(Checkpoint::Impl& c, const std::string& path, const std::string& config_json) {
    c.st = Safetensors::open(path);
    const Safetensors& st = *c.st;
    if (st.index().empty())
        c.note("format: safetensors, one file (" + st.files()[0].path() + "), " + std::to_string(st.tensor_count()) +
               " tensors");
    else
        c.note("format: safetensors, " + std::to_string(st.files().size()) + " shards named by " + st.index() + ", " +
               std::to_string(st.tensor_count()) + " tensors");

    const std::string cfg = config_json.empty() ? (std::filesystem::path(st.directory()) / "config.json").string() : config_json;
    std::error_code ec;
    if (config_json.empty() && !std::filesystem::exists(cfg, ec))
        throw WeightsError(cfg + ": config.json: not found beside the weights (name one explicitly)");
    try {
        c.model = config::load_hf_config(cfg);
    } catch (const config::ConfigError& e) {
        throw WeightsError(printable(e.what()));  // it may quote the file's bytes
    }
    c.model.name = path;
    c.model.origin = "safetensors " + path + " (config " + cfg + ")";
    c.note("config: " + cfg + (config_json.empty() ? " (the config.json beside the weights)" : " (given)"));
    const BlockConfig& b = c.model.block;
    const std::string arch = c.model.architecture.empty() ? std::string("an unnamed architecture") : c.model.architecture;
    // Neither its attention nor its FFN is the block's: nothing of it runs as layers.
    if (!c.model.attention_unmodelled.empty())
        throw WeightsError(cfg + ": " + arch + "'s attention is " + c.model.attention_unmodelled +
                           "; its checkpoint is not read (the moe ops take the preset or config: --preset, --config)");
    c.note("rope layout: neox (safetensors: HF runs " + arch +
           " with rotate_half; HF's converter already undid Meta's q/k permutation)");
    if (b.qk_norm) c.note("qk_norm: on (" + arch + " norms q and k per head: self_attn.{q,k}_norm.weight)");
    if (b.qkv_bias) c.note("qkv_bias: on (" + arch + " has q_proj, k_proj, v_proj biases: self_attn.{q,k,v}_proj.bias)");
    if (b.sandwich_norm)
        c.note("sandwich norms: on (" + arch + ": post_attention_layernorm and post_feedforward_layernorm norm each "
               "sublayer's output; pre_feedforward_layernorm is the FFN's input norm)");
    if (!c.model.ffn_unmodelled.empty())
        c.note("ffn: not read (" + arch + "'s FFN is " + c.model.ffn_unmodelled + "); the attention is: " +
               (c.model.o_bias ? "q, k, v and o_proj biases, " : "") + "sinks (self_attn.sinks)");
    if (!c.model.o_bias && st.find("model.layers.0.self_attn.o_proj.bias"))
        throw WeightsError((st.index().empty() ? st.files()[0].path() : st.index()) +
                           ": model.layers.0.self_attn.o_proj.bias: an output projection bias, which the block does "
                           "not model (its biases are q, k and v's); refused rather than dropped");

    auto get = [&](const std::string& name, bool matrix, const std::vector<int64_t>& want,
                   const std::vector<std::string>& symbols, const std::string& why = "every model has one") {
        const auto f = st.find(name);
        if (!f)
            throw WeightsError((st.index().empty() ? st.files()[0].path() : st.index()) + ": " + name + ": missing (" +
                               why + ")");
        Slot s{f->file->stored(*f->entry), matrix};
        expect_shape(c, s.t, want, symbols);
        return s;
    };

    const int64_t D = b.d_model, V = c.model.vocab;
    c.embedding = get("model.embed_tokens.weight", false, {V, D}, {"vocab", "D"});
    c.final_norm = get("model.norm.weight", false, {D}, {"D"});
    std::set<std::string> used = {"model.embed_tokens.weight", "model.norm.weight"};
    if (c.model.tie_embeddings) {
        c.lm_head = c.embedding;
        c.note(std::string("lm_head: tied to model.embed_tokens.weight (tie_word_embeddings: true)") +
               (st.find("lm_head.weight") ? "; the file's lm_head.weight is not used, as HF ties them" : ""));
    } else {
        c.lm_head = get("lm_head.weight", true, {V, D}, {"vocab", "D"}, "tie_word_embeddings is false");
        used.insert("lm_head.weight");
        c.note("lm_head: lm_head.weight (tie_word_embeddings: false)");
    }
    for (int64_t l = 0; l < c.model.layers; ++l) {
        const std::string prefix = "model.layers." + std::to_string(l) + ".";
        std::map<std::string, Slot> layer;
        for (const Name& n : kLayer) {
            const std::string schema = n.schema;
            const LayerTensor lt = layer_tensor(schema, c.model);
            if (!lt.present) continue;
            const bool bias = schema == "bq" || schema == "bk" || schema == "bv";
            const bool post = schema == "attn_post_norm" || schema == "ffn_post_norm";
            const std::string hf = prefix + hf_name(n, b.sandwich_norm);
            layer[schema] = get(hf, n.matrix, lt.shape, lt.symbols,
                                schema == "q_norm" || schema == "k_norm" ? arch + " norms q and k per head"
                                : bias || schema == "bo" ? arch + " has projection biases (attention_bias)"
                                : schema == "sinks" ? arch + " has a sink logit per head"
                                : post ? arch + " norms each sublayer's output (sandwich norms)"
                                       : "num_hidden_layers = " + std::to_string(c.model.layers) + " implies it");
            used.insert(hf);
        }
        c.layers.push_back(std::move(layer));
    }
    if (!b.qkv_bias && st.find("model.layers.0.self_attn.q_proj.bias"))
        c.note("model.layers.N.self_attn.{q,k,v}_proj.bias present but " + arch +
               " has none (attention_bias absent or false): not used, as transformers would not load them");
    std::vector<std::string> unused;
    for (const auto& n : st.names())
        if (!used.count(n)) unused.push_back(n);
    if (!unused.empty()) {
        std::string list;
        for (size_t k = 0; k < unused.size() && k < 4; ++k) list += (k ? ", " : "") + unused[k];
        c.note(std::to_string(unused.size()) + " tensors the block does not use: " + list +
               (unused.size() > 4 ? ", ..." : ""));
    }
}

}  // namespace conform::weights

#include "weights/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <set>

#include "weights/checkpoint_impl.h"

namespace conform::weights {

namespace {

// Rows decoded at once when transposing: enough to keep the writes local.
constexpr int64_t kRowBlock = 64;

// [out, in] as stored -> [in, out]; rows [r0, r1) of the stored matrix become
// columns 0 .. r1 - r0 of the result.
Tensor transposed(const StoredTensor& t, int64_t r0, int64_t r1) {
    const int64_t cols = t.cols(), n = r1 - r0;
    Tensor out(cols, n);
    std::vector<float> block(static_cast<size_t>(kRowBlock * cols));
    for (int64_t b = r0; b < r1; b += kRowBlock) {
        const int64_t e = std::min(r1, b + kRowBlock);
        decode_rows(t, b, e, block.data());
        for (int64_t c = 0; c < cols; ++c)
            for (int64_t r = b; r < e; ++r) out.data[static_cast<size_t>(c * n + (r - r0))] = block[(r - b) * cols + c];
    }
    return out;
}

Tensor materialise(const Slot& s) {
    if (s.matrix) return transposed(s.t, 0, s.t.rows());
    Tensor out(1, s.t.numel());
    decode_rows(s.t, 0, s.t.rows(), out.data.data());
    return out;
}

}  // namespace

void Checkpoint::Impl::note(const std::string& line) {
    detected.push_back(line);
    if (log) *log << line << "\n";
}

LayerTensor layer_tensor(const std::string& schema, const config::ModelConfig& m) {
    const BlockConfig& b = m.block;
    const int64_t D = b.d_model, q = b.q_width(), kv = b.kv_width(), F = b.ffn_dim, hd = b.head_dim;
    const bool qk = schema == "q_norm" || schema == "k_norm";
    const bool bias = schema == "bq" || schema == "bk" || schema == "bv";
    const bool post = schema == "attn_post_norm" || schema == "ffn_post_norm";
    const bool ffn = schema == "ffn_norm" || schema == "w1" || schema == "w3" || schema == "w2" || schema == "ffn_post_norm";
    if ((qk && !b.qk_norm) || (bias && !b.qkv_bias) || (post && !b.sandwich_norm) || (schema == "bo" && !m.o_bias) ||
        (schema == "sinks" && !b.attn_sinks) || (ffn && !m.ffn_unmodelled.empty()))
        return {};
    if (schema == "attn_norm" || schema == "ffn_norm" || post || schema == "bo") return {true, {D}, {"D"}};
    if (schema == "sinks") return {true, {b.n_heads}, {"H"}};
    if (qk) return {true, {hd}, {"hd"}};
    if (schema == "bq") return {true, {q}, {"H*hd"}};
    if (bias) return {true, {kv}, {"KV*hd"}};
    if (schema == "wq") return {true, {q, D}, {"H*hd", "D"}};
    if (schema == "wk" || schema == "wv") return {true, {kv, D}, {"KV*hd", "D"}};
    if (schema == "wo") return {true, {D, q}, {"D", "H*hd"}};
    if (schema == "w1" || schema == "w3") return {true, {F, D}, {"F", "D"}};
    return {true, {D, F}, {"D", "F"}};  // w2
}

void expect_shape(const Checkpoint::Impl& c, const StoredTensor& t, const std::vector<int64_t>& want,
                  const std::vector<std::string>& symbols) {
    if (t.shape == want) return;
    const bool ne = c.format == "gguf";
    auto order = [&](auto v) {
        if (ne) std::reverse(v.begin(), v.end());
        return v;
    };
    std::string sym = "[";
    for (const auto& s : order(symbols)) sym += (sym.size() > 1 ? ", " : "") + s;
    sym += "]";
    throw WeightsError(t.file + ": " + t.name + ": " + (ne ? "ne" : "shape") + ": expected " +
                       shape_string(order(want)) + " = " + sym + ", found " + shape_string(order(t.shape)));
}

void note_encodings(Checkpoint::Impl& c) {
    std::map<Encoding, int> count;
    std::set<std::string> seen;  // a tied head is the embedding: count it once
    auto add = [&](const Slot& s) {
        if (seen.insert(s.t.name).second) ++count[s.t.encoding];
    };
    add(c.embedding);
    add(c.final_norm);
    add(c.lm_head);
    for (const auto& layer : c.layers)
        for (const auto& [_, s] : layer) add(s);
    for (const auto& [e, n] : count) {
        const std::string tensors = " (" + std::to_string(n) + (n == 1 ? " tensor)" : " tensors)");
        if (is_quantised(e)) c.note(std::string(to_string(e)) + " dequantised to float32" + tensors);
        else if (e != Encoding::f32) c.note(std::string(to_string(e)) + " converted to float32" + tensors);
        else c.note("F32 read as stored" + tensors);
    }
}

Checkpoint::Checkpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

Checkpoint Checkpoint::open(const std::string& path, std::ostream* log, const std::string& config_json) {
    auto impl = std::make_unique<Impl>();
    impl->log = log;
    std::error_code ec;
    const bool is_gguf = !std::filesystem::is_directory(path, ec) && std::filesystem::path(path).extension() == ".gguf";
    if (is_gguf) {
        if (!config_json.empty())
            throw WeightsError(path + ": a GGUF file carries its configuration in its metadata; no config.json is read (" +
                               config_json + ")");
        impl->format = "gguf";
        open_gguf(*impl, path);
    } else {
        impl->format = "safetensors";
        open_safetensors(*impl, path, config_json);
    }
    note_encodings(*impl);
    return Checkpoint(std::move(impl));
}

const std::string& Checkpoint::format() const { return impl_->format; }
const config::ModelConfig& Checkpoint::model() const { return impl_->model; }
const std::vector<std::string>& Checkpoint::detected() const { return impl_->detected; }
const std::vector<float>& Checkpoint::rope_freq_factors() const { return impl_->rope_factors; }

Encoding Checkpoint::encoding(int64_t l, const std::string& name) const {
    if (l < 0 || l >= static_cast<int64_t>(impl_->layers.size()) || !impl_->layers[static_cast<size_t>(l)].count(name))
        throw WeightsError(impl_->model.name + ": layer " + std::to_string(l) + " weight '" + name + "' asked, not in the model");
    return impl_->layers[static_cast<size_t>(l)].at(name).t.encoding;
}

Encoding Checkpoint::lm_head_encoding() const { return impl_->lm_head.t.encoding; }

Named Checkpoint::layer(int64_t l) const {
    if (l < 0 || l >= static_cast<int64_t>(impl_->layers.size()))
        throw WeightsError(impl_->model.name + ": layer " + std::to_string(l) + " asked, the model has " +
                           std::to_string(impl_->layers.size()) + " (0 .. " +
                           std::to_string(static_cast<int64_t>(impl_->layers.size()) - 1) + ")");
    Named w;
    for (const auto& [schema, slot] : impl_->layers[static_cast<size_t>(l)]) w[schema] = materialise(slot);
    return w;
}

Tensor Checkpoint::embedding() const {
    const StoredTensor& t = impl_->embedding.t;
    Tensor out(t.rows(), t.cols());
    decode_rows(t, 0, t.rows(), out.data.data());
    return out;
}

Tensor Checkpoint::embedding_rows(const std::vector<int64_t>& ids) const {
    const StoredTensor& t = impl_->embedding.t;
    Tensor out(static_cast<int64_t>(ids.size()), t.cols());
    for (size_t k = 0; k < ids.size(); ++k) {
        if (ids[k] < 0 || ids[k] >= t.rows())
            throw WeightsError(t.file + ": " + t.name + ": token id " + std::to_string(ids[k]) + " out of range [0, " +
                               std::to_string(t.rows()) + ")");
        decode_rows(t, ids[k], ids[k] + 1, out.data.data() + k * static_cast<size_t>(t.cols()));
    }
    return out;
}

Tensor Checkpoint::final_norm() const { return materialise(impl_->final_norm); }

Tensor Checkpoint::lm_head() const { return transposed(impl_->lm_head.t, 0, impl_->lm_head.t.rows()); }

Tensor Checkpoint::lm_head_columns(int64_t v0, int64_t v1) const {
    const StoredTensor& t = impl_->lm_head.t;
    if (v0 < 0 || v1 < v0 || v1 > t.rows())
        throw WeightsError(t.file + ": " + t.name + ": vocab columns [" + std::to_string(v0) + ", " +
                           std::to_string(v1) + ") asked, the vocabulary is [0, " + std::to_string(t.rows()) + ")");
    return transposed(t, v0, v1);
}

}  // namespace conform::weights

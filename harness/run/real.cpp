#include "run/real.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>
#include <sstream>

#include "config/hf_config.h"
#include "core/phases.h"
#include "core/rng.h"
#include "reference/model.h"

namespace conform::run {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

int64_t parse_int(const std::string& s, const std::string& flag, const std::string& what) {
    try {
        size_t used = 0;
        const long long v = std::stoll(s, &used);
        if (used != s.size()) throw std::invalid_argument("trailing");
        return v;
    } catch (const std::exception&) {
        throw InputError(flag + ": expected " + what + ", found '" + s + "'");
    }
}

TensorStats stats_of(const std::string& name, const Tensor& t) {
    TensorStats s;
    s.name = name;
    s.shape = t.shape;
    double sq = 0;
    size_t at = 0;
    for (size_t i = 0; i < t.data.size(); ++i) {
        const double a = std::fabs(static_cast<double>(t.data[i]));
        sq += a * a;
        if (a > s.max_abs) s.max_abs = a, at = i;
    }
    s.rms = t.data.empty() ? 0 : std::sqrt(sq / static_cast<double>(t.data.size()));
    const int64_t cols = std::max<int64_t>(1, t.cols());
    s.row = static_cast<int64_t>(at) / cols;
    s.col = static_cast<int64_t>(at) % cols;
    return s;
}

Tensor to_float(const DTensor& d) {
    Tensor t(d.rows(), d.cols());
    for (size_t i = 0; i < d.data.size(); ++i) t.data[i] = static_cast<float>(d.data[i]);
    return t;
}

DTensor to_double(const Tensor& t) {
    DTensor d;
    d.shape = t.shape;
    d.data.assign(t.data.begin(), t.data.end());
    return d;
}

}  // namespace

std::vector<int64_t> parse_layers(const std::string& spec, int64_t layers, const std::string& flag) {
    std::vector<int64_t> out;
    auto check = [&](int64_t l) {
        if (l < 0 || l >= layers)
            throw InputError(flag + ": layer " + std::to_string(l) + " is outside the model's " + std::to_string(layers) +
                             " layers (0 .. " + std::to_string(layers - 1) + ")");
        return l;
    };
    if (spec.empty()) return {check(0)};
    if (spec == "all") {
        for (int64_t l = 0; l < layers; ++l) out.push_back(l);
        return out;
    }
    const auto dash = spec.find('-');
    if (dash == std::string::npos) return {check(parse_int(spec, flag, "N, A-B or all"))};
    const int64_t a = check(parse_int(spec.substr(0, dash), flag, "N, A-B or all"));
    const int64_t b = check(parse_int(spec.substr(dash + 1), flag, "N, A-B or all"));
    if (b < a) throw InputError(flag + ": '" + spec + "' is an empty range (A-B needs A <= B)");
    for (int64_t l = a; l <= b; ++l) out.push_back(l);
    return out;
}

std::vector<int64_t> parse_token_ids(const std::string& ids, const std::string& flag) {
    std::vector<int64_t> out;
    std::stringstream ss(ids);
    std::string item;
    while (std::getline(ss, item, ',')) {
        if (item.empty()) continue;
        const int64_t v = parse_int(item, flag, "comma-separated token ids");
        if (v < 0) throw InputError(flag + ": token id " + item + " is negative");
        out.push_back(v);
    }
    if (out.empty()) throw InputError(flag + ": no token ids in '" + ids + "'");
    return out;
}

std::vector<int64_t> default_tokens(int64_t n, int64_t vocab) {
    Rng r{0x7E57ull};
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (auto& id : ids) id = r.below(std::max<int64_t>(vocab, 1));
    return ids;
}

std::shared_ptr<RealModel> RealModel::open(const RealOptions& o, std::ostream* log) {
    const config::ConfigOptions& ov = o.overrides;
    if (ov.o_preset && ov.o_preset->count())
        throw InputError("--preset: --weights reads the configuration from the checkpoint (" + o.path + ")");
    const std::string config_json = ov.o_file && ov.o_file->count() ? ov.file : "";
    std::shared_ptr<RealModel> m;
    try {
        m.reset(new RealModel(weights::Checkpoint::open(o.path, log, config_json), o));
    } catch (const weights::WeightsError& e) {
        throw InputError(e.what());
    }
    // The weights fix every size; the conventions may be overridden (to ask
    // what the model computes read another way: a GGUF as NeoX).
    const config::ModelConfig& found = m->ckpt_.model();
    if (!found.ffn_unmodelled.empty())
        throw InputError(o.path + ": " + found.architecture + "'s FFN is " + found.ffn_unmodelled +
                         ", so its layers cannot run as blocks: `conform forward --weights " + o.path +
                         " --expect-hidden FILE` checks its attention, layer by layer, on an engine's own stream");
    for (const auto& [opt, flag] : {std::pair{ov.o_d_model, "--d-model"}, {ov.o_heads, "--heads"},
                                    {ov.o_kv_heads, "--kv-heads"}, {ov.o_head_dim, "--head-dim"}, {ov.o_ffn, "--ffn"},
                                    {ov.o_layers, "--layers"}, {ov.o_kv_lora_rank, "--kv-lora-rank"},
                                    {ov.o_qk_nope_head_dim, "--qk-nope-head-dim"},
                                    {ov.o_qk_rope_head_dim, "--qk-rope-head-dim"}, {ov.o_v_head_dim, "--v-head-dim"}})
        if (opt && opt->count())
            throw InputError(std::string(flag) + ": the checkpoint's weights fix the sizes (" + o.path + ")");
    config::ConfigOptions conventions = ov;
    conventions.o_file = nullptr;
    conventions.o_preset = nullptr;
    try {
        m->model_ = config::resolve_config(conventions, found);
    } catch (const config::ConfigError& e) {
        throw InputError(e.what());
    }
    if (m->model_.block.qk_norm && !found.block.qk_norm)
        throw InputError("--qk-norm 1: " + o.path + " has no q_norm / k_norm weights");
    if (m->model_.block.qkv_bias != found.block.qkv_bias)
        throw InputError(std::string("--qkv-bias ") + (found.block.qkv_bias ? "0" : "1") + ": " + o.path +
                         (found.block.qkv_bias ? " has q, k, v biases; a model without them is another model"
                                               : " has no bq / bk / bv weights"));
    m->layers_ = parse_layers(o.layers, m->model_.layers, "--layer/--layers");
    if (o.tokens.empty() && o.n_tokens < 1)
        throw InputError("--token-count: expected a positive count, found " + std::to_string(o.n_tokens));
    m->tokens_ = o.tokens.empty() ? default_tokens(o.n_tokens, m->model_.vocab) : o.tokens;
    const int64_t vocab = m->model_.vocab;
    for (int64_t id : m->tokens_)
        if (vocab > 0 && id >= vocab)
            throw InputError("--tokens: token id " + std::to_string(id) + " is past the vocabulary (" +
                             std::to_string(vocab) + " ids)");
    if (o.start < 0) throw InputError("--positions: expected a position >= 0, found " + std::to_string(o.start));
    m->slots_.resize(static_cast<size_t>(m->model_.layers));
    return m;
}

std::shared_ptr<gen::RealLayer> RealModel::mutable_slot(int64_t layer) {
    if (layer < 0 || layer >= model_.layers)
        throw InputError("layer " + std::to_string(layer) + " is outside " + o_.path + "'s " +
                         std::to_string(model_.layers) + " layers");
    auto& s = slots_[static_cast<size_t>(layer)];
    if (!s) {
        s = std::make_shared<gen::RealLayer>();
        s->layer = layer;
        s->model_inputs = o_.model_inputs;
        s->rows = static_cast<int64_t>(tokens_.size());
        s->start = o_.start;
        s->n_heads = model_.block.n_heads;
    }
    return s;
}

std::shared_ptr<const gen::RealLayer> RealModel::slot(int64_t layer) { return mutable_slot(layer); }

LayerStats RealModel::load(int64_t layer) {
    auto s = mutable_slot(layer);
    LayerStats st;
    st.layer = layer;
    st.model_inputs = o_.model_inputs;
    auto t0 = Clock::now();
    try {
        phases::Scope p("read weights");
        s->weights = ckpt_.layer(layer);
    } catch (const weights::WeightsError& e) {
        throw InputError(e.what());
    }
    st.seconds_read = since(t0);
    for (const auto& [name, w] : s->weights) st.weights.push_back(stats_of(name, w));
    if (!o_.model_inputs) return st;

    t0 = Clock::now();
    phases::Scope p("model inputs (the stream through the layers before)");
    std::vector<int64_t> positions(tokens_.size());
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = o_.start + static_cast<int64_t>(i);
    try {
        if (stream_at_ < 0 || stream_at_ > layer) {
            // x = embed_tokens(ids) * multiplier (Gemma: sqrt(D))
            stream_ = to_double(ckpt_.embedding_rows(tokens_));
            for (double& v : stream_.data) v *= model_.embedding_multiplier;
            stream_at_ = 0;
        }
        while (stream_at_ < layer) {
            const Named w = ckpt_.layer(stream_at_);
            stream_ = ref::block_f64(stream_, w, positions, model_.layer_block(stream_at_)).out;
            ++stream_at_;
        }
    } catch (const weights::WeightsError& e) {
        throw InputError(e.what());
    }
    // The layer's own activations on that stream.
    const ref::BlockStep step = ref::block_f64(stream_, s->weights, positions, model_.layer_block(layer), /*all_taps=*/true);
    s->acts.clear();
    s->acts["x"] = to_float(stream_);
    for (const char* name : {"attn_in", "q", "rope_in", "q_rot", "k_rot", "v", "ffn_in"})
        s->acts[name] = to_float(step.taps.at(name));
    // Its output is the next layer's input: --layers all reads and runs each layer once.
    stream_ = step.out;
    stream_at_ = layer + 1;
    st.seconds_stream = since(t0);

    // The stream's channels: max |x| over the rows, the largest few against the median.
    const Tensor& x = s->acts.at("x");
    const int64_t D = x.cols();
    std::vector<ChannelStats> ch(static_cast<size_t>(D));
    double sq = 0;
    for (int64_t j = 0; j < D; ++j) ch[static_cast<size_t>(j)].channel = j;
    for (int64_t i = 0; i < x.rows(); ++i)
        for (int64_t j = 0; j < D; ++j) {
            const double a = std::fabs(static_cast<double>(x.data[static_cast<size_t>(i * D + j)]));
            sq += a * a;
            ch[static_cast<size_t>(j)].max_abs = std::max(ch[static_cast<size_t>(j)].max_abs, a);
        }
    st.x_rms = std::sqrt(sq / std::max<double>(1.0, static_cast<double>(x.numel())));
    std::sort(ch.begin(), ch.end(), [](const auto& a, const auto& b) { return a.max_abs > b.max_abs; });
    st.median_channel = ch.empty() ? 0 : ch[ch.size() / 2].max_abs;
    ch.resize(std::min<size_t>(ch.size(), 5));
    st.top_channels = ch;
    return st;
}

void RealModel::release(int64_t layer) {
    if (layer < 0 || layer >= model_.layers) return;
    if (auto& s = slots_[static_cast<size_t>(layer)]) {
        Named().swap(s->weights);
        Named().swap(s->acts);
    }
}

namespace {
// A path as one shell word.
std::string shell_word(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=,:") ==
                          std::string::npos)
        return s;
    std::string q = "'";
    for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}
}  // namespace

std::string RealModel::replay_flags() const {
    std::string f = " --weights " + shell_word(o_.path);
    const config::ConfigOptions& ov = o_.overrides;
    if (ov.o_file && ov.o_file->count()) f += " --config " + shell_word(ov.file);
    if (ov.o_layout && ov.o_layout->count()) f += " --layout " + ov.layout;
    if (ov.o_theta && ov.o_theta->count()) f += fmt::format(" --theta {}", ov.theta);
    if (ov.o_eps && ov.o_eps->count()) f += fmt::format(" --eps {}", ov.eps);
    f += ov.twist_flags();
    if (o_.model_inputs) {
        f += " --inputs model";
        if (!o_.tokens.empty()) {
            std::string ids;
            for (int64_t t : o_.tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
            f += " --tokens " + ids;
        } else if (o_.n_tokens != 64) {
            f += " --token-count " + std::to_string(o_.n_tokens);
        }
        if (o_.start != 0) f += " --positions " + std::to_string(o_.start);
    }
    return f;
}

void RealModel::print_header(std::ostream& os, const std::string& prefix) const {
    for (const auto& l : ckpt_.detected()) os << prefix << l << "\n";
    std::string layers;
    for (int64_t l : layers_) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    os << fmt::format("{}--weights {}: layer{} {}; {} inputs{}\n", prefix, o_.path, layers_.size() == 1 ? "" : "s",
                      layers, o_.model_inputs ? "model" : "drawn",
                      o_.model_inputs ? fmt::format(" ({} tokens from position {})", tokens_.size(), o_.start)
                                      : std::string());
}

void RealModel::add_to_config_json(nlohmann::json& config) const {
    config["weights"] = o_.path;
    config["layers"] = layers_;
    config["inputs"] = o_.model_inputs ? "model" : "drawn";
    if (o_.model_inputs) {
        config["tokens"] = tokens_;
        config["first_position"] = o_.start;
    }
}

void print_layer_stats(std::ostream& os, const LayerStats& s, const std::string& indent) {
    os << fmt::format("{}layer {}: weights read in {:.2f} s\n", indent, s.layer, s.seconds_read);
    for (const auto& w : s.weights)
        os << fmt::format("{}  {:<10} {:<14} max |w| {:<9.4g} at [{}, {}]  rms {:.4g}  ({:.0f}x rms)\n", indent, w.name,
                          shape_str(w.shape), w.max_abs, w.row, w.col, w.rms, w.rms > 0 ? w.max_abs / w.rms : 0.0);
    if (!s.model_inputs) {
        os << indent << "  inputs drawn (--inputs model feeds the layer the real residual stream)\n";
        return;
    }
    std::string top;
    for (const auto& c : s.top_channels) top += fmt::format("{}{} ({:.3g})", top.empty() ? "" : ", ", c.channel, c.max_abs);
    os << fmt::format("{}  stream into layer {} (computed in {:.2f} s): rms {:.4g}; largest channels by max |x|: {}; "
                      "median channel {:.3g}{}\n",
                      indent, s.layer, s.seconds_stream, s.x_rms, top, s.median_channel,
                      !s.top_channels.empty() && s.median_channel > 0
                          ? fmt::format(" ({:.0f}x)", s.top_channels.front().max_abs / s.median_channel)
                          : "");
}

}  // namespace conform::run

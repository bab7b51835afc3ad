#include "weights/writers.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "core/rng.h"  // the weights are drawn with core's Rng::normal

namespace conform::weights::testing {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

template <class T>
void put(std::string& out, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out.append(b, sizeof(T));
}
void put_str(std::string& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out += s;
}

HfTensor draw(Rng& r, std::vector<int64_t> shape, double stddev, double mean = 0) {
    HfTensor t;
    t.shape = std::move(shape);
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    t.data.resize(static_cast<size_t>(n));
    for (auto& v : t.data) v = static_cast<float>(mean + stddev * r.normal());
    return t;
}

// float16 bits to their value, kept local so the writer does not lean on the
// reader's conversion.
float half_value(uint16_t h) {
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, static_cast<int>(e) - 15);
    return h & 0x8000 ? -v : v;
}

// ggml's Q8_0 / Q4_0 on one block of 32.
void q8_block(const float* x, std::string& out) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint16_t d16 = float_to_half(amax / 127.0f);
    const float d = half_value(d16);
    put<uint16_t>(out, d16);
    for (int j = 0; j < 32; ++j) {
        const float q = d == 0 ? 0.0f : std::round(x[j] / d);
        out.push_back(static_cast<char>(static_cast<int8_t>(std::max(-127.0f, std::min(127.0f, q)))));
    }
}
void q4_block(const float* x, std::string& out) {
    float mx = 0;  // the value of largest magnitude, with its sign (it maps to q = 0)
    for (int j = 0; j < 32; ++j)
        if (std::fabs(x[j]) > std::fabs(mx)) mx = x[j];
    const uint16_t d16 = float_to_half(mx / -8.0f);
    const float d = half_value(d16);
    put<uint16_t>(out, d16);
    int q[32];
    for (int j = 0; j < 32; ++j) q[j] = d == 0 ? 8 : std::max(0, std::min(15, static_cast<int>(std::floor(x[j] / d + 8.5f))));
    for (int j = 0; j < 16; ++j) out.push_back(static_cast<char>(q[j] | (q[j + 16] << 4)));
}

int clamp_round(float v, int lo, int hi) { return std::max(lo, std::min(hi, static_cast<int>(std::lround(v)))); }

// A Q4_K (bits 4) or Q5_K (bits 5) super-block of 256 from the format's
// definition (ggml-common.h block_q4_K / block_q5_K): 8 sub-blocks of 32,
// each x ~ d sc q - dmin m with 6-bit sc, m and q in [0, 2^bits). Not
// ggml's quantiser (which searches for the scales): any valid block will do,
// the reader's exactness is tests/test_dequant.cpp's business.
void qk_asym_block(const float* x, int bits, std::string& out) {
    const int qmax = (1 << bits) - 1;
    float scale[8], minus_min[8];  // per sub-block: step, and -min (>= 0: the zero stays in range)
    float smax = 0, mmax = 0;
    for (int j = 0; j < 8; ++j) {
        float lo = 0, hi = 0;
        for (int l = 0; l < 32; ++l) lo = std::min(lo, x[32 * j + l]), hi = std::max(hi, x[32 * j + l]);
        scale[j] = (hi - lo) / static_cast<float>(qmax);
        minus_min[j] = -lo;
        smax = std::max(smax, scale[j]), mmax = std::max(mmax, minus_min[j]);
    }
    const uint16_t d16 = float_to_half(smax / 63), dmin16 = float_to_half(mmax / 63);
    const float d = half_value(d16), dmin = half_value(dmin16);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; ++j) {
        sc[j] = static_cast<uint8_t>(d == 0 ? 0 : clamp_round(scale[j] / d, 0, 63));
        m[j] = static_cast<uint8_t>(dmin == 0 ? 0 : clamp_round(minus_min[j] / dmin, 0, 63));
    }
    put<uint16_t>(out, d16);
    put<uint16_t>(out, dmin16);
    // The 12 scale bytes, as get_scale_min_k4 unpacks them: sub-blocks 0..3 in
    // the low 6 bits of bytes 0..3 (sc) and 4..7 (m); 4..7 split into a nibble
    // of bytes 8..11 and the top 2 bits of bytes 0..7.
    uint8_t packed[12];
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
    }
    out.append(reinterpret_cast<const char*>(packed), 12);
    int q[256];
    for (int e = 0; e < 256; ++e) {
        const float step = d * sc[e / 32];
        q[e] = step == 0 ? 0 : clamp_round((x[e] + dmin * m[e / 32]) / step, 0, qmax);
    }
    // Pairs of sub-blocks share 32 bytes: the first in the low nibbles, the
    // second in the high; Q5_K's 5th bits in qh[l], bits 2p and 2p + 1.
    if (bits == 5) {
        uint8_t qh[32] = {};
        for (int p = 0; p < 4; ++p)
            for (int l = 0; l < 32; ++l)
                qh[l] = static_cast<uint8_t>(qh[l] | ((q[64 * p + l] >> 4) << (2 * p)) | ((q[64 * p + 32 + l] >> 4) << (2 * p + 1)));
        out.append(reinterpret_cast<const char*>(qh), 32);
    }
    for (int p = 0; p < 4; ++p)
        for (int l = 0; l < 32; ++l) out.push_back(static_cast<char>((q[64 * p + l] & 0xF) | ((q[64 * p + 32 + l] & 0xF) << 4)));
}

// A Q6_K super-block (block_q6_K): 16 sub-blocks of 16 with an int8 scale,
// x ~ d sc (q - 32), q in [0, 64); ql the low nibbles, qh the top 2 bits, d last.
void q6k_block(const float* x, std::string& out) {
    float scale[16], smax = 0;
    for (int j = 0; j < 16; ++j) {
        float amax = 0;
        for (int l = 0; l < 16; ++l) amax = std::max(amax, std::fabs(x[16 * j + l]));
        scale[j] = amax / 31;
        smax = std::max(smax, scale[j]);
    }
    const uint16_t d16 = float_to_half(smax / 127);
    const float d = half_value(d16);
    int8_t sc[16];
    int q[256];
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<int8_t>(d == 0 ? 0 : clamp_round(scale[j] / d, -128, 127));
    for (int e = 0; e < 256; ++e) {
        const float step = d * sc[e / 16];
        q[e] = (step == 0 ? 0 : clamp_round(x[e] / step, -32, 31)) + 32;
    }
    // Each half of 128: ql[l] holds elements l (low) and l + 64 (high),
    // ql[l + 32] elements l + 32 and l + 96; qh[l] their top bits, 2 each.
    uint8_t ql[128], qh[64];
    for (int n = 0; n < 2; ++n)
        for (int l = 0; l < 32; ++l) {
            const int* h = q + 128 * n;
            ql[64 * n + l] = static_cast<uint8_t>((h[l] & 0xF) | ((h[l + 64] & 0xF) << 4));
            ql[64 * n + l + 32] = static_cast<uint8_t>((h[l + 32] & 0xF) | ((h[l + 96] & 0xF) << 4));
            qh[32 * n + l] = static_cast<uint8_t>((h[l] >> 4) | ((h[l + 32] >> 4) << 2) | ((h[l + 64] >> 4) << 4) | ((h[l + 96] >> 4) << 6));
        }
    out.append(reinterpret_cast<const char*>(ql), 128);
    out.append(reinterpret_cast<const char*>(qh), 64);
    out.append(reinterpret_cast<const char*>(sc), 16);
    put<uint16_t>(out, d16);
}

std::string hf_arch(const std::string& a) {
    if (a == "qwen3") return "Qwen3ForCausalLM";
    if (a == "qwen2") return "Qwen2ForCausalLM";
    if (a == "gemma") return "GemmaForCausalLM";
    if (a == "gemma2") return "Gemma2ForCausalLM";
    if (a == "gemma3") return "Gemma3ForCausalLM";
    if (a == "mistral") return "MistralForCausalLM";
    if (a == "smollm3") return "SmolLM3ForCausalLM";
    if (a == "gpt_oss") return "GptOssForCausalLM";
    return "LlamaForCausalLM";
}

bool gemma_family(const std::string& a) { return a == "gemma" || a == "gemma2" || a == "gemma3"; }
bool sandwich(const std::string& a) { return a == "gemma2" || a == "gemma3"; }
// The FFN's input norm: Llama's post_attention_layernorm, Gemma 2/3's pre_feedforward_layernorm.
std::string ffn_norm_name(const std::string& a) {
    return sandwich(a) ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
}

}  // namespace

// ---- numbers ---------------------------------------------------------------------

uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);
    if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
    if (ax < 0x38800000u) {  // below 2^-14: a multiple of 2^-24
        float a;
        std::memcpy(&a, &ax, 4);
        return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
    }
    uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7FFFFFu) >> 13);
    const uint32_t rest = ax & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
}

uint16_t float_to_bf16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
    return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

float round_to_half(float f) {
    const uint16_t h = float_to_half(f);
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(1.0f + m / 1024.0f, static_cast<int>(e) - 15);
    return (h & 0x8000) ? -v : v;
}

float round_to_bf16(float f) {
    const uint32_t x = static_cast<uint32_t>(float_to_bf16(f)) << 16;
    float v;
    std::memcpy(&v, &x, 4);
    return v;
}

// ---- the model --------------------------------------------------------------------------------

Model random_model(const ModelSpec& s) {
    Model m;
    m.spec = s;
    Rng r{s.seed};
    const int64_t D = s.d_model, q = s.n_heads * s.head_dim, kv = s.n_kv_heads * s.head_dim, F = s.ffn_dim;
    auto lin = [&](int64_t out, int64_t in) { return draw(r, {out, in}, 1.0 / std::sqrt(static_cast<double>(in))); };
    // Gemma stores each norm's scale as its offset from one, and scales its
    // embedding by sqrt(D) (drawn 1/sqrt(D) here, so the stream starts at std 1).
    const bool gemma = gemma_family(s.arch);
    auto norm = [&](int64_t n) { return draw(r, {n}, 0.1, gemma ? 0.0 : 1.0); };
    m.tensors["model.embed_tokens.weight"] = draw(r, {s.vocab, D}, gemma ? 1.0 / std::sqrt(static_cast<double>(D)) : 1.0);
    for (int64_t l = 0; l < s.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        m.tensors[p + "input_layernorm.weight"] = norm(D);
        m.tensors[p + "self_attn.q_proj.weight"] = lin(q, D);
        m.tensors[p + "self_attn.k_proj.weight"] = lin(kv, D);
        m.tensors[p + "self_attn.v_proj.weight"] = lin(kv, D);
        m.tensors[p + "self_attn.o_proj.weight"] = lin(D, q);
        if (s.arch == "qwen3" || s.arch == "gemma3") {
            m.tensors[p + "self_attn.q_norm.weight"] = norm(s.head_dim);
            m.tensors[p + "self_attn.k_norm.weight"] = norm(s.head_dim);
        }
        if (s.arch == "qwen2") {  // Qwen2's projections carry biases; k's with a large mean, as Qwen2.5's do
            m.tensors[p + "self_attn.q_proj.bias"] = draw(r, {q}, 1.0, 0.5);
            m.tensors[p + "self_attn.k_proj.bias"] = draw(r, {kv}, 1.0, 4.0);
            m.tensors[p + "self_attn.v_proj.bias"] = draw(r, {kv}, 1.0, -0.5);
        }
        m.tensors[p + ffn_norm_name(s.arch)] = norm(D);
        if (s.arch == "gpt_oss") {
            // gpt-oss: every projection has a bias (o_proj too), one sink logit per head, and a
            // mixture of experts as transformers' GptOssExperts stores it (gate_up_proj [E, D, 2F],
            // gate and up interleaved along the last dim, used as x @ W; down_proj [E, F, D]).
            m.tensors[p + "self_attn.q_proj.bias"] = draw(r, {q}, 0.5);
            m.tensors[p + "self_attn.k_proj.bias"] = draw(r, {kv}, 0.5, 1.0);
            m.tensors[p + "self_attn.v_proj.bias"] = draw(r, {kv}, 0.5);
            m.tensors[p + "self_attn.o_proj.bias"] = draw(r, {D}, 0.5);
            m.tensors[p + "self_attn.sinks"] = draw(r, {s.n_heads}, 1.5);
            const int64_t E = s.experts;
            m.tensors[p + "mlp.router.weight"] = lin(E, D);
            m.tensors[p + "mlp.router.bias"] = draw(r, {E}, 0.5);
            m.tensors[p + "mlp.experts.gate_up_proj"] = draw(r, {E, D, 2 * F}, 1.0 / std::sqrt(static_cast<double>(D)));
            m.tensors[p + "mlp.experts.gate_up_proj_bias"] = draw(r, {E, 2 * F}, 0.5);
            m.tensors[p + "mlp.experts.down_proj"] = draw(r, {E, F, D}, 1.0 / std::sqrt(static_cast<double>(F)));
            m.tensors[p + "mlp.experts.down_proj_bias"] = draw(r, {E, D}, 0.5);
            continue;
        }
        m.tensors[p + "mlp.gate_proj.weight"] = lin(F, D);
        m.tensors[p + "mlp.up_proj.weight"] = lin(F, D);
        m.tensors[p + "mlp.down_proj.weight"] = lin(D, F);
        if (sandwich(s.arch)) {  // Gemma 2/3: each sublayer's output normed (drawn after the rest: older models keep their draw)
            m.tensors[p + "post_attention_layernorm.weight"] = norm(D);
            m.tensors[p + "post_feedforward_layernorm.weight"] = norm(D);
        }
    }
    m.tensors["model.norm.weight"] = norm(D);
    if (!s.tie) m.tensors["lm_head.weight"] = lin(s.vocab, D);
    return m;
}

// ---- safetensors ------------------------------------------------------------------------------

std::string encode(const std::vector<float>& v, const std::string& dtype) {
    std::string out;
    for (float f : v) {
        if (dtype == "F32") put<float>(out, f);
        else if (dtype == "F16") put<uint16_t>(out, float_to_half(f));
        else if (dtype == "BF16") put<uint16_t>(out, float_to_bf16(f));
        else throw std::invalid_argument("encode: dtype " + dtype);
    }
    return out;
}

std::string safetensors_raw(const std::string& header, const std::string& data) {
    std::string out;
    put<uint64_t>(out, header.size());
    return out + header + data;
}

std::string safetensors_bytes(const std::vector<StOut>& tensors, const std::map<std::string, std::string>& metadata) {
    // Written by hand, in the order given (json would sort the keys).
    std::ostringstream h;
    h << "{";
    bool first = true;
    if (!metadata.empty()) {
        h << "\"__metadata__\":" << json(metadata).dump();
        first = false;
    }
    std::string data;
    for (const auto& t : tensors) {
        h << (first ? "" : ",") << json(t.name).dump() << ":{\"dtype\":" << json(t.dtype).dump()
          << ",\"shape\":" << json(t.shape).dump() << ",\"data_offsets\":[" << data.size() << ","
          << data.size() + t.bytes.size() << "]}";
        data += t.bytes;
        first = false;
    }
    h << "}";
    std::string header = h.str();
    header.append((8 - header.size() % 8) % 8, ' ');
    return safetensors_raw(header, data);
}

std::string hf_config_json(const Model& m) {
    const ModelSpec& s = m.spec;
    json j = {{"architectures", {hf_arch(s.arch)}},
              {"model_type", s.arch == "gemma3" ? "gemma3_text" : s.arch},
              {"hidden_size", s.d_model},
              {"num_attention_heads", s.n_heads},
              {"num_key_value_heads", s.n_kv_heads},
              {"head_dim", s.head_dim},
              {"intermediate_size", s.ffn_dim},
              {"num_hidden_layers", s.layers},
              {"vocab_size", s.vocab},
              {"max_position_embeddings", s.max_position},
              {"rms_norm_eps", s.eps},
              {"rope_theta", s.theta},
              {"tie_word_embeddings", s.tie},
              {"hidden_act", s.arch == "gemma" ? "gelu" : gemma_family(s.arch) ? "gelu_pytorch_tanh" : "silu"},
              {"torch_dtype", "float32"}};
    // Gemma's released config.json files say hidden_act "gelu" and (later) hidden_activation, which GemmaMLP runs.
    if (gemma_family(s.arch)) j["hidden_activation"] = "gelu_pytorch_tanh";
    if (s.arch == "mistral" || sandwich(s.arch)) j["sliding_window"] = s.window;
    if (sandwich(s.arch)) j["query_pre_attn_scalar"] = s.head_dim;  // as llama.cpp assumes below 27B
    if (s.arch == "gemma2") {
        j["attn_logit_softcapping"] = s.attn_softcap;
        j["final_logit_softcapping"] = s.final_softcap;
    }
    if (s.arch == "smollm3") {  // every 4th layer NoPE, as SmolLM3Config's no_rope_layer_interval (and llama.cpp)
        std::vector<int> use_rope;
        for (int64_t l = 0; l < s.layers; ++l) use_rope.push_back((l + 1) % 4 != 0);
        j["no_rope_layers"] = use_rope;
    }
    if (s.arch == "gpt_oss") {  // layer 0 sliding, then alternating (GptOssConfig's default layer_types)
        std::vector<std::string> types;
        for (int64_t l = 0; l < s.layers; ++l) types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
        j["layer_types"] = types;
        j["sliding_window"] = s.window;
        j["attention_bias"] = true;
        j["num_local_experts"] = s.experts;
        j["num_experts_per_tok"] = s.experts_used;
        j["experts_per_token"] = s.experts_used;
        j["swiglu_limit"] = 7.0;
        // Plain RoPE, said explicitly: GptOssConfig's default is YaRN (truncate: false).
        j["rope_scaling"] = {{"rope_type", "default"}};
        j.erase("hidden_act");
    }
    if (s.arch == "gemma3") {
        j["sliding_window_pattern"] = 6;
        j["rope_local_base_freq"] = s.local_theta;
        j["attn_logit_softcapping"] = nullptr;
        j["final_logit_softcapping"] = nullptr;
    }
    if (s.scaling.type == RopeScalingType::llama3)
        j["rope_scaling"] = {{"rope_type", "llama3"},
                             {"factor", s.scaling.factor},
                             {"low_freq_factor", s.scaling.low_freq_factor},
                             {"high_freq_factor", s.scaling.high_freq_factor},
                             {"original_max_position_embeddings", s.scaling.original_max_position}};
    return j.dump(2);
}

void write_hf(const Model& m, const std::string& dir, const std::string& dtype, int shards) {
    fs::create_directories(dir);
    write_file((fs::path(dir) / "config.json").string(), hf_config_json(m));
    std::vector<std::vector<StOut>> parts(static_cast<size_t>(std::max(shards, 1)));
    size_t k = 0;
    for (const auto& [name, t] : m.tensors) parts[k++ % parts.size()].push_back({name, dtype, t.shape, encode(t.data, dtype)});
    if (parts.size() == 1) {
        write_file((fs::path(dir) / "model.safetensors").string(), safetensors_bytes(parts[0]));
        return;
    }
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    uint64_t total = 0;
    for (size_t p = 0; p < parts.size(); ++p) {
        char file[64];
        std::snprintf(file, sizeof file, "model-%05zu-of-%05zu.safetensors", p + 1, parts.size());
        for (const auto& t : parts[p]) {
            index["weight_map"][t.name] = file;
            total += t.bytes.size();
        }
        write_file((fs::path(dir) / file).string(), safetensors_bytes(parts[p]));
    }
    index["metadata"]["total_size"] = total;
    write_file((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2));
}

// ---- GGUF ----------------------------------------------------------------------------------------

GgufKv kv_u32(const std::string& k, uint32_t v) {
    std::string b;
    put(b, v);
    return {k, 4, b};
}
GgufKv kv_u64(const std::string& k, uint64_t v) {
    std::string b;
    put(b, v);
    return {k, 10, b};
}
GgufKv kv_f32(const std::string& k, float v) {
    std::string b;
    put(b, v);
    return {k, 6, b};
}
GgufKv kv_bool(const std::string& k, bool v) { return {k, 7, std::string(1, v ? '\1' : '\0')}; }
GgufKv kv_str(const std::string& k, const std::string& v) {
    std::string b;
    put_str(b, v);
    return {k, 8, b};
}
GgufKv kv_str_array(const std::string& k, const std::vector<std::string>& v) {
    std::string b;
    put<uint32_t>(b, 8);
    put<uint64_t>(b, v.size());
    for (const auto& s : v) put_str(b, s);
    return {k, 9, b};
}
GgufKv kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    std::string b;
    put<uint32_t>(b, 5);
    put<uint64_t>(b, v.size());
    for (int32_t x : v) put(b, x);
    return {k, 9, b};
}

std::string gguf_bytes(const GgufDoc& d) {
    std::string out = "GGUF";
    put<uint32_t>(out, d.version);
    put<uint64_t>(out, d.tensors.size());
    put<uint64_t>(out, d.kv.size());
    for (const auto& kv : d.kv) {
        put_str(out, kv.key);
        put<uint32_t>(out, kv.type);
        out += kv.value;
    }
    uint64_t next = 0;
    std::string data;
    for (const auto& t : d.tensors) {
        put_str(out, t.name);
        put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
        for (uint64_t n : t.ne) put<uint64_t>(out, n);
        put<uint32_t>(out, t.type);
        put<uint64_t>(out, t.offset ? *t.offset : next);
        // Every tensor padded to the alignment, as ggml's writer pads them.
        data += t.bytes;
        data.append((d.alignment - data.size() % d.alignment) % d.alignment, '\0');
        next = data.size();
    }
    out.append((d.alignment - out.size() % d.alignment) % d.alignment, '\0');
    return out + data;
}

std::string quantise_q8_0(const std::vector<float>& x) {
    std::string out;
    for (size_t b = 0; b + 32 <= x.size(); b += 32) q8_block(x.data() + b, out);
    return out;
}

std::string quantise_q4_0(const std::vector<float>& x) {
    std::string out;
    for (size_t b = 0; b + 32 <= x.size(); b += 32) q4_block(x.data() + b, out);
    return out;
}

std::string quantise_k(uint32_t type, const std::vector<float>& x) {
    std::string out;
    for (size_t b = 0; b + 256 <= x.size(); b += 256) {
        if (type == kGgmlQ6_K) q6k_block(x.data() + b, out);
        else qk_asym_block(x.data() + b, type == kGgmlQ5_K ? 5 : 4, out);
    }
    return out;
}

uint32_t k_mix_type(uint32_t base, const std::string& name, int64_t layer, int64_t n_layers) {
    const bool more_bits = layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
    if (name == "output.weight") return kGgmlQ6_K;
    const bool v_or_down = name.find(".attn_v.") != std::string::npos || name.find(".ffn_down.") != std::string::npos;
    return v_or_down && more_bits ? kGgmlQ6_K : base;
}

HfTensor permute_for_gguf(const HfTensor& w, int64_t n_head) {
    const int64_t out = w.shape[0], in = w.shape[1], half = out / n_head / 2;
    HfTensor p = w;
    // old[h][t][i][:] (reshape(n_head, 2, half, in)) -> new[h][i][t][:] (swapaxes(1, 2))
    for (int64_t h = 0; h < n_head; ++h)
        for (int64_t t = 0; t < 2; ++t)
            for (int64_t i = 0; i < half; ++i) {
                const int64_t from = (h * 2 + t) * half + i, to = (h * half + i) * 2 + t;
                std::copy_n(w.data.begin() + from * in, in, p.data.begin() + to * in);
            }
    return p;
}

std::vector<float> converter_rope_freqs(double theta, int64_t dim, const RopeScaling& s) {
    std::vector<float> f;
    const double lo_wl = s.original_max_position / s.low_freq_factor, hi_wl = s.original_max_position / s.high_freq_factor;
    for (int64_t i = 0; i < dim; i += 2) {
        const float freq = 1.0f / std::pow(static_cast<float>(theta), static_cast<float>(i) / static_cast<float>(dim));
        const double wl = 2 * 3.141592653589793 / freq;
        if (wl < hi_wl) f.push_back(1.0f);
        else if (wl > lo_wl) f.push_back(static_cast<float>(s.factor));
        else {
            const double sm = (s.original_max_position / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            f.push_back(static_cast<float>(1.0 / ((1 - sm) / s.factor + sm)));
        }
    }
    return f;
}

GgufDoc gguf_doc(const Model& m, const GgufOptions& o) {
    const ModelSpec& s = m.spec;
    GgufDoc d;
    // llama.cpp converts Mistral as llama (its llama graph has no sliding window).
    const std::string a = s.arch == "mistral" ? "llama" : s.arch == "gpt_oss" ? "gpt-oss" : s.arch;
    d.kv.push_back(kv_str("general.architecture", a));
    d.kv.push_back(kv_str("general.name", "conform test " + a));
    if (o.alignment_key) d.kv.push_back(kv_u32("general.alignment", 32));
    d.kv.push_back(kv_u32(a + ".context_length", static_cast<uint32_t>(s.max_position)));
    d.kv.push_back(kv_u32(a + ".embedding_length", static_cast<uint32_t>(s.d_model)));
    d.kv.push_back(kv_u32(a + ".block_count", static_cast<uint32_t>(s.layers)));
    d.kv.push_back(kv_u32(a + ".feed_forward_length", static_cast<uint32_t>(s.ffn_dim)));
    d.kv.push_back(kv_u32(a + ".attention.head_count", static_cast<uint32_t>(s.n_heads)));
    d.kv.push_back(kv_u32(a + ".attention.head_count_kv", static_cast<uint32_t>(s.n_kv_heads)));
    if (s.head_dim * s.n_heads != s.d_model || a == "qwen3" || gemma_family(a) || a == "gpt-oss") {
        d.kv.push_back(kv_u32(a + ".attention.key_length", static_cast<uint32_t>(s.head_dim)));
        d.kv.push_back(kv_u32(a + ".attention.value_length", static_cast<uint32_t>(s.head_dim)));
    }
    if (!gemma_family(a)) {  // llama.cpp's gemma converters write neither: 10000 and key_length, its defaults
        d.kv.push_back(kv_f32(a + ".rope.freq_base", static_cast<float>(s.theta)));
        d.kv.push_back(kv_u32(a + ".rope.dimension_count", static_cast<uint32_t>(s.head_dim)));
    }
    if (a == "gemma3") d.kv.push_back(kv_f32(a + ".rope.freq_base", static_cast<float>(s.theta)));  // the global layers'
    if (a == "gemma2") {
        d.kv.push_back(kv_f32(a + ".attn_logit_softcapping", static_cast<float>(s.attn_softcap)));
        d.kv.push_back(kv_f32(a + ".final_logit_softcapping", static_cast<float>(s.final_softcap)));
    }
    if (sandwich(a) || a == "gpt-oss") d.kv.push_back(kv_u32(a + ".attention.sliding_window", static_cast<uint32_t>(s.window)));
    if (a == "gpt-oss") {  // llama.cpp's gpt-oss: layers alternate sliding / full from layer 0 (its swa period, 2)
        d.kv.push_back(kv_u32(a + ".expert_count", static_cast<uint32_t>(s.experts)));
        d.kv.push_back(kv_u32(a + ".expert_used_count", static_cast<uint32_t>(s.experts_used)));
        d.kv.push_back(kv_u32(a + ".expert_feed_forward_length", static_cast<uint32_t>(s.ffn_dim)));
    }
    d.kv.push_back(kv_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(s.eps)));
    if (o.matrices != kGgmlF32 && o.matrices != kGgmlF16 && o.matrices != kGgmlBF16) d.kv.push_back(kv_u32("general.quantization_version", 2));
    if (o.tokens) {
        std::vector<std::string> tokens;
        for (int64_t t = 0; t < s.vocab; ++t) tokens.push_back("<t" + std::to_string(t) + ">");
        d.kv.push_back(kv_str_array("tokenizer.ggml.tokens", tokens));
    }

    // A weight [out, in] becomes ne = [in, out] with the same bytes.
    auto add = [&](const std::string& name, const HfTensor& t, bool matrix) {
        GgufTensorOut g;
        g.name = name;
        for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) g.ne.push_back(static_cast<uint64_t>(*it));
        g.type = matrix ? o.matrices : kGgmlF32;
        if (matrix && o.k_mix) {
            const int64_t layer = name.rfind("blk.", 0) == 0 ? std::stoll(name.substr(4)) : -1;
            g.type = k_mix_type(o.matrices, name, layer, s.layers);
        }
        switch (g.type) {
            case kGgmlF32: g.bytes = encode(t.data, "F32"); break;
            case kGgmlF16: g.bytes = encode(t.data, "F16"); break;
            case kGgmlBF16: g.bytes = encode(t.data, "BF16"); break;
            case kGgmlQ8_0: g.bytes = quantise_q8_0(t.data); break;
            case kGgmlQ4_0: g.bytes = quantise_q4_0(t.data); break;
            case kGgmlQ4_K:
            case kGgmlQ5_K:
            case kGgmlQ6_K: g.bytes = quantise_k(g.type, t.data); break;
            default: throw std::invalid_argument("gguf_doc: type " + std::to_string(g.type));
        }
        d.tensors.push_back(std::move(g));
    };
    const bool permute = a == "llama" || a == "smollm3";  // llama.cpp's LlamaModel converter (SmolLM3Model derives it)
    // llama.cpp's gemma converter stores each norm weight as 1 + w (its graph then scales by w).
    auto norm_of = [&](const std::string& hf) {
        HfTensor t = m.tensors.at(hf);
        if (gemma_family(a))
            for (float& v : t.data) v += 1.0f;
        return t;
    };
    add("token_embd.weight", m.tensors.at("model.embed_tokens.weight"), true);
    for (int64_t l = 0; l < s.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".", b = "blk." + std::to_string(l) + ".";
        add(b + "attn_norm.weight", norm_of(p + "input_layernorm.weight"), false);
        const HfTensor& wq = m.tensors.at(p + "self_attn.q_proj.weight");
        const HfTensor& wk = m.tensors.at(p + "self_attn.k_proj.weight");
        add(b + "attn_q.weight", permute ? permute_for_gguf(wq, s.n_heads) : wq, true);
        add(b + "attn_k.weight", permute ? permute_for_gguf(wk, s.n_kv_heads) : wk, true);
        add(b + "attn_v.weight", m.tensors.at(p + "self_attn.v_proj.weight"), true);
        add(b + "attn_output.weight", m.tensors.at(p + "self_attn.o_proj.weight"), true);
        if (a == "qwen3" || a == "gemma3") {
            add(b + "attn_q_norm.weight", norm_of(p + "self_attn.q_norm.weight"), false);
            add(b + "attn_k_norm.weight", norm_of(p + "self_attn.k_norm.weight"), false);
        }
        if (a == "qwen2") {
            add(b + "attn_q.bias", m.tensors.at(p + "self_attn.q_proj.bias"), false);
            add(b + "attn_k.bias", m.tensors.at(p + "self_attn.k_proj.bias"), false);
            add(b + "attn_v.bias", m.tensors.at(p + "self_attn.v_proj.bias"), false);
        }
        if (a == "gpt-oss") {  // llama.cpp's GptOssModel converter
            for (const char* w : {"q", "k", "v"})
                add(b + "attn_" + w + ".bias", m.tensors.at(p + "self_attn." + w + "_proj.bias"), false);
            add(b + "attn_output.bias", m.tensors.at(p + "self_attn.o_proj.bias"), false);
            add(b + "attn_sinks.weight", m.tensors.at(p + "self_attn.sinks"), false);
            add(b + "post_attention_norm.weight", m.tensors.at(p + "post_attention_layernorm.weight"), false);
            add(b + "ffn_gate_inp.weight", m.tensors.at(p + "mlp.router.weight"), false);
            add(b + "ffn_gate_inp.bias", m.tensors.at(p + "mlp.router.bias"), false);
            // gate_up_proj [E, D, 2F] (gate even, up odd along 2F) -> gate, up [E, F, D]; down_proj
            // [E, F, D] -> [E, D, F]: torch's [out, in] per expert, ne = [in, out, E].
            const HfTensor& gu = m.tensors.at(p + "mlp.experts.gate_up_proj");
            const HfTensor& gub = m.tensors.at(p + "mlp.experts.gate_up_proj_bias");
            const HfTensor& dn = m.tensors.at(p + "mlp.experts.down_proj");
            const int64_t E = s.experts, D = s.d_model, F = s.ffn_dim;
            HfTensor gate{{E, F, D}, std::vector<float>(E * F * D)}, up = gate, down{{E, D, F}, std::vector<float>(E * D * F)};
            HfTensor gate_b{{E, F}, std::vector<float>(E * F)}, up_b = gate_b;
            for (int64_t e = 0; e < E; ++e)
                for (int64_t f = 0; f < F; ++f) {
                    for (int64_t i = 0; i < D; ++i) {
                        gate.data[(e * F + f) * D + i] = gu.data[(e * D + i) * 2 * F + 2 * f];
                        up.data[(e * F + f) * D + i] = gu.data[(e * D + i) * 2 * F + 2 * f + 1];
                        down.data[(e * D + i) * F + f] = dn.data[(e * F + f) * D + i];
                    }
                    gate_b.data[e * F + f] = gub.data[e * 2 * F + 2 * f];
                    up_b.data[e * F + f] = gub.data[e * 2 * F + 2 * f + 1];
                }
            add(b + "ffn_gate_exps.weight", gate, false);
            add(b + "ffn_up_exps.weight", up, false);
            add(b + "ffn_down_exps.weight", down, false);
            add(b + "ffn_gate_exps.bias", gate_b, false);
            add(b + "ffn_up_exps.bias", up_b, false);
            add(b + "ffn_down_exps.bias", m.tensors.at(p + "mlp.experts.down_proj_bias"), false);
            continue;
        }
        add(b + "ffn_norm.weight", norm_of(p + ffn_norm_name(a)), false);
        if (sandwich(a)) {
            add(b + "post_attention_norm.weight", norm_of(p + "post_attention_layernorm.weight"), false);
            add(b + "post_ffw_norm.weight", norm_of(p + "post_feedforward_layernorm.weight"), false);
        }
        add(b + "ffn_gate.weight", m.tensors.at(p + "mlp.gate_proj.weight"), true);
        add(b + "ffn_up.weight", m.tensors.at(p + "mlp.up_proj.weight"), true);
        add(b + "ffn_down.weight", m.tensors.at(p + "mlp.down_proj.weight"), true);
    }
    add("output_norm.weight", norm_of("model.norm.weight"), false);
    if (!s.tie) add("output.weight", m.tensors.at("lm_head.weight"), true);
    if (s.scaling.type == RopeScalingType::llama3) {
        HfTensor f;
        f.data = converter_rope_freqs(s.theta, s.head_dim, s.scaling);
        f.shape = {static_cast<int64_t>(f.data.size())};
        add("rope_freqs.weight", f, false);
    }
    return d;
}

void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("write_file: cannot write " + path);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::ostringstream o;
    o << f.rdbuf();
    return o.str();
}

}  // namespace conform::weights::testing

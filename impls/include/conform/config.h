// conform/config.h — the block's configuration and one parameter struct per
// op. Every convention that real checkpoints disagree on is an explicit field
// (rope layout, theta, eps, qk_norm): no implementation may assume a default.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace conform {

// Which dimensions RoPE rotates together.
//   neox:        pairs (x[i], x[i + d/2])   — HF rotate_half, ggml NEOX (HF Llama/Qwen checkpoints)
//   interleaved: pairs (x[2i], x[2i + 1])   — Meta view_as_complex, ggml NORMAL (Meta/GGUF Llama)
enum class RopeLayout { neox, interleaved };

enum class DType { f32, bf16, f16 };

inline const char* to_string(RopeLayout l) { return l == RopeLayout::neox ? "neox" : "interleaved"; }
inline std::optional<RopeLayout> parse_rope_layout(std::string_view s) {
    if (s == "neox") return RopeLayout::neox;
    if (s == "interleaved") return RopeLayout::interleaved;
    return std::nullopt;
}
inline const char* to_string(DType d) {
    switch (d) {
        case DType::f32: return "f32";
        case DType::bf16: return "bf16";
        case DType::f16: return "f16";
    }
    return "?";
}
inline std::optional<DType> parse_dtype(std::string_view s) {
    if (s == "f32" || s == "float32") return DType::f32;
    if (s == "bf16" || s == "bfloat16") return DType::bf16;
    if (s == "f16" || s == "float16") return DType::f16;
    return std::nullopt;
}

struct BlockConfig {
    int64_t d_model = 0;     // D: width of the residual stream
    int64_t n_heads = 0;     // H: query heads
    int64_t n_kv_heads = 0;  // KV: key/value heads; H % KV == 0 (GQA group = H / KV)
    int64_t head_dim = 0;    // hd: need not equal D / H (Qwen3)
    int64_t ffn_dim = 0;     // F: SwiGLU hidden width
    RopeLayout rope_layout = RopeLayout::neox;
    double rope_theta = 10000.0;
    bool qk_norm = false;    // Qwen3: per-head RMSNorm on q and k, before RoPE
    double norm_eps = 1e-5;

    int64_t q_width() const { return n_heads * head_dim; }
    int64_t kv_width() const { return n_kv_heads * head_dim; }
    int64_t group() const { return n_kv_heads > 0 ? n_heads / n_kv_heads : 0; }
};

// ---- one parameter struct per op ------------------------------------------

struct RmsNormParams {
    double eps = 1e-5;  // y = x * rsqrt(mean(x^2) + eps) * w   (eps inside the sqrt)
};

struct RopeParams {
    int64_t head_dim = 0;  // rotated per head; x has n * head_dim columns
    RopeLayout layout = RopeLayout::neox;
    double theta = 10000.0;  // inv_freq[i] = theta^(-2i / head_dim)
};

struct QkNormParams {
    int64_t head_dim = 0;  // RMSNorm over each head's head_dim slice, weight [head_dim]
    double eps = 1e-5;
};

struct AttentionParams {
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;  // query head h reads kv head h / (n_heads / n_kv_heads)
    int64_t head_dim = 0;    // scale = 1 / sqrt(head_dim)
    // Causal by position: key j visible to query i iff k_pos[j] <= q_pos[i].
};

inline RmsNormParams rmsnorm_params(const BlockConfig& c) { return {c.norm_eps}; }
inline RopeParams rope_params(const BlockConfig& c) { return {c.head_dim, c.rope_layout, c.rope_theta}; }
inline QkNormParams qk_norm_params(const BlockConfig& c) { return {c.head_dim, c.norm_eps}; }
inline AttentionParams attention_params(const BlockConfig& c) { return {c.n_heads, c.n_kv_heads, c.head_dim}; }

}  // namespace conform

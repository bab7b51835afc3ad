// conform/ops.h — the seven ops of a decoder block, the serving op over a
// paged KV cache, a mixture-of-experts FFN and its two halves, multi-head
// latent attention over a paged latent cache, and the block's taps.
#pragma once

#include <array>
#include <optional>
#include <string_view>

namespace conform {

enum class Op {
    rmsnorm, rope, qk_norm, attention, swiglu, block, decode, paged_attention, moe, moe_route, moe_experts, mla_attention
};

inline constexpr std::array<Op, 12> kAllOps = {Op::rmsnorm, Op::rope,      Op::qk_norm,     Op::attention,
                                               Op::swiglu,  Op::block,     Op::decode,      Op::paged_attention,
                                               Op::moe,     Op::moe_route, Op::moe_experts, Op::mla_attention};

inline const char* to_string(Op op) {
    switch (op) {
        case Op::rmsnorm: return "rmsnorm";
        case Op::rope: return "rope";
        case Op::qk_norm: return "qk_norm";
        case Op::attention: return "attention";
        case Op::swiglu: return "swiglu";
        case Op::block: return "block";
        case Op::decode: return "decode";
        case Op::paged_attention: return "paged_attention";
        case Op::moe: return "moe";
        case Op::moe_route: return "moe_route";
        case Op::moe_experts: return "moe_experts";
        case Op::mla_attention: return "mla_attention";
    }
    return "?";
}

inline std::optional<Op> parse_op(std::string_view s) {
    for (Op op : kAllOps)
        if (s == to_string(op)) return op;
    return std::nullopt;
}

// The intermediate tensors a block materialises, in data-flow order. The
// order is what first-divergence localisation walks. This is the block's one
// definition; every variant is a config field (conform/config.h) marked here.
//   attn_in = rmsnorm(x, attn_norm)                      [T, D]
//   q, k, v = attn_in @ wq, wk, wv (+ bq, bk, bv)        [T, H*hd], [T, KV*hd], [T, KV*hd]   bias: qkv_bias
//   q_rot, k_rot = rope?(qk_norm?(q), qk_norm?(k))       (QK-norm before RoPE; nope: no rotation)
//   attn    = attention(q_rot, k_rot, v)                 [T, H*hd]
//   h       = x + post?(attn @ wo)                       [T, D]
//   ffn_in  = rmsnorm(h, ffn_norm)                       [T, D]
//   ffn_out = swiglu(ffn_in, w1, w3, w2)                 [T, D]
//   out     = h + post?(ffn_out)                         [T, D]
// post?: with sandwich_norm (Gemma 2/3), rmsnorm(., attn_post_norm) and
// rmsnorm(., ffn_post_norm); the taps attn and ffn_out are before it.
enum class Tap { attn_in, q, k, v, q_rot, k_rot, attn, h, ffn_in, ffn_out, out };

inline constexpr std::array<Tap, 11> kAllTaps = {Tap::attn_in, Tap::q,    Tap::k, Tap::v,      Tap::q_rot,   Tap::k_rot,
                                                 Tap::attn,    Tap::h,    Tap::ffn_in, Tap::ffn_out, Tap::out};

inline const char* to_string(Tap t) {
    switch (t) {
        case Tap::attn_in: return "attn_in";
        case Tap::q: return "q";
        case Tap::k: return "k";
        case Tap::v: return "v";
        case Tap::q_rot: return "q_rot";
        case Tap::k_rot: return "k_rot";
        case Tap::attn: return "attn";
        case Tap::h: return "h";
        case Tap::ffn_in: return "ffn_in";
        case Tap::ffn_out: return "ffn_out";
        case Tap::out: return "out";
    }
    return "?";
}

}  // namespace conform

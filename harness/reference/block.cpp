#include "reference/torch_ops.h"

namespace conform::ref {

torch::Tensor cache_round_trip(const torch::Tensor& t, const CacheRead& cache) {
    if (cache.dtype == KvCacheDtype::none) return t;
    const auto f = t.to(torch::kFloat32).contiguous();
    auto out = torch::empty(f.sizes(), f.options().dtype(torch::kFloat64));
    const int64_t n = f.size(0), W = f.size(1);
    const float* src = f.data_ptr<float>();
    double* dst = out.data_ptr<double>();
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < W; ++j) dst[r * W + j] = cache.value(src[r * W + j], j);
    return out.to(t.scalar_type());
}

// The decoder block, as the chapter writes it (pre-norm, GQA, SwiGLU), and
// its served variants as conform/ops.h lists them:
//   h   = x + post?(attn(rmsnorm(x)) @ wo)
//   out = h + post?(swiglu(rmsnorm(h)))          post?: sandwich_norm (Gemma 2/3)
std::map<std::string, torch::Tensor> block(const std::map<std::string, torch::Tensor>& in, const torch::Tensor& positions,
                                           const BlockConfig& c, int64_t decode_from, const Ctx& ctx) {
    const Variant& v = ctx.v;
    const auto& x = in.at("x");  // [T, D]
    const int64_t T = x.size(0), hd = c.head_dim;
    std::map<std::string, torch::Tensor> tap;

    // ---- attention sublayer ---------------------------------------------
    // (post-norm, a hypothesis: the sublayer reads x itself and the norm follows the residual add)
    tap["attn_in"] = v.post_norm ? x : rmsnorm(x, in.at("attn_norm").reshape({c.d_model}), c.norm_eps, c.norm_plus_one, ctx);  // [T, D]
    tap["q"] = matmul(linear_input(tap["attn_in"], "wq", ctx), in.at("wq"), ctx);  // [T, H*hd]
    tap["k"] = matmul(linear_input(tap["attn_in"], "wk", ctx), in.at("wk"), ctx);  // [T, KV*hd]
    tap["v"] = matmul(linear_input(tap["attn_in"], "wv", ctx), in.at("wv"), ctx);  // [T, KV*hd]
    // Qwen2: q_proj etc. are nn.Linear(bias=True); the bias is part of the
    // projection, so the taps q, k, v include it and QK-norm and RoPE see it.
    using Bias = Variant::QkvBias;
    const bool bias_in = c.qkv_bias && v.qkv_bias == Bias::as_config;
    const bool bias_late = c.qkv_bias && v.qkv_bias == Bias::after_rope;
    auto add_bias = [&](const torch::Tensor& t, const char* b) { return t + in.at(b).reshape({1, -1}); };
    if (bias_in) {
        tap["q"] = add_bias(tap["q"], "bq");
        tap["k"] = add_bias(tap["k"], "bk");
    }
    if (c.qkv_bias) tap["v"] = add_bias(tap["v"], "bv");

    // QK-norm (Qwen3): per head, on the projections, before RoPE.
    const bool norm_on = v.qk_norm == Variant::QkNorm::on_unit_weights || c.qk_norm;
    // (unit weights: 1, or an offset of 0 from it under Gemma's norms)
    const auto unit = c.norm_plus_one ? torch::zeros({hd}, x.options()) : torch::ones({hd}, x.options());
    auto qn_w = c.qk_norm ? in.at("q_norm") : unit;
    auto kn_w = c.qk_norm ? in.at("k_norm") : unit;
    // all_heads: one RMS over the whole row (H*hd) — a fused kernel's mistake — each head's weight tiled.
    auto norm_heads = [&](const torch::Tensor& t, const torch::Tensor& w) {
        if (v.qk_norm != Variant::QkNorm::all_heads) return qk_norm(t, w, hd, c.norm_eps, c.norm_plus_one, ctx);
        return rmsnorm(t, w.reshape({hd}).repeat({t.size(1) / hd}), c.norm_eps, c.norm_plus_one, ctx);
    };
    auto norm_q = [&](const torch::Tensor& t) { return norm_heads(t, qn_w); };
    auto norm_k = [&](const torch::Tensor& t) { return norm_heads(t, kn_w); };
    const bool before = norm_on && v.qk_norm != Variant::QkNorm::after_rope;
    const bool after = norm_on && v.qk_norm == Variant::QkNorm::after_rope;

    // Decode steps may see a shifted position (a hypothesis of diagnosis
    // only): a step's position number wrong is wrong wherever it is read, its
    // rotation and its mask (a window's or a chunk's edge) alike.
    auto rope_pos = positions.clone();
    if (v.decode_pos_shift != 0 && decode_from < T)
        rope_pos.narrow(0, decode_from, T - decode_from).add_(v.decode_pos_shift);
    const auto mask_pos = rope_pos.clone();
    // Positions taken as start + row (a hypothesis): per forward call — the
    // prefill is one call, each decode step its own (where start + 0 is right).
    Variant v_rows = v;
    Ctx ctx_rows{ctx.dtype, ctx.acc_dtype, ctx.order, v_rows, ctx.act_quant};
    if (v.rope_pos_from_start && decode_from < T) {
        v_rows.rope_pos_from_start = false;
        auto first = rope_pos[0].item<int64_t>();
        rope_pos.narrow(0, 0, decode_from).copy_(first + torch::arange(decode_from, torch::kInt64));
    }
    const Ctx& rctx = v.rope_pos_from_start && decode_from < T ? ctx_rows : ctx;
    auto rot = [&](const torch::Tensor& t) { return rope(t, rope_pos, rope_params(c), rctx); };
    // A NoPE layer (SmolLM3, Llama 4): q and k go to attention unrotated.
    const bool nope = c.nope;
    auto rot_qk = [&](const torch::Tensor& t) { return nope ? t : rot(t); };

    auto q = before ? norm_q(tap["q"]) : tap["q"];
    auto k = before ? norm_k(tap["k"]) : tap["k"];
    tap["q_rot"] = rot_qk(q);
    tap["k_rot"] = rot_qk(k);
    if (after) {
        tap["q_rot"] = norm_q(tap["q_rot"]);
        tap["k_rot"] = norm_k(tap["k_rot"]);
    }
    if (bias_late) {
        tap["q_rot"] = add_bias(tap["q_rot"], "bq");
        tap["k_rot"] = add_bias(tap["k_rot"], "bk");
    }
    // What attention reads from the cache. A decode step that caches its key
    // before RoPE leaves the prefill's keys rotated and its own not.
    auto keys = tap["k_rot"];
    if (v.k_unrotated && decode_from < T) {
        keys = keys.clone();
        keys.narrow(0, decode_from, T - decode_from).copy_(k.narrow(0, decode_from, T - decode_from));
    }
    auto vv = v.v_rotated ? rot(tap["v"]) : tap["v"];
    // An FP8 cache (decode): what attention reads is what the cache gives
    // back, the prefill's keys and values as much as each step's.
    if (c.kv_cache_dtype != KvCacheDtype::none) {
        auto scales = [&](const char* n) {
            const auto s = in.at(n).to(torch::kFloat32).contiguous().reshape({-1});
            return std::vector<float>(s.data_ptr<float>(), s.data_ptr<float>() + s.numel());
        };
        const std::vector<float> ks = scales("k_scale"), vs = scales("v_scale");
        keys = cache_round_trip(keys, CacheRead(c.kv_cache_dtype, ks, hd, keys.size(1), v));
        vv = cache_round_trip(vv, CacheRead(c.kv_cache_dtype, vs, hd, vv.size(1), v, &ks));
    }
    // Decode: the prefill's queries reach the prefill's keys, a decode step
    // only those cached before it and its own. With the causal mask (and
    // increasing positions) that is no restriction; a wrong mask cannot see
    // keys a decode step has not cached yet (nor give them a capped logit).
    torch::Tensor cached;
    if (decode_from < T && (v.mask != Variant::Mask::causal || v.kv_ring > 0 || v.softcap_after_mask)) {
        auto i = torch::arange(T, torch::kInt64).unsqueeze(1), j = torch::arange(T, torch::kInt64).unsqueeze(0);
        cached = j < torch::clamp_min(i + 1, decode_from);
        // A ring of kv_ring slots: a decode step (i >= decode_from) sees only the last kv_ring of them.
        if (v.kv_ring > 0) cached = cached.logical_and((i < decode_from).logical_or(j > i - v.kv_ring));
    }
    tap["attn"] =
        attention(tap["q_rot"], keys, vv, mask_pos, mask_pos, attention_params(c),
                  c.attn_sinks ? in.at("sinks") : torch::Tensor(), ctx, cached);
    // Gemma 2/3's sandwich norm of a sublayer's output, before its residual
    // add (post_attention_layernorm, post_feedforward_layernorm); a
    // hypothesis drops it or takes it after the add.
    using Sandwich = Variant::Sandwich;
    const bool sandwich_in = c.sandwich_norm && v.sandwich == Sandwich::as_config;
    const bool sandwich_late = c.sandwich_norm && v.sandwich == Sandwich::after_residual;
    auto post = [&](const torch::Tensor& t, const char* w) {
        return rmsnorm(t, in.at(w).reshape({c.d_model}), c.norm_eps, c.norm_plus_one, ctx);
    };
    auto proj = matmul(linear_input(tap["attn"], "wo", ctx), in.at("wo"), ctx);  // [T, D]
    if (sandwich_in) proj = post(proj, "attn_post_norm");
    tap["h"] = v.residual_missing ? proj : x + proj;
    if (sandwich_late) tap["h"] = post(tap["h"], "attn_post_norm");
    if (v.post_norm) tap["h"] = rmsnorm(tap["h"], in.at("attn_norm").reshape({c.d_model}), c.norm_eps, c.norm_plus_one, ctx);

    // ---- feed-forward sublayer ------------------------------------------
    tap["ffn_in"] = v.post_norm ? tap["h"] : rmsnorm(tap["h"], in.at("ffn_norm").reshape({c.d_model}), c.norm_eps, c.norm_plus_one, ctx);
    tap["ffn_out"] = swiglu(tap["ffn_in"], in.at("w1"), in.at("w3"), in.at("w2"), c.hidden_act, ctx);
    tap["out"] = tap["h"] + (sandwich_in ? post(tap["ffn_out"], "ffn_post_norm") : tap["ffn_out"]);
    if (sandwich_late) tap["out"] = post(tap["out"], "ffn_post_norm");
    if (v.post_norm) tap["out"] = rmsnorm(tap["out"], in.at("ffn_norm").reshape({c.d_model}), c.norm_eps, c.norm_plus_one, ctx);
    return tap;
}

}  // namespace conform::ref

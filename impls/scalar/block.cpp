// block — one Llama / Qwen3 decoder layer: the forward block() and decode()
// (decode.cpp) both run.
//
//   attn_in = rmsnorm(x, attn_norm)
//   q, k, v = attn_in @ [wq | wk | wv] (+ [bq | bk | bv])   one fused product; biases: Qwen2
//   q, k    = qk_norm(q), qk_norm(k)              Qwen3 only, before RoPE
//   q_rot, k_rot = rope(q), rope(k)                 (a NoPE layer: q, k)
//   attn    = attention(q_rot, cache_k, cache_v)  the cache holds k_rot and v
//   h       = x + post?(attn @ wo)
//   out     = h + post?(swiglu(rmsnorm(h, ffn_norm)))   post?: Gemma 2/3's sandwich norms
//
// block() and decode() run the same forward(): block() is one forward over all
// T tokens with an empty cache of T rows; decode() is a forward over the
// prefill, then one forward per remaining token, all appending to one cache.
// A row's arithmetic never depends on the other rows in its chunk, so with
// increasing positions decode() reproduces block() bitwise.
#include <algorithm>
#include <vector>

#include "scalar/forward.h"

namespace conform::scalar {

namespace {

// The first n rows of a buffer, as the ops take them.
MutView first(Tensor& t, int64_t n) { return MutView{t.data.data(), n, t.cols()}; }

// ----------------------------------------------------------------------------
// checks

void check_config(const char* op, const BlockConfig& c) {
    detail::expect(c.d_model > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0 && c.ffn_dim > 0, op,
                   "d_model, n_heads, n_kv_heads, head_dim and ffn_dim must be positive");
    detail::expect(c.n_heads % c.n_kv_heads == 0, op,
                   "n_heads = " + std::to_string(c.n_heads) + " must be a multiple of n_kv_heads = " +
                       std::to_string(c.n_kv_heads));
    detail::expect(c.head_dim % 2 == 0, op, "head_dim must be even for RoPE, found " + std::to_string(c.head_dim));
}


const Tensor& tap_source(const RunState& s, Tap t) {
    switch (t) {
        case Tap::attn_in: return s.attn_in;
        case Tap::q: return s.q;
        case Tap::k: return s.k;
        case Tap::v: return s.v;
        case Tap::q_rot: return s.q_rot;
        case Tap::k_rot: return s.k_rot;
        case Tap::attn: return s.attn;
        case Tap::h: return s.h;
        case Tap::ffn_in: return s.ffn_in;
        case Tap::ffn_out: return s.ffn_out;
        case Tap::out: return s.out;
    }
    return s.out;
}

// out = x + y, row by row (the residual adds).
void add(View x, View y, MutView out) {
    for (int64_t t = 0; t < x.rows; t++) {
        const float* xt = x.row(t);
        const float* yt = y.row(t);
        float* ot = out.row(t);
        for (int64_t d = 0; d < x.cols; d++) ot[d] = xt[d] + yt[d];
    }
}

}  // namespace

void check_block_inputs(const char* op, View x, Positions pos, const BlockWeights& w, const BlockConfig& c) {
    check_config(op, c);
    detail::expect_shape(op, "x", x, x.rows, c.d_model);
    if (c.kv_cache_dtype != KvCacheDtype::none) {  // decode's FP8 cache
        const int64_t n = c.kv_scale_per_head ? c.n_kv_heads : 1;
        detail::expect_shape(op, "k_scale", w.k_scale, 1, n);
        detail::expect_shape(op, "v_scale", w.v_scale, 1, n);
    }
    detail::expect_positions(op, "pos", pos, x.rows);
    detail::check_block_weights(op, w, c);
}

void copy_rows(const Tensor& src, int64_t n, MutView dst, int64_t row0) {
    const int64_t cols = src.cols();
    std::copy(src.data.begin(), src.data.begin() + n * cols, dst.data + row0 * cols);
}

Tensor packed_qkv(const BlockWeights& w, const BlockConfig& c) {
    Tensor wqkv(c.d_model, c.q_width() + 2 * c.kv_width());
    pack_qkv(w.wq, w.wk, w.wv, wqkv.mut());
    return wqkv;
}

// ----------------------------------------------------------------------------
// the forward

// One forward of the layer over n tokens x at positions pos. Appends their
// k_rot and v to the cache, attends over everything cached, and leaves every
// activation in the first n rows of s. decode_step: this is one token after
// the prefill (decode()), not the prefill or a block.
void ScalarImpl::forward(View x /* (n, D) */, Positions pos /* (n,) */, const BlockWeights& w,
                         View wqkv /* (D, (H + 2*KV) * hd) */, const BlockConfig& c, bool decode_step, KvCache& cache,
                         RunState& s) {
    const int64_t n = x.rows;
    const int64_t Q = c.q_width();     // H * hd
    const int64_t KVW = c.kv_width();  // KV * hd
    detail::expect(cache.len + n <= cache.k.rows(), "block", "KV cache overflow");

    MutView attn_in = first(s.attn_in, n);  // (n, D)
    MutView qkv = first(s.qkv, n);          // (n, Q + 2*KVW)
    MutView q = first(s.q, n);              // (n, Q)
    MutView k = first(s.k, n);              // (n, KVW)
    MutView v = first(s.v, n);              // (n, KVW)
    MutView q_rot = first(s.q_rot, n);      // (n, Q)
    MutView k_rot = first(s.k_rot, n);      // (n, KVW)
    MutView attn = first(s.attn, n);        // (n, Q)
    MutView attn_wo = first(s.attn_wo, n);  // (n, D)
    MutView h = first(s.h, n);              // (n, D)
    MutView ffn_in = first(s.ffn_in, n);    // (n, D)
    MutView ffn_out = first(s.ffn_out, n);  // (n, D)
    MutView out = first(s.out, n);          // (n, D)

    // ---- attention ----

    // attn_in = self.input_layernorm(x)
    rmsnorm(x, w.attn_norm, rmsnorm_params(c), attn_in);

    // qkv = attn_in @ torch.cat([wq, wk, wv], dim=1)
    // One product for all three: each column's dot product is unchanged by
    // packing, so q, k, v equal the three separate products bitwise.
    product(attn_in, wqkv, qkv);

    // q, k, v = qkv.split([H*hd, KV*hd, KV*hd], dim=-1)
    // (+ q_proj.bias etc., Qwen2: the bias belongs to the projection, so the
    // taps q, k, v carry it and QK-norm and RoPE see it)
    for (int64_t t = 0; t < n; t++) {
        const float* row = qkv.row(t);  // (Q + 2*KVW,)
        std::copy(row, row + Q, q.row(t));
        std::copy(row + Q, row + Q + KVW, k.row(t));
        std::copy(row + Q + KVW, row + Q + 2 * KVW, v.row(t));
    }
    add_qkv_bias(q, k, v, w, c);

    // q = self.q_norm(q); k = self.k_norm(k)   Qwen3: per head, before RoPE; v never
    const auto [q_in, k_in] = norm_qk(q, k, w, c, first(s.q_normed, n), first(s.k_normed, n));  // (n, Q), (n, KVW)

    // q_rot, k_rot = apply_rotary_pos_emb(q, k, cos, sin)
    rotate_qk(q_in, k_in, pos, w, c, q_rot, k_rot);

    // self.cache_k[start:start + n] = k_rot; self.cache_v[start:start + n] = v
    const MutView k_rows{cache.k.data.data() + cache.len * KVW, n, KVW}, v_rows{cache.v.data.data() + cache.len * KVW, n, KVW};
    cache_write({k_in, k_rot, v, pos, decode_step}, c, k_rows, v_rows);
    // An FP8 cache (decode): each value as the cache gives it back, fp8(x / scale) * scale
    cache_round_trip(w, c, k_rows, v_rows);
    std::copy(pos.data, pos.data + n, cache.pos.begin() + cache.len);
    cache.len += n;

    // attn = softmax(q_rot @ keys.T / sqrt(hd) + causal_mask) @ values   over the whole cache
    const View keys{cache.k.data.data(), cache.len, KVW};    // (len, KVW)
    const View values{cache.v.data.data(), cache.len, KVW};  // (len, KVW)
    const Positions key_pos{cache.pos.data(), cache.len};    // (len,)
    AttentionParams ap = attention_params(c);
    ap.sinks = c.attn_sinks ? w.sinks.data : nullptr;  // gpt-oss: each head's sink logit
    attention(q_rot, keys, values, pos, key_pos, ap, attn);

    // h = x + self.o_proj(attn)
    // (Gemma 2/3: h = x + self.post_attention_layernorm(self.o_proj(attn)))
    product(attn, w.wo, attn_wo);
    attention_residual(x, sublayer_norm(attn_wo, w.attn_post_norm, c, first(s.attn_post, n)), h);

    // ---- feed-forward ----

    // ffn_in = self.post_attention_layernorm(h)
    rmsnorm(h, w.ffn_norm, rmsnorm_params(c), ffn_in);

    // ffn_out = self.w2(act_fn(self.w1(ffn_in)) * self.w3(ffn_in))   (act_fn: F.silu, or Gemma's gelu_tanh)
    swiglu(ffn_in, w.w1, w.w3, w.w2, swiglu_params(c), ffn_out);

    // out = h + ffn_out
    // (Gemma 2/3: out = h + self.post_feedforward_layernorm(ffn_out))
    add(h, sublayer_norm(ffn_out, w.ffn_post_norm, c, first(s.ffn_post, n)), out);
}

// ----------------------------------------------------------------------------
// the stages forward() composes (overridden one at a time by the mutants)

void ScalarImpl::product(View x, View w, MutView out) { matmul(x, w, out); }

std::pair<View, View> ScalarImpl::norm_qk(View q, View k, const BlockWeights& w, const BlockConfig& c,
                                          MutView q_normed, MutView k_normed) {
    if (!c.qk_norm) return {q, k};
    qk_norm(q, w.q_norm, qk_norm_params(c), q_normed);
    qk_norm(k, w.k_norm, qk_norm_params(c), k_normed);
    return {q_normed, k_normed};
}

void ScalarImpl::add_qkv_bias(MutView q, MutView k, MutView v, const BlockWeights& w, const BlockConfig& c) {
    if (!c.qkv_bias) return;
    // q = q + self.q_proj.bias  (and k, v): one bias row, every token
    auto add_row = [](MutView x, View b) {
        for (int64_t t = 0; t < x.rows; t++)
            for (int64_t j = 0; j < x.cols; j++) x.row(t)[j] += b.data[j];
    };
    add_row(q, w.bq);
    add_row(k, w.bk);
    add_row(v, w.bv);
}

void ScalarImpl::rotate_qk(View q, View k, Positions pos, const BlockWeights&, const BlockConfig& c, MutView q_rot,
                           MutView k_rot) {
    if (c.nope) {  // a NoPE layer: if self.use_rope: ... (SmolLM3Attention), else q and k as they are
        std::copy(q.data, q.data + q.size(), q_rot.data);
        std::copy(k.data, k.data + k.size(), k_rot.data);
        return;
    }
    rope(q, pos, rope_params(c), q_rot);
    rope(k, pos, rope_params(c), k_rot);
}

void ScalarImpl::cache_write(const NewKv& in, const BlockConfig&, MutView k_rows, MutView v_rows) {
    std::copy(in.k_rot.data, in.k_rot.data + in.k_rot.size(), k_rows.data);  // RoPE is never re-applied to a cached key
    std::copy(in.v.data, in.v.data + in.v.size(), v_rows.data);              // v is never rotated
}

void ScalarImpl::cache_round_trip(const BlockWeights& w, const BlockConfig& c, MutView k_rows, MutView v_rows) const {
    const KvCacheRules kr = kv_cache_rules();
    if (c.kv_cache_dtype == KvCacheDtype::none || !kr.quantise) return;
    const PagedAttentionParams p = decode_cache_params(c, w);  // the scales as paged_attention's rules read them
    const int64_t hd = c.head_dim;
    for (int64_t t = 0; t < k_rows.rows; t++)
        for (int64_t j = 0; j < k_rows.cols; j++) {
            // cache_k[t, j] = fp8(k_rot / k_scale[g]) * k_scale[g], g = j / hd; likewise v
            const float ks = kr.scale(p, false, j / hd), vs = kr.scale(p, true, j / hd);
            float& k = k_rows.row(t)[j];
            float& v = v_rows.row(t)[j];
            k = kr.read(kr.write(k, ks, p.kv_cache_dtype), ks);
            v = kr.read(kr.write(v, vs, p.kv_cache_dtype), vs);
        }
}

void ScalarImpl::attention_residual(View x, View attn_wo, MutView h) { add(x, attn_wo, h); }

View ScalarImpl::sublayer_norm(View y, View w, const BlockConfig& c, MutView normed) {
    if (!c.sandwich_norm) return y;
    rmsnorm(y, w, rmsnorm_params(c), normed);
    return normed;
}

int64_t ScalarImpl::decode_position(int64_t pos) { return pos; }

// ----------------------------------------------------------------------------
// public

void pack_qkv(View wq, View wk, View wv, MutView wqkv) {
    const int64_t D = wq.rows;  // in
    const int64_t Q = wq.cols;  // H * hd
    const int64_t KVW = wk.cols;  // KV * hd
    detail::expect_shape("pack_qkv", "wq", wq, D, Q);
    detail::expect_shape("pack_qkv", "wk", wk, D, KVW);
    detail::expect_shape("pack_qkv", "wv", wv, D, KVW);
    detail::expect_shape("pack_qkv", "wqkv", wqkv, D, Q + 2 * KVW);

    // wqkv = torch.cat([wq, wk, wv], dim=1)   row r = [wq[r] | wk[r] | wv[r]]
    for (int64_t r = 0; r < D; r++) {
        float* dst = wqkv.row(r);  // (Q + 2*KVW,)
        dst = std::copy(wq.row(r), wq.row(r) + Q, dst);
        dst = std::copy(wk.row(r), wk.row(r) + KVW, dst);
        std::copy(wv.row(r), wv.row(r) + KVW, dst);
    }
}

TapSet ScalarImpl::block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) {
    check_block_inputs("block", x, pos, w, c);
    const int64_t T = x.rows;
    // out is always written; any other tap only when the caller gave a buffer
    detail::expect_shape("block", "out", out[Tap::out], T, c.d_model);
    for (Tap tap : kAllTaps) {
        if (out[tap].data != nullptr) detail::expect_shape("block", to_string(tap), out[tap], T, tap_cols(tap, c));
    }

    const Tensor wqkv = packed_qkv(w, c);  // (D, (H + 2*KV) * hd)
    RunState s(c, T);
    KvCache cache(c, T);  // starts empty: the block attends over its own T tokens
    forward(x, pos, w, wqkv.view(), c, /*decode_step=*/false, cache, s);

    TapSet wrote;
    for (Tap tap : kAllTaps) {
        if (tap != Tap::out && out[tap].data == nullptr) continue;
        copy_rows(tap_source(s, tap), T, out[tap], 0);
        wrote.add(tap);
    }
    return wrote;
}

TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) {
    return ScalarImpl().block(x, w, pos, c, out);
}


}  // namespace conform::scalar

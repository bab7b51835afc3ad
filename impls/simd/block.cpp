// block — the engine's forward (engine.h): the recipe, with every step a
// kernel over the thread pool.
#include <algorithm>
#include <stdexcept>

#include "conform/dtype.h"
#include "simd/engine.h"
#include "simd/ops.h"

namespace conform::simd {

namespace {

// Splits row kernels over the pool.
template <class F>
void rows(ThreadPool& pool, size_t n, const F& f) {
    pool.RunRanges(n, [&](size_t r0, size_t r1, int) { f(r0, r1); });
}

}  // namespace

std::vector<float> stored_vector(View w, Elem e) {
    std::vector<float> out(static_cast<size_t>(w.size()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = e == Elem::bf16 ? to_f32(to_bf16(w.data[i])) : w.data[i];
    return out;
}

std::vector<float> norm_vector(View w, Elem e, bool plus_one) {
    std::vector<float> out = stored_vector(w, e);
    // Gemma's (1 + w), once per weight set and in float32 as GemmaRMSNorm
    // takes it: the row kernels then multiply by a weight as for any RMSNorm.
    if (plus_one)
        for (float& v : out) v = 1.0f + v;
    return out;
}

EngineWeights prepare_weights(ThreadPool& pool, const BlockWeights& w, const BlockConfig& c, Elem e) {
    EngineWeights ew;
    ew.config = c;
    ew.elem = e;
    ew.attn_norm = norm_vector(w.attn_norm, e, c.norm_plus_one);
    ew.ffn_norm = norm_vector(w.ffn_norm, e, c.norm_plus_one);
    if (c.qk_norm) {
        ew.q_norm = norm_vector(w.q_norm, e, c.norm_plus_one);
        ew.k_norm = norm_vector(w.k_norm, e, c.norm_plus_one);
    }
    if (c.qkv_bias)
        for (View b : {w.bq, w.bk, w.bv}) {
            const std::vector<float> v = stored_vector(b, e);
            ew.bqkv.insert(ew.bqkv.end(), v.begin(), v.end());
        }
    if (c.attn_sinks) ew.sinks = stored_vector(w.sinks, e);
    if (c.sandwich_norm) {
        ew.attn_post_norm = norm_vector(w.attn_post_norm, e, c.norm_plus_one);
        ew.ffn_post_norm = norm_vector(w.ffn_post_norm, e, c.norm_plus_one);
    }
    if (c.kv_cache_dtype != KvCacheDtype::none) {
        const int64_t n = c.kv_scale_per_head ? c.n_kv_heads : 1;
        if (!w.k_scale.data || !w.v_scale.data || w.k_scale.size() != n || w.v_scale.size() != n)
            throw ImplError("simd: an FP8 cache needs k_scale and v_scale of " + std::to_string(n) + " each");
        const PagedAttentionParams p = decode_cache_params(c, w);
        ew.k_scale = kv_scales_per_head(p, false);
        ew.v_scale = kv_scales_per_head(p, true);
        ew.k_table = fp8_read_table(p, false);
        ew.v_table = fp8_read_table(p, true);
    }
    ew.wqkv = pack_columns(pool, e, {w.wq, w.wk, w.wv});
    ew.wo = pack_columns(pool, e, {w.wo});
    ew.w13 = pack_gate_up(pool, e, w.w1, w.w3);
    ew.w2 = pack_columns(pool, e, {w.w2});
    return ew;
}

// Rows [row0, row0 + n) of a cache buffer through the FP8 cache: each value
// x becomes fp8(x / s) * s, s its kv head's scale, stored back in the
// buffer's elem. The code's value times s comes from the kv head's table, as
// the paged kernel reads its codes; the rows are few (a decode step writes
// one), so this is a plain loop.
static void fp8_round_trip(Buffer& b, size_t row0, size_t n, const std::vector<float>& scale,
                           const std::vector<float>& table, const BlockConfig& c) {
    const size_t W = b.cols(), hd = static_cast<size_t>(c.head_dim);
    Tensor rows_f(static_cast<int64_t>(n), static_cast<int64_t>(W));
    load(CRows{static_cast<const char*>(b.data()) + row0 * W * elem_bytes(b.elem()), W, b.elem()}, 0, rows_f.mut());
    for (size_t i = 0; i < n * W; ++i) {
        const size_t g = (i % W) / hd;
        float& x = rows_f.data[i];
        x = table[g * 256 + fp8_bits(x / scale[g], c.kv_cache_dtype)];
    }
    store(rows_f.view(), b.m_at(row0));
}

void KvCache::reset(Elem e, size_t capacity, size_t kv_width) {
    k.resize(e, capacity, kv_width);
    v.resize(e, capacity, kv_width);
    pos.assign(capacity, 0);
    len = 0;
}

void forward(EngineContext& ctx, const EngineWeights& w, CRows x, const int64_t* pos, size_t n, KvCache& cache,
             RunState& s) {
    const BlockConfig& c = w.config;
    const size_t D = static_cast<size_t>(c.d_model), F = static_cast<size_t>(c.ffn_dim);
    const size_t H = static_cast<size_t>(c.n_heads), KV = static_cast<size_t>(c.n_kv_heads);
    const size_t hd = static_cast<size_t>(c.head_dim), Q = H * hd, KVW = KV * hd;
    const Elem e = w.elem;
    const float eps = static_cast<float>(c.norm_eps);
    ThreadPool& pool = ctx.pool;
    const Target t = ctx.target;
    if (cache.len + n > cache.k.rows()) throw std::logic_error("simd: KV cache overflow");

    s.attn_in.resize(e, n, D);
    s.qkv.resize(e, n, Q + 2 * KVW);
    s.q_rot.resize(e, n, Q);
    s.attn.resize(e, n, Q);
    s.attn_wo.resize(e, n, D);
    s.h.resize(Elem::f32, n, D);
    s.ffn_in.resize(e, n, D);
    s.gated.resize(e, n, F);
    s.ffn_out.resize(e, n, D);
    s.out.resize(Elem::f32, n, D);

    // ---- attention ----

    // attn_in = self.input_layernorm(x)
    rows(pool, n, [&](size_t r0, size_t r1) {
        kern::rmsnorm_rows(t, x, w.attn_norm.data(), D, eps, s.attn_in.m(), r0, r1);
    });

    // qkv = attn_in @ [wq | wk | wv] (+ [bq | bk | bv], Qwen2: in the epilogue, before the store)
    MatmulOut qkv_out{Epilogue::store, s.qkv.m(), {}, {}};
    if (c.qkv_bias) qkv_out = {Epilogue::bias, s.qkv.m(), {}, {}, w.bqkv.data()};
    matmul(pool, t, s.attn_in.c(), n, w.wqkv, qkv_out, s.gemm);

    // q_rot = rope(q_norm(q)); cache_k[len:] = rope(k_norm(k)); cache_v[len:] = v
    kern::QkvRope qr;
    qr.qkv = s.qkv.c();
    qr.H = H;
    qr.KV = KV;
    qr.table = ctx.rope.rows(pos, n, rope_for_call(rope_params(c), std::max(ctx.rope_len, rope_seq_len(pos, n))));
    if (c.nope) qr.table.rd = 0;  // a NoPE layer: no dim is rotated, every dim passes through
    qr.q_norm = c.qk_norm ? w.q_norm.data() : nullptr;
    qr.k_norm = c.qk_norm ? w.k_norm.data() : nullptr;
    qr.eps = eps;
    qr.q_rot = s.q_rot.m();
    qr.k_rot = cache.k.m_at(cache.len);
    qr.v = cache.v.m_at(cache.len);
    rows(pool, n, [&](size_t r0, size_t r1) { kern::qkv_rope_rows(t, qr, r0, r1); });
    if (c.kv_cache_dtype != KvCacheDtype::none) {
        fp8_round_trip(cache.k, cache.len, n, w.k_scale, w.k_table, c);
        fp8_round_trip(cache.v, cache.len, n, w.v_scale, w.v_table, c);
    }
    std::copy(pos, pos + n, cache.pos.begin() + static_cast<std::ptrdiff_t>(cache.len));
    cache.len += n;

    // attn = softmax(q_rot @ cache_k.T / sqrt(hd) + causal(pos)) @ cache_v
    Attn a;
    a.q = s.q_rot.c();
    a.k = cache.k.c();
    a.v = cache.v.c();
    a.q_pos = pos;
    a.k_pos = cache.pos.data();
    a.T = n;
    a.S = cache.len;
    a.H = H;
    a.KV = KV;
    a.hd = hd;
    static_cast<AttentionVariant&>(a) = attention_variant(c);
    a.sinks = c.attn_sinks ? w.sinks.data() : nullptr;
    a.out = s.attn.m();
    attention(pool, t, a);

    // attn_wo = self.o_proj(attn)
    matmul(pool, t, s.attn.c(), n, w.wo, {Epilogue::store, s.attn_wo.m(), {}, {}}, s.gemm);

    // Gemma 2/3: attn_post = self.post_attention_layernorm(attn_wo), what the residual adds
    CRows attn_branch = s.attn_wo.c();
    if (c.sandwich_norm) {
        s.attn_post.resize(e, n, D);
        rows(pool, n, [&](size_t r0, size_t r1) {
            kern::rmsnorm_rows(t, s.attn_wo.c(), w.attn_post_norm.data(), D, eps, s.attn_post.m(), r0, r1);
        });
        attn_branch = s.attn_post.c();
    }

    // h = x + attn_wo; ffn_in = self.post_attention_layernorm(h)   (Gemma 2/3: pre_feedforward_layernorm)
    rows(pool, n, [&](size_t r0, size_t r1) {
        kern::add_rmsnorm_rows(t, x, attn_branch, s.h.m(), w.ffn_norm.data(), D, eps, s.ffn_in.m(), r0, r1);
    });

    // ---- feed-forward ----

    // gated = act_fn(self.w1(ffn_in)) * self.w3(ffn_in)   (F.silu, or Gemma's gelu_tanh)
    matmul(pool, t, s.ffn_in.c(), n, w.w13, {gate_epilogue(c.hidden_act), s.gated.m(), {}, {}}, s.gemm);

    if (!c.sandwich_norm) {
        // out = h + self.w2(gated)   (ffn_out, the product alone, kept for the tap)
        matmul(pool, t, s.gated.c(), n, w.w2, {Epilogue::residual, s.out.m(), s.h.c(), s.ffn_out.m()}, s.gemm);
        return;
    }
    // Gemma 2/3: out = h + self.post_feedforward_layernorm(self.w2(gated)): the
    // norm needs the whole row, so the product is stored, normed, then added.
    matmul(pool, t, s.gated.c(), n, w.w2, {Epilogue::store, s.ffn_out.m(), {}, {}}, s.gemm);
    s.ffn_post.resize(e, n, D);
    rows(pool, n, [&](size_t r0, size_t r1) {
        kern::rmsnorm_rows(t, s.ffn_out.c(), w.ffn_post_norm.data(), D, eps, s.ffn_post.m(), r0, r1);
        std::vector<float> branch(D);
        for (size_t r = r0; r < r1; ++r) {
            load(CRows{static_cast<const char*>(s.ffn_post.c().data) + r * D * elem_bytes(e), D, e}, 0,
                 MutView{branch.data(), 1, static_cast<int64_t>(D)});
            const float* h = static_cast<const float*>(s.h.c().data) + r * D;
            float* o = static_cast<float*>(s.out.m().data) + r * D;
            for (size_t j = 0; j < D; ++j) o[j] = h[j] + branch[j];
        }
    });
}

}  // namespace conform::simd

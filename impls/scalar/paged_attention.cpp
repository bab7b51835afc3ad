// paged_attention — a batch of ragged sequences over a paged KV cache
// (FlashInfer's layout: conform/interface.h PagedIndex), one sequence at a
// time: its keys and values gathered out of their pages, then the chapter's
// attention over them (attention.cpp), and each row's log-sum-exp.
//
// Key i of sequence b lives in cache row kv_indices[kv_indptr[b] + i / P] * P
// + i % P; the queries are the sequence's last q_len tokens, so query j sits
// at position kv_len - q_len + j and sees keys 0 ..= that position (causal,
// bottom-right). Rows no sequence owns are never read: conform fills them
// with NaN.
#include <cmath>
#include <vector>

#include "conform/dtype.h"
#include "scalar.h"

namespace conform::scalar {

int64_t paged_kv_len(const PagedIndex& idx, int64_t P, int64_t b) {
    const int64_t n = idx.kv_indptr[b + 1] - idx.kv_indptr[b];
    return n == 0 ? 0 : (n - 1) * P + idx.kv_last_page_len[b];
}
int64_t paged_row(const PagedIndex& idx, int64_t P, int64_t b, int64_t i) {
    return idx.kv_indices[idx.kv_indptr[b] + i / P] * P + i % P;
}
int64_t paged_q_pos(int64_t j, int64_t q_len, int64_t kv_len) { return kv_len - q_len + j; }

// An FP8 cache (conform/config.h kv_cache_dtype): each value written as
// fp8(x / scale), the division in float32, rounded to nearest even and
// saturating (conform/dtype.h), and read back as code * scale.
float kv_scale(const PagedAttentionParams& p, bool is_v, int64_t kv_head) { return p.kv_scale(is_v, kv_head); }
float kv_write(float x, float scale, KvCacheDtype d) { return fp8_round(x / scale, d); }
float kv_read(float code, float scale) { return code * scale; }

// k_b, v_b = k_cache[rows_b], v_cache[rows_b]        (kv_len, KV*hd): sequence b's keys in order,
// through an FP8 cache's write and read where the params have one.
void paged_gather(View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p, int64_t b,
                  const PagedRules& rules, MutView k_b, MutView v_b) {
    const int64_t hd = p.head_dim, W = p.n_kv_heads * hd;
    const KvCacheRules& kr = rules.cache;
    const bool fp8 = p.kv_cache_dtype != KvCacheDtype::none && kr.quantise;
    for (int64_t i = 0; i < k_b.rows; i++) {
        // (A mutant's rule may point past the cache: it wraps around, so
        // the bug reads the pool's rows, never memory outside it.)
        const int64_t row = rules.row(idx, p.page_size, b, i) % k_cache.rows;
        std::copy_n(k_cache.row(row), W, k_b.row(i));
        std::copy_n(v_cache.row(row), W, v_b.row(i));
        if (!fp8) continue;
        // k_b[i] = fp8(k / k_scale) * k_scale, per kv head g's scale     (the cache written, then read)
        for (int64_t c = 0; c < W; c++) {
            const float ks = kr.scale(p, false, c / hd), vs = kr.scale(p, true, c / hd);
            float& k = k_b.row(i)[c];
            float& v = v_b.row(i)[c];
            k = kr.read(kr.write(k, ks, p.kv_cache_dtype), ks);
            v = kr.read(kr.write(v, vs, p.kv_cache_dtype), vs);
        }
    }
}

void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                     MutView out, MutView lse, const PagedRules& rules) {
    const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim, P = p.page_size;
    detail::expect(H > 0 && KV > 0 && hd > 0 && P > 0 && H % KV == 0, "paged_attention",
                   "n_heads, n_kv_heads, head_dim and page_size must be positive, n_heads a multiple of n_kv_heads");
    const int64_t T = q.rows, B = idx.kv_last_page_len.n, W = KV * hd;
    detail::expect_positions("paged_attention", "qo_indptr", idx.qo_indptr, B + 1);
    detail::expect_positions("paged_attention", "kv_indptr", idx.kv_indptr, B + 1);
    detail::expect_shape("paged_attention", "q", q, T, H * hd);
    detail::expect_shape("paged_attention", "k_cache", k_cache, k_cache.rows, W);
    detail::expect_shape("paged_attention", "v_cache", v_cache, k_cache.rows, W);
    detail::expect_shape("paged_attention", "out", out, T, H * hd);
    detail::expect_shape("paged_attention", "lse", lse, T, H);
    AttentionParams ap(H, KV, hd, p);  // the variant: mask, transform, sinks
    AttentionRules ar = rules.attention;
    ar.page = P;
    const float cap = static_cast<float>(p.softcap);
    const bool masked_read = ar.softcap_after_mask && cap > 0;  // the bug: masked keys at logit -cap
    // Whether key position k is visible to query position q: the rules' causal test, inside the window and the chunk.
    auto sees = [&](int64_t k, int64_t qp, const WindowAt& at) {
        return ar.visible(k, qp) && ar.in_window(ap, k, qp, at);
    };
    const float scale = static_cast<float>(ar.scale(ap));  // attn_scale, or 1 / sqrt(hd)
    const int64_t sd = ar.score_dims > 0 ? std::min(ar.score_dims, hd) : hd;
    if (p.kv_cache_dtype != KvCacheDtype::none)
        detail::expect(p.k_scale && p.v_scale && (p.n_kv_scales == 1 || p.n_kv_scales == KV), "paged_attention",
                       "an FP8 cache needs k_scale and v_scale, 1 or n_kv_heads of each");

    for (int64_t b = 0; b < B; b++) {
        const int64_t q0 = idx.qo_indptr[b], q_len = idx.qo_indptr[b + 1] - q0;
        const int64_t kv_len = rules.kv_len(idx, P, b);
        if (q_len == 0) continue;
        Tensor k_b(kv_len, W), v_b(kv_len, W);
        paged_gather(k_cache, v_cache, idx, p, b, rules, k_b.mut(), v_b.mut());
        // positions: keys 0 .. kv_len-1; the queries the sequence's last q_len
        std::vector<int64_t> k_pos(static_cast<size_t>(kv_len)), q_pos(static_cast<size_t>(q_len));
        for (int64_t i = 0; i < kv_len; i++) k_pos[static_cast<size_t>(i)] = i;
        for (int64_t j = 0; j < q_len; j++) q_pos[static_cast<size_t>(j)] = rules.q_pos(j, q_len, kv_len);
        const View q_b{q.row(q0), q_len, H * hd};
        const MutView out_b{out.row(q0), q_len, H * hd};
        const Positions qp{q_pos.data(), q_len}, kp{k_pos.data(), kv_len};
        // out_b = attention(q_b, k_b, v_b)                        (q_len, H*hd)
        Tensor o_b(q_len, H * hd);
        attention(q_b, k_b.view(), v_b.view(), qp, kp, ap, o_b.mut(), ar);
        const WindowAt at{q_len > 0 ? q_pos[0] : 0, q_len, P};  // what attention() asked its window with

        // lse[t, h] = max_i s_i + log(sum_i exp(s_i - max_i s_i)) over the visible keys
        for (int64_t j = 0; j < q_len; j++) {
            const bool any = kv_len > 0 && (masked_read || [&] {
                for (int64_t i = 0; i < kv_len; i++)
                    if (sees(k_pos[static_cast<size_t>(i)], q_pos[static_cast<size_t>(j)], at)) return true;
                return false;
            }());
            if (!any && !rules.write_empty) continue;  // the bug: an empty sequence's rows left as they were
            std::copy_n(o_b.data.begin() + j * H * hd, H * hd, out_b.row(j));
            for (int64_t h = 0; h < H; h++) {
                if (!any) {
                    lse.row(q0 + j)[h] = -INFINITY;
                    continue;
                }
                const float* qh = q_b.row(j) + h * hd;
                const int64_t kvh = ar.kv_head(h, H, KV);
                float m = -INFINITY;
                std::vector<float> s(static_cast<size_t>(kv_len), -INFINITY);
                for (int64_t i = 0; i < kv_len; i++) {
                    const bool seen = sees(k_pos[static_cast<size_t>(i)], q_pos[static_cast<size_t>(j)], at);
                    if (!seen && !masked_read) continue;
                    float si = -cap;
                    if (seen) {
                        const float* ki = k_b.view().row(i) + kvh * hd;
                        float dot = 0.0f;
                        for (int64_t d = 0; d < sd; d++) dot += qh[d] * ki[d];
                        si = dot * scale;
                        if (cap > 0) si = cap * std::tanh(si / cap);  // soft-cap, as attention() has it
                    }
                    s[static_cast<size_t>(i)] = si;
                    m = std::max(m, s[static_cast<size_t>(i)]);
                }
                // A sink (gpt-oss) joins the denominator: lse = log(exp(sink) + sum_i exp(s_i)).
                const float sink = p.sinks ? p.sinks[ar.sink_head(h, H, KV)] * (ar.sink_scaled ? scale : 1.0f) : -INFINITY;
                m = std::max(m, sink);
                const float shift = ar.subtract_max ? m : 0.0f;
                float sum = p.sinks ? std::exp(sink - shift) : 0.0f;
                for (int64_t i = 0; i < kv_len; i++)
                    if (s[static_cast<size_t>(i)] != -INFINITY) sum += std::exp(s[static_cast<size_t>(i)] - shift);
                const float added = rules.lse_adds_max ? shift : 0.0f;
                lse.row(q0 + j)[h] = static_cast<float>((added + std::log(sum)) * rules.lse_scale);
            }
        }
    }
}

}  // namespace conform::scalar

// mla_attention — DeepSeek's multi-head latent attention over a paged latent
// cache (conform/interface.h), one sequence at a time, in both forms an
// engine runs:
//   MHA (prefill): kv_b_proj applied to every cached latent, then each head's
//     attention over k = [c_kv @ w_uk | k_pe], v = c_kv @ w_uv (HF's form);
//   absorbed (decode): w_uk folded into the query, q_lat = q_nope @ w_uk^T,
//     scores q_lat . c_kv + q_pe . k_pe over the latents themselves, the
//     softmax's sum of latents then @ w_uv — MQA with one 576-wide kv head in
//     V3, and no per-head keys ever materialised.
// Both compute the same function; the MLA relation says so, and the harness
// checks it (tests: "the absorbed and MHA forms agree").
//
// Sequence b's key i lives in cache row kv_indices[kv_indptr[b] + i / P] * P
// + i % P (paged_attention.cpp's rules); its queries are its last q_len
// tokens, query j at position kv_len - q_len + j, causal bottom-right.
#include <algorithm>
#include <cmath>
#include <vector>

#include "scalar.h"

namespace conform::scalar {

double mla_scale(const MlaParams& p) { return p.score_scale(); }

void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx, const MlaParams& p,
                   MutView out, MutView lse, const MlaRules& rules) {
    const int64_t H = p.n_heads, dc = p.kv_lora_rank, dn = p.qk_nope_head_dim, dr = p.qk_rope_head_dim;
    const int64_t dv = p.v_head_dim, P = p.page_size, dq = dn + dr, dkv = dn + dv;
    detail::expect(H > 0 && dc > 0 && dn > 0 && dr > 0 && dv > 0 && P > 0, "mla_attention",
                   "n_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim and page_size must be positive");
    const int64_t T = q.rows, B = idx.kv_last_page_len.n;
    detail::expect_positions("mla_attention", "qo_indptr", idx.qo_indptr, B + 1);
    detail::expect_positions("mla_attention", "kv_indptr", idx.kv_indptr, B + 1);
    detail::expect_shape("mla_attention", "q", q, T, H * dq);
    detail::expect_shape("mla_attention", "ckv_cache", ckv_cache, ckv_cache.rows, dc);
    detail::expect_shape("mla_attention", "kpe_cache", kpe_cache, ckv_cache.rows, dr);
    detail::expect_shape("mla_attention", "w_kv_b", w_kv_b, dc, H * dkv);
    detail::expect_shape("mla_attention", "out", out, T, H * dv);
    detail::expect_shape("mla_attention", "lse", lse, T, H);
    const float scale = static_cast<float>(rules.scale(p));

    // w_uk_h[c, n] = w_kv_b[c, h*(dn+dv) + n]; the bug reads each head's
    // [dc, dn] block as if it were stored [dn, dc] (a repacked weight read
    // in the old layout).
    auto w_uk = [&](int64_t h, int64_t c, int64_t n) {
        if (rules.w_uk_transposed) {
            const int64_t f = n * dc + c;
            return w_kv_b.row(f / dn)[h * dkv + f % dn];
        }
        return w_kv_b.row(c)[h * dkv + n];
    };
    // w_uv_h[c, j] = w_kv_b[c, h*(dn+dv) + dn + j]; the bug skips the up-projection,
    // so a head's output is its latent sum's first dv columns (identity in w_uv's place).
    auto w_uv = [&](int64_t h, int64_t c, int64_t j) {
        if (rules.w_uv_missing) return c == j ? 1.0f : 0.0f;
        return w_kv_b.row(c)[h * dkv + dn + j];
    };

    for (int64_t b = 0; b < B; b++) {
        const int64_t q0 = idx.qo_indptr[b], q_len = idx.qo_indptr[b + 1] - q0;
        const int64_t kv_len = paged_kv_len(idx, P, b);
        if (q_len == 0) continue;
        // c_b, r_b = ckv_cache[rows_b], kpe_cache[rows_b]        (kv_len, dc), (kv_len, dr)
        Tensor c_b(kv_len, dc), r_b(kv_len, dr);
        for (int64_t i = 0; i < kv_len; i++) {
            const int64_t row = rules.row(idx, P, b, i) % ckv_cache.rows;  // a bug's row wraps inside the pool
            std::copy_n(ckv_cache.row(row), dc, c_b.mut().row(i));
            std::copy_n(kpe_cache.row(row), dr, r_b.mut().row(i));
        }
        const bool absorbed =
            rules.form == MlaRules::Form::absorbed || (rules.form == MlaRules::Form::by_rows && q_len <= 4);
        // MHA: k_nope, v = c_b @ w_uk, c_b @ w_uv per head   (kv_len, H, dn), (kv_len, H, dv)
        Tensor k_nope(absorbed ? 0 : kv_len, H * dn), v(absorbed ? 0 : kv_len, H * dv);
        if (!absorbed)
            for (int64_t i = 0; i < kv_len; i++)
                for (int64_t h = 0; h < H; h++) {
                    for (int64_t n = 0; n < dn; n++) {
                        float acc = 0.0f;
                        for (int64_t c = 0; c < dc; c++) acc += c_b.view().row(i)[c] * w_uk(h, c, n);
                        k_nope.mut().row(i)[h * dn + n] = acc;
                    }
                    for (int64_t j = 0; j < dv; j++) {
                        float acc = 0.0f;
                        for (int64_t c = 0; c < dc; c++) acc += c_b.view().row(i)[c] * w_uv(h, c, j);
                        v.mut().row(i)[h * dv + j] = acc;
                    }
                }

        std::vector<float> s(static_cast<size_t>(kv_len)), q_lat(static_cast<size_t>(dc)), o_lat(static_cast<size_t>(dc));
        for (int64_t t = 0; t < q_len; t++) {
            const int64_t seen = kv_len - q_len + t + 1;  // keys at positions <= the query's
            for (int64_t h = 0; h < H; h++) {
                float* o = out.row(q0 + t) + h * dv;
                if (seen <= 0) {  // no key: zeros, lse -inf
                    std::fill_n(o, dv, 0.0f);
                    lse.row(q0 + t)[h] = -INFINITY;
                    continue;
                }
                const float* q_nope = q.row(q0 + t) + h * dq;
                const float* q_pe = q_nope + dn;
                // absorbed: q_lat = q_nope @ w_uk^T                     (dc)
                if (absorbed)
                    for (int64_t c = 0; c < dc; c++) {
                        float acc = 0.0f;
                        for (int64_t n = 0; n < dn; n++) acc += q_nope[n] * w_uk(h, c, n);
                        q_lat[static_cast<size_t>(c)] = acc;
                    }
                // s_i = (q_nope . k_nope_i + q_pe . k_pe_i) * scale      (absorbed: q_lat . c_i for the first)
                float m = -INFINITY;
                for (int64_t i = 0; i < seen; i++) {
                    float dot = 0.0f;
                    if (absorbed)
                        for (int64_t c = 0; c < dc; c++) dot += q_lat[static_cast<size_t>(c)] * c_b.view().row(i)[c];
                    else
                        for (int64_t n = 0; n < dn; n++) dot += q_nope[n] * k_nope.view().row(i)[h * dn + n];
                    for (int64_t d = 0; d < dr; d++) dot += q_pe[d] * r_b.view().row(i)[d];
                    s[static_cast<size_t>(i)] = dot * scale;
                    m = std::max(m, s[static_cast<size_t>(i)]);
                }
                // p_i = exp(s_i - m) / sum   (the bug: each page's keys against that page's own max)
                float sum = 0.0f;
                for (int64_t i0 = 0; i0 < seen; i0 += rules.split_merge_unrescaled ? P : seen) {
                    const int64_t i1 = std::min(seen, i0 + (rules.split_merge_unrescaled ? P : seen));
                    float mi = m;
                    if (rules.split_merge_unrescaled) {
                        mi = -INFINITY;
                        for (int64_t i = i0; i < i1; i++) mi = std::max(mi, s[static_cast<size_t>(i)]);
                    }
                    for (int64_t i = i0; i < i1; i++) {
                        s[static_cast<size_t>(i)] = std::exp(s[static_cast<size_t>(i)] - mi);
                        sum += s[static_cast<size_t>(i)];
                    }
                }
                // out = softmax @ v                                     (absorbed: (softmax @ c_b) @ w_uv)
                if (absorbed) {
                    std::fill(o_lat.begin(), o_lat.end(), 0.0f);
                    for (int64_t i = 0; i < seen; i++)
                        for (int64_t c = 0; c < dc; c++)
                            o_lat[static_cast<size_t>(c)] += s[static_cast<size_t>(i)] / sum * c_b.view().row(i)[c];
                    for (int64_t j = 0; j < dv; j++) {
                        float acc = 0.0f;
                        for (int64_t c = 0; c < dc; c++) acc += o_lat[static_cast<size_t>(c)] * w_uv(h, c, j);
                        o[j] = acc;
                    }
                } else {
                    std::fill_n(o, dv, 0.0f);
                    for (int64_t i = 0; i < seen; i++)
                        for (int64_t j = 0; j < dv; j++) o[j] += s[static_cast<size_t>(i)] / sum * v.view().row(i)[h * dv + j];
                }
                lse.row(q0 + t)[h] = m + std::log(sum);
            }
        }
    }
}

}  // namespace conform::scalar

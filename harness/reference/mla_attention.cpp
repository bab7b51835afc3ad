// mla_attention's reference: DeepSeek's multi-head latent attention over a
// paged latent cache, computed as HF's modeling_deepseek_v3 does — the MHA
// form, never the absorbed one. Each sequence's latents c_kv and RoPE keys
// k_pe are gathered out of their pages (paged_attention.cpp's gather, so
// nothing about a page survives), kv_b_proj maps the latents to every head's
// no-RoPE key and value, and HF's attention (attention.cpp) runs over them.
// An absorbed kernel (q_nope @ w_uk^T against c_kv, then @ w_uv) computes the
// same function in another order: it is judged against this, not against
// itself.
#include <cmath>
#include <optional>

#include "reference/torch_ops.h"

namespace conform::ref {

// Heads of different widths for one attention: a query and key are dn + dr
// wide, a value dv. attention() takes one head_dim, so each is zero-padded
// to the wider: the padded products are exact zeros in every precision.
int64_t mla_head_dim(const BlockConfig& c) { return std::max(c.mla_qk_dim(), c.v_head_dim); }

AttentionParams mla_attention_params(const BlockConfig& c) {
    AttentionParams p(c.n_heads, c.n_heads, mla_head_dim(c), attention_variant(c));
    // The model's scale is 1/sqrt(dn + dr) (attn_scale: YaRN's mscale^2 in it), never the padded width's.
    p.scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(static_cast<double>(c.mla_qk_dim()));
    p.config = &c;
    return p;
}

MlaHeads mla_assemble(const torch::Tensor& q, const torch::Tensor& kv, const torch::Tensor& kpe, const BlockConfig& c) {
    const int64_t H = c.n_heads, dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
    const int64_t hd = mla_head_dim(c), T = q.size(0), S = kv.size(0);
    auto pad = [&](const torch::Tensor& t, int64_t rows, int64_t w) {  // [rows, H, w] -> [rows, H*hd]
        return torch::constant_pad_nd(t, {0, hd - w}).reshape({rows, H * hd});
    };
    const auto kvh = kv.reshape({S, H, dn + dv});
    // k = [k_nope | k_pe]: one k_pe per key, the same for every head
    const auto k = torch::cat({kvh.narrow(2, 0, dn), kpe.reshape({S, 1, dr}).expand({S, H, dr})}, 2);
    return {pad(q.reshape({T, H, dn + dr}), T, dn + dr), pad(k, S, dn + dr), pad(kvh.narrow(2, dn, dv), S, dv)};
}

std::pair<torch::Tensor, torch::Tensor> mla_attention(const torch::Tensor& q, const torch::Tensor& ckv_pool,
                                                      const torch::Tensor& kpe_pool, const torch::Tensor& w_kv_b,
                                                      Precision p, const PagedSeqs& s, const BlockConfig& cfg,
                                                      const Ctx& ctx) {
    const int64_t T = q.size(0), H = cfg.n_heads, dv = cfg.v_head_dim, hd = mla_head_dim(cfg);
    const int64_t B = static_cast<int64_t>(s.kv_last_page_len.size());
    auto out = torch::zeros({T, H * dv}, q.options());
    auto lse = torch::full({T, H}, -std::numeric_limits<double>::infinity(), q.options());
    const AttentionParams ap = mla_attention_params(cfg);
    // The bug: each head's [dc, dn] block of w_uk read as if stored [dn, dc].
    torch::Tensor w = w_kv_b;
    if (ctx.v.mla_w_uk_transposed) {
        const int64_t dc = cfg.kv_lora_rank, dn = cfg.qk_nope_head_dim, dkv = dn + cfg.v_head_dim;
        const auto wh = w_kv_b.reshape({dc, H, dkv});
        const auto uk = wh.narrow(2, 0, dn).permute({1, 0, 2}).contiguous().reshape({H, dn, dc}).transpose(1, 2);
        w = torch::cat({uk.permute({1, 0, 2}), wh.narrow(2, dn, cfg.v_head_dim)}, 2).reshape({dc, H * dkv});
    }
    // The bug: w_uv never applied, each head's value its latent's first dv
    // columns (identity [dc, dv] in w_uv's place: exact in every precision).
    if (ctx.v.mla_w_uv_missing) {
        const int64_t dc = cfg.kv_lora_rank, dn = cfg.qk_nope_head_dim, dv = cfg.v_head_dim;
        const auto wh = w.reshape({dc, H, dn + dv});
        const auto eye = torch::eye(dc, dv, w.options()).reshape({dc, 1, dv}).expand({dc, H, dv});
        w = torch::cat({wh.narrow(2, 0, dn), eye}, 2).reshape({dc, H * (dn + dv)});
    }
    // The bug: each page a split of a split-KV kernel, merged unrescaled (paged_attention.cpp's).
    std::optional<Variant> sv;
    if (ctx.v.paged_split_unrescaled) {
        sv = ctx.v;
        sv->softmax_tile = s.page_size, sv->softmax_tile_local = true;
    }
    const Ctx split{ctx.dtype, ctx.acc_dtype, ctx.order, sv ? *sv : ctx.v, ctx.act_quant, ctx.route_taken};
    for (int64_t b = 0; b < B; ++b) {
        // The sequence's c_kv rows as its keys and its k_pe rows as its values: gathered alike.
        const PagedSeq g = gather_sequence(q, ckv_pool, kpe_pool, p, s, b, ctx.v);
        if (g.q_len == 0 || g.kv_len == 0) continue;  // no key: out 0, lse -inf
        // kv = kv_b_proj(c_kv)                                  [kv_len, H*(dn + dv)]
        const MlaHeads m = mla_assemble(g.q, matmul(g.k, w, ctx), g.v, cfg);
        torch::Tensor l;
        const auto o = attention(m.q, m.k, m.v, g.q_pos, g.k_pos, ap, torch::Tensor(), split, {}, &l);
        if (ctx.v.lse_base2) l = l / std::log(2.0);
        out.narrow(0, g.q_begin, g.q_len).copy_(o.reshape({g.q_len, H, hd}).narrow(2, 0, dv).reshape({g.q_len, H * dv}));
        lse.narrow(0, g.q_begin, g.q_len).copy_(l);
    }
    return {out, lse};
}

}  // namespace conform::ref

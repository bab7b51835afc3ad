#include <cmath>

#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// Which keys each query sees. Causal by position: key j visible to query i iff
// k_pos[j] <= q_pos[i] (bottom-right aligned when the queries are the tail).
torch::Tensor visible(const torch::Tensor& q_pos, const torch::Tensor& k_pos, Variant::Mask m) {
    auto qp = q_pos.unsqueeze(1), kp = k_pos.unsqueeze(0);  // [T, 1], [1, S]
    switch (m) {
        case Variant::Mask::causal: return kp <= qp;
        case Variant::Mask::none: return torch::ones({q_pos.size(0), k_pos.size(0)}, torch::kBool);
        case Variant::Mask::strict: return kp < qp;
        case Variant::Mask::plus_one: return kp <= qp + 1;
        case Variant::Mask::index_tail:
        case Variant::Mask::index_top: {
            // The row index for the position: a kernel that derives the mask from
            // where a query sits in the block, not from the position array.
            const int64_t T = q_pos.size(0), S = k_pos.size(0);
            auto i = torch::arange(T, torch::kInt64).unsqueeze(1), j = torch::arange(S, torch::kInt64).unsqueeze(0);
            return m == Variant::Mask::index_tail ? j <= i + (S - T) : j <= i;
        }
    }
    return kp <= qp;
}

}  // namespace

torch::Tensor window_edge(const torch::Tensor& q_pos, int64_t W, const Variant& v) {
    auto lo = q_pos.unsqueeze(1) - W;  // [T, 1]
    switch (v.window) {
        case Variant::Window::as_config: break;
        case Variant::Window::from_first_query: lo = torch::full_like(lo, q_pos[0].item<int64_t>() - W); break;
        case Variant::Window::by_page: {  // the page of the first key in the window, whole
            const int64_t P = std::max<int64_t>(1, v.window_page);
            lo = (lo + 1).clamp_min(0).div(P, "floor") * P - 1;
            break;
        }
        case Variant::Window::decode_only:
            if (q_pos.size(0) > 1) lo = torch::full_like(lo, std::numeric_limits<int64_t>::min());
            break;
        case Variant::Window::prefill_only:
            if (q_pos.size(0) == 1) lo = torch::full_like(lo, std::numeric_limits<int64_t>::min());
            break;
    }
    return lo;
}

namespace {

// A flash kernel's softmax over tiles of `tile` keys that forgets to rescale:
// the running max moves, the sums accumulated under the old max stay as they
// were. p[h, t, s] for the visible keys (scores already masked with -inf).
// A sink [H, 1, 1], when defined, is the state before the first tile (max =
// sink, sum = 1), as an online softmax takes it.
// `local`: the tiles are a split-KV kernel's splits, each exponentiated
// against its own max and merged by adding sums and accumulators as they are
// (the merge's exp(m_i - m) missing); *lse, when asked, is that kernel's
// log-sum-exp, the common max + log of the added sums ([H, T, 1]). (Its
// hypothesis is offered without sinks only: a sink would stand as one more
// split of weight 1.)
torch::Tensor unrescaled_softmax_av(const torch::Tensor& scores, const torch::Tensor& vh, int64_t tile,
                                    const torch::Tensor& sink, bool local = false, torch::Tensor* lse = nullptr) {
    const int64_t S = scores.size(-1);
    const double inf = std::numeric_limits<double>::infinity();
    auto m = torch::full_like(scores.narrow(-1, 0, 1), -inf);
    auto l = torch::zeros_like(m);
    if (sink.defined()) {
        m = sink.to(m.scalar_type()).expand_as(m).clone();
        l = torch::ones_like(m);
    }
    auto m_all = m.clone();
    auto acc = torch::zeros({scores.size(0), scores.size(1), vh.size(-1)}, scores.options());
    for (int64_t s0 = 0; s0 < S; s0 += tile) {
        const int64_t n = std::min(tile, S - s0);
        auto st = scores.narrow(-1, s0, n);
        const auto m_tile = std::get<0>(st.max(-1, true));
        auto m_new = local ? m_tile : torch::maximum(m, m_tile);
        auto safe = torch::where(torch::isinf(m_new), torch::zeros_like(m_new), m_new);
        auto p = torch::exp(st - safe);  // masked keys: exp(-inf) = 0
        l = l + p.sum(-1, true);         // the bug: no l * exp(m - m_new)
        acc = acc + torch::matmul(p, vh.narrow(1, s0, n));
        m = m_new;
        m_all = torch::maximum(m_all, m_tile);
    }
    if (lse) *lse = m_all + torch::log(l);
    return acc / torch::where(l > 0, l, torch::ones_like(l));
}

torch::Tensor softmax(const torch::Tensor& scores, const Ctx& ctx) {
    // HF: nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    const auto sdt = ctx.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto s = scores.to(sdt);
    if (ctx.v.softmax_no_max) {
        // A naive kernel: exp of the raw score in float32 overflows above ~88.7
        // (inf / inf = NaN), and a row whose every exp underflows divides 0 by 0.
        auto e32 = torch::exp(s.to(torch::kFloat32));
        auto sum32 = e32.sum(-1, true);
        if (sdt == torch::kFloat32) return (e32 / sum32).to(ctx.dtype);
        // In float64 the finite rows keep float64 accuracy (softmax is shift
        // invariant); only where float32 breaks down does the pattern follow it.
        const double nan = std::numeric_limits<double>::quiet_NaN();
        auto p = torch::softmax(s, -1);
        p = torch::where(sum32.isinf(), torch::where(e32.isinf(), torch::full_like(p, nan), torch::zeros_like(p)), p);
        p = torch::where(sum32 == 0, torch::full_like(p, nan), p);
        return p.to(ctx.dtype);
    }
    if (ctx.order == Order::library) return torch::softmax(s, -1).to(ctx.dtype);
    auto m = std::get<0>(s.max(-1, true));
    auto e = torch::exp(s - m);
    Ctx sctx{sdt, sdt, ctx.order, ctx.v};
    return (e / sum_last(e, sctx)).to(ctx.dtype);
}

}  // namespace

// HF LlamaAttention / eager_attention_forward, with keys and values shared by
// groups of query heads (repeat_kv: query head h reads kv head h // n_rep).
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& q_pos, const torch::Tensor& k_pos, const AttentionParams& p,
                        const torch::Tensor& sinks, const Ctx& ctx, const torch::Tensor& cached, torch::Tensor* lse) {
    const int64_t n_heads = p.n_heads, n_kv_heads = p.n_kv_heads, head_dim = p.head_dim;
    const int64_t T = q.size(0), S = k.size(0), n_rep = n_heads / n_kv_heads;
    auto qh = q.reshape({T, n_heads, head_dim}).transpose(0, 1);     // [H, T, hd]
    auto kh = k.reshape({S, n_kv_heads, head_dim}).transpose(0, 1);  // [KV, S, hd]
    auto vh = v.reshape({S, n_kv_heads, head_dim}).transpose(0, 1);  // [KV, S, hd]
    // repeat_kv: query head h reads kv head h / n_rep. Computed as HF does
    // only where a variant needs every head's own copy; otherwise a group's
    // n_rep query heads are stacked as the rows of one product against their
    // kv head, [KV, n_rep·T, ·] — the same sums, without n_rep copies of the
    // keys and values (at 8k keys and 32 heads, most of the reference's time).
    auto per_head = [&](const torch::Tensor& x) {  // [KV, S, n] -> [H, S, n]
        // The bug: heads tiled [kv0, kv1, .., kv0, kv1, ..] so h reads h % KV.
        return ctx.v.gqa_tiled ? x.repeat({n_rep, 1, 1}) : x.repeat_interleave(n_rep, 0);
    };
    auto grouped = [&](const torch::Tensor& a, const torch::Tensor& b) {  // a [H, T, n] @ b [KV, n, m] -> [H, T, m]
        if (ctx.v.gqa_tiled) return matmul(a, per_head(b), ctx);
        return matmul(a.reshape({n_kv_heads, n_rep * T, a.size(-1)}), b, ctx).reshape({n_heads, T, b.size(-1)});
    };
    const double scale = ctx.v.scale.value_or(p.score_scale());  // config.attn_scale, or 1 / sqrt(hd)
    // attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    const int64_t sd = ctx.v.score_dims > 0 ? std::min(ctx.v.score_dims, head_dim) : head_dim;
    auto scores = grouped(qh.narrow(-1, 0, sd), kh.narrow(-1, 0, sd).transpose(1, 2)) * scale;  // [H, T, S]
    // Gemma 2: attn_weights = tanh(attn_weights / softcap) * softcap, before the mask.
    const double cap = p.softcap;
    auto capped = [&](const torch::Tensor& s) { return (s / cap).tanh() * cap; };
    if (cap > 0 && !ctx.v.softcap_after_mask) scores = capped(scores);
    // The keys a query can reach at all: in the cache at its step (and the ring's).
    torch::Tensor reach = cached.defined() ? cached : torch::ones({T, S}, torch::kBool);
    if (ctx.v.kv_ring > 0 && T == 1 && S > ctx.v.kv_ring)  // a one-token step reads a ring of the last kv_ring keys
        reach = reach.logical_and(torch::arange(S, torch::kInt64).unsqueeze(0) >= S - ctx.v.kv_ring);
    auto vis = visible(q_pos, k_pos, ctx.v.mask).logical_and(reach);  // [T, S]
    // Sliding window: k_pos > q_pos - W as well.
    if (p.sliding_window > 0) vis = vis.logical_and(k_pos.unsqueeze(0) > window_edge(q_pos, p.sliding_window, ctx.v));
    // Chunked attention (Llama 4): k_pos // C == q_pos // C as well.
    const int64_t C = p.chunk;
    if (C > 0)
        vis = vis.logical_and(k_pos.div(C, "floor").unsqueeze(0) == q_pos.div(C, "floor").unsqueeze(1));
    const double inf = std::numeric_limits<double>::infinity();
    scores = scores.masked_fill(vis.logical_not().unsqueeze(0), -inf);
    if (cap > 0 && ctx.v.softcap_after_mask) {
        // The bug: the cap taken after the mask turns each masked key's -inf
        // into -cap, a finite logit; keys outside the cache stay unread.
        scores = capped(scores).masked_fill(reach.logical_not().unsqueeze(0), -inf);
        vis = reach;
    }
    // gpt-oss: combined_logits = torch.cat([attn_weights, sinks], dim=-1); the
    // softmax over it; probs[..., :-1], the sink's column dropped: a logit
    // every row sees, with no value.
    torch::Tensor sink;  // [H, 1, 1]
    if (sinks.defined()) {
        auto sh = sinks.reshape({n_heads}).to(scores.scalar_type());
        if (ctx.v.sinks == Variant::Sinks::per_kv_head)  // the bug: head h reads its kv head's sink, sinks[h / n_rep]
            sh = sh.index_select(0, torch::arange(n_heads, torch::kInt64).div(n_rep, "floor"));
        if (ctx.v.sinks == Variant::Sinks::scaled) sh = sh * scale;  // the bug: the sink scaled like a score
        sink = sh.view({n_heads, 1, 1});
    }
    // The softmax's logits: the scores and, with sinks, each head's sink.
    const torch::Tensor logits =
        sink.defined() ? torch::cat({scores, sink.expand({n_heads, T, 1})}, -1) : scores;  // [H, T, S (+ 1)]
    // *lse from l [H, T]. A row that sees no key: lse -inf, sinks or not (the
    // contract's "out 0, lse -inf"; reachable only under a bug's mask, whose
    // kernel then writes that, not the sink's own log).
    auto put_lse = [&](torch::Tensor l) {
        l = torch::where(vis.any(-1).view({1, T}), l, torch::full_like(l, -std::numeric_limits<double>::infinity()));
        *lse = l.transpose(0, 1).to(q.scalar_type());  // [T, H]
    };
    if (lse) {
        // FlashAttention's softmax_lse: the max-shifted log-sum-exp, in the
        // softmax's precision (float32 below float64, as HF's softmax runs).
        const auto sdt = ctx.dtype == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
        auto l = torch::logsumexp(logits.to(sdt), -1);  // [H, T]
        if (ctx.v.softmax_no_max) {
            // log Σ exp(s) unshifted, as the naive kernel sums it in float32:
            // +inf once a score passes ~88.7, -inf when every exp underflows.
            auto sum32 = torch::exp(logits.to(torch::kFloat32)).sum(-1).to(sdt);
            l = torch::where(sum32.isinf(), torch::full_like(l, std::numeric_limits<double>::infinity()), l);
            l = torch::where(sum32 == 0, torch::full_like(l, -std::numeric_limits<double>::infinity()), l);
        }
        // The bug: log Σ exp(s - m), the row's max m not added back.
        if (ctx.v.lse_max_dropped) l = l - std::get<0>(logits.to(sdt).max(-1));
        put_lse(l);
    }
    torch::Tensor out;
    if (ctx.v.softmax_tile > 0) {  // the sink, if any, is the tiles' initial state
        torch::Tensor split_lse;  // [H, T, 1]: a split-KV merge's own lse
        out = unrescaled_softmax_av(scores.to(torch::kFloat64), per_head(vh).to(torch::kFloat64), ctx.v.softmax_tile,
                                    sink.defined() ? sink.to(torch::kFloat64) : sink, ctx.v.softmax_tile_local,
                                    lse && ctx.v.softmax_tile_local ? &split_lse : nullptr)
                  .to(q.scalar_type());
        if (split_lse.defined()) put_lse(split_lse.squeeze(-1));
    } else {
        auto p = softmax(logits, ctx).narrow(-1, 0, S);           // [H, T, S]: probs[..., :-1] with a sink
        const auto bad = vh.isfinite().logical_not();             // [KV, S, hd]
        if (!bad.any().item<bool>()) {
            out = grouped(p, vh);                                 // [H, T, hd]
        } else {
            // Only a variant's values are non-finite (an FP8 cache written
            // without saturation). A kernel reads the keys a row sees, so a
            // masked key's NaN must not reach the row through 0 · NaN: the
            // row's element is non-finite iff a key it sees has a
            // non-finite value there.
            out = grouped(p, torch::where(bad, torch::zeros_like(vh), vh));
            auto seen = vis.to(vh.scalar_type()).unsqueeze(0).expand({n_heads, T, S}).contiguous();
            auto hit = grouped(seen, bad.to(vh.scalar_type()));  // [H, T, hd]
            out = torch::where(hit > 0, torch::full_like(out, std::numeric_limits<double>::quiet_NaN()), out);
        }
    }
    // A query that sees no key at all (possible only for arbitrary positions):
    // the convention is a zero output, never NaN.
    auto any = vis.any(-1).view({1, T, 1});
    const double empty = ctx.v.empty_row_nan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    out = torch::where(any, out, torch::full_like(out, empty));
    return out.transpose(0, 1).reshape({T, n_heads * head_dim});
}

}  // namespace conform::ref

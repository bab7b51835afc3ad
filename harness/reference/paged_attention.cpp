// paged_attention's reference: FlashInfer's batch prefill / decode over a
// paged KV cache, computed the way no kernel does — each sequence alone, its
// keys and values gathered by the index arrays into one contiguous tensor,
// then HF's attention over them (attention.cpp). Nothing about a page
// survives the gather, so the result cannot depend on the page size, the
// order of the pages, the pool's other rows or the batch's other sequences:
// every paging decision a kernel makes is judged, none is shared.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "conform/dtype.h"
#include "conform/op_info.h"
#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

// The cache rows sequence b reads, in key order (conform/interface.h
// PagedIndex). A variant may read them as a kernel with a paging bug does:
// the block table ignored (its pages taken as consecutive from its first,
// wrapping at the end of the pool).
std::vector<int64_t> sequence_rows(const PagedSeqs& s, int64_t b, const Variant& v) {
    const int64_t first = s.kv_indptr[b], P = s.page_size;
    int64_t n = s.kv_indptr[b + 1] - first;
    if (v.paged_partial_page_dropped && n > 0 && s.kv_last_page_len[b] < P) --n;  // floor(kv_len / P) whole pages
    std::vector<int64_t> rows;
    if (v.paged_sequences_packed)  // every earlier sequence's keys first, as one packed sequence
        for (int64_t j = 0; j < b; ++j) {
            Variant own = v;
            own.paged_sequences_packed = false;
            const auto r = sequence_rows(s, j, own);
            rows.insert(rows.end(), r.begin(), r.end());
        }
    for (int64_t i = 0; i < n; ++i) {
        const int64_t page = v.paged_block_table_ignored ? (s.kv_indices[first] + i) % s.pages : s.kv_indices[first + i];
        int64_t used = i + 1 < n || v.paged_last_page_len_ignored || v.paged_partial_page_dropped ? P : s.kv_last_page_len[b];
        if (v.paged_one_slot_past && i + 1 == n && used < P) ++used;
        for (int64_t o = 0; o < used; ++o) rows.push_back(page * P + o);
    }
    return rows;
}

// The pool's rows `rows` as precision p, converted as they are copied: one
// pass over them (index_select and then a conversion made two, over GBs at
// serving sizes, in each of the reference's four runs).
torch::Tensor gather_rows(const torch::Tensor& pool, const std::vector<int64_t>& rows, Precision p, const CacheRead& cache) {
    const int64_t W = pool.size(1), n = static_cast<int64_t>(rows.size());
    const float* src = pool.data_ptr<float>();
    auto copy = [&](auto* dst) {
        using T = std::remove_reference_t<decltype(*dst)>;
        at::parallel_for(0, n, std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, W)), [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const float* from = src + rows[static_cast<size_t>(r)] * W;
                auto* to = dst + r * W;
                if (cache.dtype == KvCacheDtype::none)
                    for (int64_t j = 0; j < W; ++j) to[j] = from[j];
                else
                    for (int64_t j = 0; j < W; ++j) to[j] = static_cast<T>(cache.value(from[j], j));
            }
        });
    };
    if (p == Precision::f64) {
        auto out = torch::empty({n, W}, torch::kFloat64);
        copy(out.data_ptr<double>());
        return out;
    }
    auto out = torch::empty({n, W}, torch::kFloat32);
    copy(out.data_ptr<float>());
    return as_precision(out, p);
}

}  // namespace

PagedSeqs paged_seqs(const Case& c, const BlockConfig& config) {
    const int64_t pool_rows = c.in(op_info(c.op).pools().at(0)).rows();
    PagedSeqs s{c.pos("qo_indptr"), c.pos("kv_indptr"), c.pos("kv_indices"), c.pos("kv_last_page_len"),
                config.page_size, pool_rows / std::max<int64_t>(1, config.page_size), KvCacheDtype::none, {}, {}, 0};
    if (config.kv_cache_dtype != KvCacheDtype::none) {
        s.cache = config.kv_cache_dtype;
        s.k_scale = c.in("k_scale").data;
        s.v_scale = c.in("v_scale").data;
        s.head_dim = config.head_dim;
    }
    return s;
}

PagedSeq gather_sequence(const torch::Tensor& q, const torch::Tensor& k_pool, const torch::Tensor& v_pool, Precision p,
                         const PagedSeqs& s, int64_t b, const Variant& v) {
    PagedSeq g;
    g.q_begin = s.qo_indptr[b];
    g.q_len = s.qo_indptr[b + 1] - g.q_begin;
    const std::vector<int64_t> rows = sequence_rows(s, b, v);
    g.kv_len = static_cast<int64_t>(rows.size());
    // Every row is inside the pool: the variants that read other pages wrap around it.
    g.q = q.narrow(0, g.q_begin, g.q_len);
    g.k = gather_rows(k_pool, rows, p, CacheRead(s.cache, s.k_scale, s.head_dim, k_pool.size(1), v));
    g.v = gather_rows(v_pool, rows, p, CacheRead(s.cache, s.v_scale, s.head_dim, v_pool.size(1), v, &s.k_scale));
    // Key i at position i; the queries are the sequence's last q_len tokens
    // (the bug: its first, top-left; the window then follows them too).
    g.k_pos = torch::arange(g.kv_len, torch::kInt64);
    g.q_pos = torch::arange(g.q_len, torch::kInt64) + (v.paged_queries_at_start ? 0 : g.kv_len - g.q_len);
    return g;
}

std::pair<torch::Tensor, torch::Tensor> paged_attention(const torch::Tensor& q, const torch::Tensor& k_pool,
                                                        const torch::Tensor& v_pool, Precision p, const PagedSeqs& s,
                                                        const BlockConfig& cfg, const torch::Tensor& sinks,
                                                        const Ctx& ctx) {
    const int64_t T = q.size(0), H = cfg.n_heads, B = static_cast<int64_t>(s.kv_last_page_len.size());
    auto out = torch::zeros({T, cfg.q_width()}, q.options());
    auto lse = torch::full({T, H}, -std::numeric_limits<double>::infinity(), q.options());
    for (int64_t b = 0; b < B; ++b) {
        const PagedSeq g = gather_sequence(q, k_pool, v_pool, p, s, b, ctx.v);
        if (g.q_len == 0 || g.kv_len == 0) continue;  // no key: out 0, lse -inf, sinks or not (fixtures/SCHEMA.md)
        torch::Tensor l;
        // The bug: each of the sequence's n pages (a split) starts from the
        // sink's state, so the merged denominator holds n·exp(sink): a sink
        // of sink + ln n.
        const int64_t pages_b = s.kv_indptr[b + 1] - s.kv_indptr[b];
        const torch::Tensor sinks_b = ctx.v.paged_sink_per_page && sinks.defined() && pages_b > 1
                                          ? sinks + std::log(static_cast<double>(pages_b))
                                          : sinks;
        // The bug: each page a split of a split-KV kernel, merged unrescaled.
        std::optional<Variant> sv;
        if (ctx.v.paged_split_unrescaled) {
            sv = ctx.v;
            sv->softmax_tile = s.page_size, sv->softmax_tile_local = true;
        }
        const Ctx split{ctx.dtype, ctx.acc_dtype, ctx.order, sv ? *sv : ctx.v, ctx.act_quant, ctx.route_taken};
        auto o = attention(g.q, g.k, g.v, g.q_pos, g.k_pos, attention_params(cfg), sinks_b, split, {}, &l);
        if (ctx.v.paged_lse_without_sink && sinks.defined())  // the bug: the lse of the keys alone
            attention(g.q, g.k, g.v, g.q_pos, g.k_pos, attention_params(cfg), torch::Tensor(), ctx, {}, &l);
        if (ctx.v.paged_first_page_empty_nan && !sinks.defined()) {
            // The rows whose first page (keys 0 .. P-1) holds no key they see, and a later page does.
            const AttentionParams ap = attention_params(cfg);
            for (int64_t j = 0; j < g.q_len; ++j) {
                const int64_t qp = g.q_pos[j].item<int64_t>();
                bool first = false, later = false;
                for (int64_t k = 0; k < g.kv_len; ++k)
                    if (k <= qp && ap.in_window(k, qp)) (k < s.page_size ? first : later) = true;
                if (first || !later) continue;
                o[j].fill_(std::numeric_limits<double>::quiet_NaN());
                l[j].fill_(std::numeric_limits<double>::quiet_NaN());
            }
        }
        out.narrow(0, g.q_begin, g.q_len).copy_(o);
        if (ctx.v.lse_base2) l = l / std::log(2.0);
        lse.narrow(0, g.q_begin, g.q_len).copy_(l);
    }
    return {out, lse};
}

}  // namespace conform::ref

// simd_impl — the ops and the engine behind the Implementation interface, and
// the prepared ops `conform bench` times.
//
// The contract speaks float32. In bf16 mode every input is stored as bf16 on
// entry (exact: the harness rounded it already) and every output widened on
// exit, so the kernels that run are the ones an engine would run.
#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "conform/dtype.h"
#include "scalar/scalar.h"  // the contract's shape checks (scalar::detail), shared by both implementations
#include "simd/engine.h"
#include "simd/ops.h"
#include "simd/simd.h"

namespace conform::simd {

namespace {

namespace chk = scalar::detail;

Elem elem_of(DType d) {
    switch (d) {
        case DType::f32: return Elem::f32;
        case DType::bf16: return Elem::bf16;
        case DType::f16: break;
    }
    throw ImplError(std::string("simd stores f32 or bf16, asked for ") + to_string(d));
}

size_t rows_of(View v) { return static_cast<size_t>(v.rows); }
size_t cols_of(View v) { return static_cast<size_t>(v.cols); }

// A float32 input in the implementation's storage: the caller's memory when
// f32, a converted copy when bf16.
class In {
   public:
    In(View v, Elem e) {
        if (e == Elem::f32) {
            rows_ = {v.data, cols_of(v), Elem::f32};
        } else {
            buf_.resize(e, rows_of(v), cols_of(v));
            store(v, buf_.m());
            rows_ = buf_.c();
        }
    }
    CRows rows() const { return rows_; }

   private:
    Buffer buf_;
    CRows rows_;
};

// A float32 output: written in place when f32, through a bf16 buffer otherwise.
class Out {
   public:
    Out(MutView v, Elem e) : dst_(v) {
        if (e == Elem::f32) {
            rows_ = {v.data, cols_of(v), Elem::f32};
        } else {
            buf_.resize(e, rows_of(v), cols_of(v));
            rows_ = buf_.m();
        }
    }
    MRows rows() const { return rows_; }
    void finish() {
        if (rows_.elem != Elem::f32) load(buf_.c(), 0, dst_);
    }

   private:
    MutView dst_;
    Buffer buf_;
    MRows rows_;
};

void check_block(const char* op, View x, Positions pos, const BlockWeights& w, const BlockConfig& c) {
    chk::expect(c.d_model > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0 && c.ffn_dim > 0, op,
                "d_model, n_heads, n_kv_heads, head_dim and ffn_dim must be positive");
    chk::expect(c.n_heads % c.n_kv_heads == 0, op,
                "n_heads = " + std::to_string(c.n_heads) + " must be a multiple of n_kv_heads = " +
                    std::to_string(c.n_kv_heads));
    chk::expect(c.head_dim % 2 == 0, op, "head_dim must be even for RoPE, found " + std::to_string(c.head_dim));
    chk::expect(c.head_dim <= static_cast<int64_t>(kMaxHeadDim), op,
                "head_dim " + std::to_string(c.head_dim) + " is over " + std::to_string(kMaxHeadDim));
    chk::expect_shape(op, "x", x, x.rows, c.d_model);
    chk::expect(x.rows > 0, op, "x has no rows");
    chk::expect_positions(op, "pos", pos, x.rows);
    chk::check_block_weights(op, w, c);
}


Attn attn_job(CRows q, CRows k, CRows v, Positions q_pos, Positions k_pos, const AttentionParams& p, MRows out) {
    Attn a;
    a.q = q;
    a.k = k;
    a.v = v;
    a.q_pos = q_pos.data;
    a.k_pos = k_pos.data;
    a.T = static_cast<size_t>(q_pos.n);
    a.S = static_cast<size_t>(k_pos.n);
    a.H = static_cast<size_t>(p.n_heads);
    a.KV = static_cast<size_t>(p.n_kv_heads);
    a.hd = static_cast<size_t>(p.head_dim);
    static_cast<AttentionVariant&>(a) = p;  // the mask, the transform, the sinks
    a.out = out;
    return a;
}

// paged_attention's job over staged rows; the index arrays are the caller's.
PagedJob paged_job(CRows q, int64_t T, CRows k, CRows v, const PagedIndex& idx, const PagedAttentionParams& p,
                   MRows out) {
    PagedJob job;
    job.q = q;
    job.k = k;
    job.v = v;
    job.qo_indptr = idx.qo_indptr.data;
    job.kv_indptr = idx.kv_indptr.data;
    job.kv_indices = idx.kv_indices.data;
    job.kv_last_page_len = idx.kv_last_page_len.data;
    job.T = static_cast<size_t>(T);
    job.B = static_cast<size_t>(idx.kv_last_page_len.n);
    job.H = static_cast<size_t>(p.n_heads);
    job.KV = static_cast<size_t>(p.n_kv_heads);
    job.hd = static_cast<size_t>(p.head_dim);
    job.P = static_cast<size_t>(p.page_size);
    static_cast<AttentionVariant&>(job) = p;  // the mask, the transform, the sinks
    job.out = out;
    return job;
}

// An FP8 KV cache (conform/config.h kv_cache_dtype): the write, as an
// engine's cache-write kernel does it — each value of the pages the batch
// lists stored as one byte, fp8(x / scale) (the division in float32, round
// to nearest even, saturating: conform/dtype.h) — and the read's tables,
// code -> value * scale per kv head, which the split kernel looks codes up in.
struct Fp8Cache {
    std::vector<uint8_t> k, v;        // [pages * P][KV hd] codes; rows of pages not listed stay 0, unread
    std::vector<float> k_lut, v_lut;  // [KV][256]

    void write(ThreadPool& pool, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
               PagedJob& job) {
        const int64_t KV = p.n_kv_heads, hd = p.head_dim, W = KV * hd, P = p.page_size;
        const KvCacheDtype d = p.kv_cache_dtype;
        k_lut = fp8_read_table(p, false);
        v_lut = fp8_read_table(p, true);
        k.assign(static_cast<size_t>(k_cache.size()), 0);
        v.assign(static_cast<size_t>(v_cache.size()), 0);
        // Each listed page once (two sequences may list one page).
        std::vector<char> listed(static_cast<size_t>(k_cache.rows / P), 0);
        std::vector<int64_t> pages;
        for (int64_t i = 0; i < idx.kv_indices.n; ++i)
            if (!listed[static_cast<size_t>(idx.kv_indices[i])]++) pages.push_back(idx.kv_indices[i]);
        pool.Run(pages.size(), [&](size_t i, int) {
            const int64_t r0 = pages[i] * P;
            for (int64_t r = r0; r < r0 + P; ++r)
                for (int64_t c = 0; c < W; ++c) {
                    const size_t e = static_cast<size_t>(r * W + c);
                    k[e] = fp8_bits(k_cache.data[e] / p.kv_scale(false, c / hd), d);
                    v[e] = fp8_bits(v_cache.data[e] / p.kv_scale(true, c / hd), d);
                }
        });
        // Bytes, not floats: the split kernel reads them as codes because k_lut is set (elem is not looked at).
        job.k = {k.data(), static_cast<size_t>(W), Elem::f32};
        job.v = {v.data(), static_cast<size_t>(W), Elem::f32};
        job.k_lut = k_lut.data();
        job.v_lut = v_lut.data();
    }
};


class SimdImpl : public Implementation {
   public:
    explicit SimdImpl(const ImplOptions& o)
        : dtype_(o.dtype), elem_(elem_of(o.dtype)), target_(resolve_target(o.simd_target)), pool_(o.threads) {}

    std::string name() const override { return "simd"; }
    DType dtype() const override { return dtype_; }

    // Splits of whole pages from a sequence's own first key, merged in split
    // order: neither the batch, the pages' places nor the threads change a row.
    // (mla_attention is paged_attention's schedule over the latent cache.)
    bool batch_invariant(Op op) const override { return op == Op::paged_attention || op == Op::mla_attention; }


    // Every twist, but in bf16 decode's FP8 cache: the engine's cache buffer
    // is bf16, so each dequantized value (code * scale) is rounded to bf16
    // once more before attention reads it, which an engine's FP8 read (codes
    // into float32 registers) does not do; with large logits (qk_gain 16)
    // that rounding moves the output past the bound (found by a fresh seed:
    // decode(T=317,...,qk_gain=16,...,kv_dtype=fp8_e5m2,...,seed=25104198)).
    // Not claimed until the cache keeps its values in float32.
    TwistSet twists(Op op) const override {
        TwistSet s = TwistSet::all();
        if (op == Op::decode && elem_ != Elem::f32)
            if (const Twist* t = find_twist("kv_cache_dtype")) s.allowed[twist_index(*t)] = 1u;  // none only
        return s;
    }

    Support supports(Op op, const BlockConfig& c) const override {
        if (Support s = chk::config_support(op, c); !s.ok) return s;
        if ((op == Op::block || op == Op::decode) && c.head_dim > static_cast<int64_t>(kMaxHeadDim))
            return Support::no("the fused QK-norm + RoPE holds a head on the stack: head_dim <= " +
                               std::to_string(kMaxHeadDim) + ", found " + std::to_string(c.head_dim));
        return Support::yes();
    }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override {
        const int64_t T = x.rows, D = x.cols;
        chk::expect(D > 0, "rmsnorm", "x must have at least one column, found " + chk::shape_str(T, D));
        chk::expect_shape("rmsnorm", "w", w, 1, D);
        chk::expect_shape("rmsnorm", "out", out, T, D);
        In xi(x, elem_);
        Out o(out, elem_);
        const auto wv = norm_vector(w, elem_, p.plus_one);
        simd::rmsnorm(pool_, target_, xi.rows(), rows_of(x), cols_of(x), wv.data(), static_cast<float>(p.eps),
                      o.rows());
        o.finish();
    }

    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        const int64_t hd = p.head_dim;
        chk::expect(hd > 0 && hd % 2 == 0, "rope", "head_dim must be positive and even, found " + std::to_string(hd));
        chk::expect(x.cols % hd == 0, "rope",
                    "x " + chk::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " +
                        std::to_string(hd) + " columns");
        chk::expect(p.rotary() > 0 && p.rotary() % 2 == 0 && p.rotary() <= hd, "rope",
                    "rotary_dim must be even and in (0, head_dim = " + std::to_string(hd) + "], found " +
                        std::to_string(p.rotary()));
        chk::expect_positions("rope", "pos", pos, x.rows);
        chk::expect_shape("rope", "out", out, x.rows, x.cols);
        In xi(x, elem_);
        Out o(out, elem_);
        simd::rope(pool_, target_, rope_table_, xi.rows(), rows_of(x), static_cast<size_t>(x.cols / hd), pos.data,
                   p, o.rows());
        o.finish();
    }

    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override {
        const int64_t hd = p.head_dim;
        chk::expect(hd > 0, "qk_norm", "head_dim must be positive, found " + std::to_string(hd));
        chk::expect(x.cols % hd == 0, "qk_norm",
                    "x " + chk::shape_str(x.rows, x.cols) + " must have a multiple of head_dim = " +
                        std::to_string(hd) + " columns");
        chk::expect_shape("qk_norm", "w", w, 1, hd);
        chk::expect_shape("qk_norm", "out", out, x.rows, x.cols);
        In xi(x, elem_);
        Out o(out, elem_);
        const auto wv = norm_vector(w, elem_, p.plus_one);
        simd::qk_norm(pool_, target_, xi.rows(), rows_of(x), static_cast<size_t>(x.cols / hd),
                      static_cast<size_t>(hd), wv.data(), static_cast<float>(p.eps), o.rows());
        o.finish();
    }

    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim;
        chk::expect(H > 0 && KV > 0 && hd > 0, "attention", "n_heads, n_kv_heads and head_dim must be positive");
        chk::expect(H % KV == 0, "attention",
                    "n_heads = " + std::to_string(H) + " must be a multiple of n_kv_heads = " + std::to_string(KV));
        chk::expect_shape("attention", "q", q, q.rows, H * hd);
        chk::expect_shape("attention", "k", k, k.rows, KV * hd);
        chk::expect_shape("attention", "v", v, k.rows, KV * hd);
        chk::expect_positions("attention", "q_pos", q_pos, q.rows);
        chk::expect_positions("attention", "k_pos", k_pos, k.rows);
        chk::expect_shape("attention", "out", out, q.rows, H * hd);
        In qi(q, elem_), ki(k, elem_), vi(v, elem_);
        Out o(out, elem_);
        simd::attention(pool_, target_, attn_job(qi.rows(), ki.rows(), vi.rows(), q_pos, k_pos, p, o.rows()));
        o.finish();
    }

    // The absorbed form over the latent cache (mla_attention.cpp), float32
    // between its steps; out and lse stored in the dtype.
    void mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx, const MlaParams& p,
                       MutView out, MutView lse) override {
        const int64_t H = p.n_heads, dc = p.kv_lora_rank, dn = p.qk_nope_head_dim, dr = p.qk_rope_head_dim;
        const int64_t dv = p.v_head_dim, P = p.page_size, B = idx.kv_last_page_len.n;
        chk::expect(H > 0 && dc > 0 && dn > 0 && dr > 0 && dv > 0 && P > 0, "mla_attention",
                    "n_heads, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim and page_size must be positive");
        chk::expect_positions("mla_attention", "qo_indptr", idx.qo_indptr, B + 1);
        chk::expect_positions("mla_attention", "kv_indptr", idx.kv_indptr, B + 1);
        chk::expect_shape("mla_attention", "q", q, q.rows, H * (dn + dr));
        chk::expect_shape("mla_attention", "ckv_cache", ckv_cache, ckv_cache.rows, dc);
        chk::expect_shape("mla_attention", "kpe_cache", kpe_cache, ckv_cache.rows, dr);
        chk::expect_shape("mla_attention", "w_kv_b", w_kv_b, dc, H * (dn + dv));
        chk::expect_shape("mla_attention", "out", out, q.rows, H * dv);
        chk::expect_shape("mla_attention", "lse", lse, q.rows, H);
        MlaJob j;
        j.q = q.data;
        // Kept as an engine serves them, in the dtype: bf16 latents and
        // kv_b_proj are the same values at half the bytes (the bench times this).
        const In w(w_kv_b, elem_);
        j.w_kv_b = w.rows();
        j.T = static_cast<size_t>(q.rows);
        j.H = static_cast<size_t>(H);
        j.dc = static_cast<size_t>(dc), j.dn = static_cast<size_t>(dn), j.dr = static_cast<size_t>(dr);
        j.dv = static_cast<size_t>(dv), j.da = j.dc + j.dr;
        j.scale = p.score_scale();
        j.out = out.data;
        PagedAttentionParams shape;
        shape.n_heads = H, shape.n_kv_heads = 1, shape.head_dim = dc + dr, shape.page_size = P;
        Buffer latents;
        simd::mla_latents(pool_, ckv_cache.data, kpe_cache.data, static_cast<size_t>(ckv_cache.rows), j.dc, j.dr, elem_,
                          latents);
        simd::mla_attention(pool_, target_, j, latents.c(), paged_job({}, q.rows, {}, {}, idx, shape, {}), lse.data);
        if (elem_ == Elem::bf16)  // stored in the dtype
            for (MutView v : {out, lse})
                for (int64_t i = 0; i < v.size(); ++i) v.data[i] = to_f32(to_bf16(v.data[i]));
    }

    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim, P = p.page_size, B = idx.kv_last_page_len.n;
        chk::expect(H > 0 && KV > 0 && hd > 0 && P > 0 && H % KV == 0, "paged_attention",
                    "n_heads, n_kv_heads, head_dim and page_size must be positive, n_heads a multiple of n_kv_heads");
        chk::expect_positions("paged_attention", "qo_indptr", idx.qo_indptr, B + 1);
        chk::expect_positions("paged_attention", "kv_indptr", idx.kv_indptr, B + 1);
        chk::expect_shape("paged_attention", "q", q, q.rows, H * hd);
        chk::expect_shape("paged_attention", "k_cache", k_cache, k_cache.rows, KV * hd);
        chk::expect_shape("paged_attention", "v_cache", v_cache, k_cache.rows, KV * hd);
        chk::expect_shape("paged_attention", "out", out, q.rows, H * hd);
        chk::expect_shape("paged_attention", "lse", lse, q.rows, H);
        const bool fp8 = p.kv_cache_dtype != KvCacheDtype::none;
        if (fp8)
            chk::expect(p.k_scale && p.v_scale && (p.n_kv_scales == 1 || p.n_kv_scales == KV), "paged_attention",
                        "an FP8 cache needs k_scale and v_scale, 1 or n_kv_heads of each");
        // An FP8 cache holds codes, not values: the pool goes in as codes, never staged in the dtype.
        In qi(q, elem_), ki(fp8 ? View{} : k_cache, elem_), vi(fp8 ? View{} : v_cache, elem_);
        Out o(out, elem_);
        PagedJob job = paged_job(qi.rows(), q.rows, ki.rows(), vi.rows(), idx, p, o.rows());
        Fp8Cache cache;
        if (fp8) cache.write(pool_, k_cache, v_cache, idx, p, job);
        simd::paged_attention(pool_, target_, job, lse.data);
        o.finish();
        if (elem_ == Elem::bf16)  // stored in the dtype, as out is
            for (int64_t i = 0; i < lse.size(); ++i) lse.data[i] = to_f32(to_bf16(lse.data[i]));
    }

    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override {
        const int64_t T = x.rows, D = x.cols, F = w1.cols;
        chk::expect_shape("swiglu", "w1", w1, D, F);
        chk::expect_shape("swiglu", "w3", w3, D, F);
        chk::expect_shape("swiglu", "w2", w2, F, D);
        chk::expect_shape("swiglu", "out", out, T, D);
        const PackedWeight w13 = pack_gate_up(pool_, elem_, w1, w3);
        const PackedWeight w2p = pack_columns(pool_, elem_, {w2});
        In xi(x, elem_);
        Out o(out, elem_);
        Buffer gated;
        GemmScratch scratch;
        simd::swiglu(pool_, target_, xi.rows(), rows_of(x), w13, w2p, p.act, o.rows(), gated, scratch);
        o.finish();
    }

    void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route) override {
        chk::expect_shape("moe_route", "x", x, x.rows, c.d_model);
        chk::expect_shape("moe_route", "route", route, x.rows, c.n_experts);
        scalar::check_moe_weights("moe_route", w, c, true, false);
        MoeWeights router;  // only the router packed: no expert is read here
        router.w_router = w.w_router;
        simd::moe_route(pool_, target_, x, pack_moe(pool_, router, c, nullptr, elem_), w, c, route);
    }

    void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) override {
        chk::expect_shape("moe_experts", "x", x, x.rows, c.d_model);
        chk::expect_shape("moe_experts", "route", route, x.rows, c.n_experts);
        chk::expect_shape("moe_experts", "out", out, x.rows, c.d_model);
        scalar::check_moe_weights("moe_experts", w, c, false, true);
        MoeWeights experts = w;
        experts.w_router = View{};  // the router is not this op's
        simd::moe_experts(pool_, target_, x, route, pack_moe(pool_, experts, c, &route, elem_), w, c, out);
    }

    void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) override {
        moe_route(x, w, c, route);
        moe_experts(x, View{route.data, route.rows, route.cols}, w, c, out);
    }

    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        check_block("block", x, pos, w, c);
        chk::expect_shape("block", "out", out[Tap::out], x.rows, c.d_model);
        const size_t T = rows_of(x), Q = static_cast<size_t>(c.q_width()), KVW = static_cast<size_t>(c.kv_width());
        for (Tap t : kAllTaps)
            if (out[t].data) chk::expect_shape("block", to_string(t), out[t], x.rows, tap_cols(t, c));
        const EngineWeights ew = prepare_weights(pool_, w, c, elem_);
        KvCache cache;
        cache.reset(elem_, T, KVW);
        RunState s;
        In xi(x, elem_);
        EngineContext ctx{pool_, target_, rope_table_};
        forward(ctx, ew, xi.rows(), pos.data, T, cache, s);

        TapSet written;
        auto put = [&](Tap t, CRows src, size_t col0) {
            if (!out[t].data) return;
            load(src, col0, out[t]);
            written.add(t);
        };
        put(Tap::attn_in, s.attn_in.c(), 0);
        put(Tap::q, s.qkv.c(), 0);
        put(Tap::k, s.qkv.c(), Q);
        put(Tap::v, s.qkv.c(), Q + KVW);
        put(Tap::q_rot, s.q_rot.c(), 0);
        put(Tap::k_rot, cache.k.c(), 0);  // the cache started empty: its rows are these tokens'
        put(Tap::attn, s.attn.c(), 0);
        put(Tap::h, s.h.c(), 0);
        put(Tap::ffn_in, s.ffn_in.c(), 0);
        put(Tap::ffn_out, s.ffn_out.c(), 0);
        put(Tap::out, s.out.c(), 0);
        return written;
    }

    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        check_block("decode", x, pos, w, c);
        chk::expect_shape("decode", "out", out, x.rows, c.d_model);
        chk::expect(prefill >= 0 && prefill <= x.rows, "decode",
                    "prefill must be in [0, " + std::to_string(x.rows) + "], found " + std::to_string(prefill));
        const EngineWeights ew = prepare_weights(pool_, w, c, elem_);
        In xi(x, elem_);
        EngineContext ctx{pool_, target_, rope_table_, rope_seq_len(pos.data, rows_of(x))};
        simd::decode(ctx, ew, xi.rows(), pos.data, rows_of(x), static_cast<size_t>(prefill), out);
    }

   private:
    DType dtype_;
    Elem elem_;
    Target target_;
    ThreadPool pool_;
    RopeTable rope_table_;  // kept across calls, as an engine keeps its table
};

// ---- bench ops -------------------------------------------------------------------

Buffer staged(View v, Elem e) {
    Buffer b(e, rows_of(v), cols_of(v));
    store(v, b.m());
    return b;
}

std::vector<float> widened(const Buffer& b, size_t rows, size_t cols) {
    std::vector<float> out(rows * cols);
    load(b.c(), 0, MutView{out.data(), static_cast<int64_t>(rows), static_cast<int64_t>(cols)});
    return out;
}

class BenchBase : public BenchOp {
   public:
    explicit BenchBase(const ImplOptions& o)
        : elem_(elem_of(o.dtype)), target_(resolve_target(o.simd_target)), pool_(o.threads) {}
    std::string where() const override { return target_name(target_.bit); }

   protected:
    Elem elem_;
    Target target_;
    ThreadPool pool_;
};

class RmsNormBench : public BenchBase {
   public:
    RmsNormBench(const ImplOptions& o, const BenchInputs& in, bool per_head)
        : BenchBase(o), per_head_(per_head), T_(rows_of(in.x)), D_(cols_of(in.x)) {
        x_ = staged(in.x, elem_);
        out_.resize(elem_, T_, D_);
        w_ = norm_vector(in.weight, elem_, in.config.norm_plus_one);
        eps_ = static_cast<float>(in.config.norm_eps);
        hd_ = static_cast<size_t>(in.config.head_dim);
    }
    void run() override {
        if (per_head_)
            simd::qk_norm(pool_, target_, x_.c(), T_, D_ / hd_, hd_, w_.data(), eps_, out_.m());
        else
            simd::rmsnorm(pool_, target_, x_.c(), T_, D_, w_.data(), eps_, out_.m());
    }
    std::vector<float> output() const override { return widened(out_, T_, D_); }

   private:
    bool per_head_;
    size_t T_, D_, hd_ = 0;
    float eps_ = 0;
    Buffer x_, out_;
    std::vector<float> w_;
};

class RopeBench : public BenchBase {
   public:
    RopeBench(const ImplOptions& o, const BenchInputs& in)
        : BenchBase(o), T_(rows_of(in.x)), W_(cols_of(in.x)), p_(rope_params(in.config)) {
        x_ = staged(in.x, elem_);
        out_.resize(elem_, T_, W_);
        pos_.assign(in.pos.data, in.pos.data + in.pos.n);
    }
    void run() override {
        simd::rope(pool_, target_, table_, x_.c(), T_, W_ / static_cast<size_t>(p_.head_dim), pos_.data(), p_,
                   out_.m());
    }
    std::vector<float> output() const override { return widened(out_, T_, W_); }

   private:
    size_t T_, W_;
    RopeParams p_;
    Buffer x_, out_;
    std::vector<int64_t> pos_;
    RopeTable table_;
};

class AttentionBench : public BenchBase {
   public:
    AttentionBench(const ImplOptions& o, const BenchInputs& in) : BenchBase(o) {
        q_ = staged(in.q, elem_);
        k_ = staged(in.k, elem_);
        v_ = staged(in.v, elem_);
        out_.resize(elem_, rows_of(in.q), cols_of(in.q));
        q_pos_.assign(in.q_pos.data, in.q_pos.data + in.q_pos.n);
        k_pos_.assign(in.k_pos.data, in.k_pos.data + in.k_pos.n);
        job_ = attn_job(q_.c(), k_.c(), v_.c(), Positions{q_pos_.data(), in.q_pos.n},
                        Positions{k_pos_.data(), in.k_pos.n}, attention_params(in.config), out_.m());
    }
    void run() override { simd::attention(pool_, target_, job_); }
    std::vector<float> output() const override { return widened(out_, out_.rows(), out_.cols()); }

   private:
    Buffer q_, k_, v_, out_;
    std::vector<int64_t> q_pos_, k_pos_;
    Attn job_;
};

// A decode batch over a paged cache: the cache staged in the storage dtype
// once, as an engine keeps it; each run is the kernel alone.
class PagedBench : public BenchBase {
   public:
    PagedBench(const ImplOptions& o, const BenchInputs& in) : BenchBase(o) {
        q_ = staged(in.q, elem_);
        k_ = staged(in.k, elem_);
        v_ = staged(in.v, elem_);
        out_.resize(elem_, rows_of(in.q), cols_of(in.q));
        lse_.assign(static_cast<size_t>(in.q.rows * in.config.n_heads), 0.0f);
        for (const Positions* a : {&in.paged.qo_indptr, &in.paged.kv_indptr, &in.paged.kv_indices, &in.paged.kv_last_page_len})
            idx_.emplace_back(a->data, a->data + a->n);
        const PagedIndex idx{{idx_[0].data(), in.paged.qo_indptr.n}, {idx_[1].data(), in.paged.kv_indptr.n},
                             {idx_[2].data(), in.paged.kv_indices.n}, {idx_[3].data(), in.paged.kv_last_page_len.n}};
        job_ = paged_job(q_.c(), in.q.rows, k_.c(), v_.c(), idx, paged_attention_params(in.config), out_.m());
    }
    void run() override { simd::paged_attention(pool_, target_, job_, lse_.data()); }
    std::vector<float> output() const override { return widened(out_, out_.rows(), out_.cols()); }

   private:
    Buffer q_, k_, v_, out_;
    std::vector<float> lse_;
    std::vector<std::vector<int64_t>> idx_;
    PagedJob job_;
};

// A decode batch over a latent cache: the cache and kv_b_proj staged once
// as an engine keeps them ([c_kv | k_pe] rows, in the dtype), each run the
// kernel alone.
class MlaBench : public BenchBase {
   public:
    MlaBench(const ImplOptions& o, const BenchInputs& in)
        : BenchBase(o), q_(in.q.data, in.q.data + in.q.size()), w_(staged(in.w_kv_b, elem_)) {
        const BlockConfig& c = in.config;
        simd::mla_latents(pool_, in.k.data, in.v.data, static_cast<size_t>(in.k.rows),
                          static_cast<size_t>(c.kv_lora_rank), static_cast<size_t>(c.qk_rope_head_dim), elem_, latents_);
        for (const Positions* a : {&in.paged.qo_indptr, &in.paged.kv_indptr, &in.paged.kv_indices, &in.paged.kv_last_page_len})
            idx_.emplace_back(a->data, a->data + a->n);
        const PagedIndex idx{{idx_[0].data(), in.paged.qo_indptr.n}, {idx_[1].data(), in.paged.kv_indptr.n},
                             {idx_[2].data(), in.paged.kv_indices.n}, {idx_[3].data(), in.paged.kv_last_page_len.n}};
        PagedAttentionParams shape;
        shape.n_heads = c.n_heads, shape.n_kv_heads = 1, shape.head_dim = c.kv_lora_rank + c.qk_rope_head_dim;
        shape.page_size = c.page_size;
        shape_ = paged_job({}, in.q.rows, {}, {}, idx, shape, {});
        job_.q = q_.data();
        job_.w_kv_b = w_.c();
        job_.T = static_cast<size_t>(in.q.rows), job_.H = static_cast<size_t>(c.n_heads);
        job_.dc = static_cast<size_t>(c.kv_lora_rank), job_.dn = static_cast<size_t>(c.qk_nope_head_dim);
        job_.dr = static_cast<size_t>(c.qk_rope_head_dim), job_.dv = static_cast<size_t>(c.v_head_dim);
        job_.da = job_.dc + job_.dr;
        job_.scale = mla_params(c).score_scale();
        out_.assign(job_.T * job_.H * job_.dv, 0.0f);
        lse_.assign(job_.T * job_.H, 0.0f);
        job_.out = out_.data();
    }
    void run() override { simd::mla_attention(pool_, target_, job_, latents_.c(), shape_, lse_.data()); }
    std::vector<float> output() const override { return out_; }

   private:
    std::vector<float> q_;
    Buffer w_, latents_;
    std::vector<float> out_, lse_;
    std::vector<std::vector<int64_t>> idx_;
    PagedJob shape_;
    MlaJob job_;
};

class SwigluBench : public BenchBase {
   public:
    SwigluBench(const ImplOptions& o, const BenchInputs& in)
        : BenchBase(o), T_(rows_of(in.x)), D_(cols_of(in.x)), act_(in.config.hidden_act) {
        x_ = staged(in.x, elem_);
        out_.resize(elem_, T_, D_);
        w13_ = pack_gate_up(pool_, elem_, in.w1, in.w3);
        w2_ = pack_columns(pool_, elem_, {in.w2});
    }
    void run() override { simd::swiglu(pool_, target_, x_.c(), T_, w13_, w2_, act_, out_.m(), gated_, scratch_); }
    std::vector<float> output() const override { return widened(out_, T_, D_); }

   private:
    size_t T_, D_;
    HiddenAct act_;
    Buffer x_, out_, gated_;
    PackedWeight w13_, w2_;
    GemmScratch scratch_;
};

// moe: the router and the experts, the weights packed once; what the
// kernels read at run time besides them (x, the biases) copied, as the
// inputs' views do not outlive the constructor.
class MoeBench : public BenchBase {
   public:
    MoeBench(const ImplOptions& o, const BenchInputs& in)
        : BenchBase(o), c_(in.config), T_(in.x.rows), packed_(pack_moe(pool_, in.moe, in.config, nullptr, elem_)) {
        x_ = own(in.x, 0);
        w_.router_bias = own(in.moe.router_bias, 1);
        w_.e_bias = own(in.moe.e_bias, 2);
        w_.b13 = own(in.moe.b13, 3);
        w_.b2 = own(in.moe.b2, 4);
        w_.ws_gate = own(in.moe.ws_gate, 5);
        route_.resize(static_cast<size_t>(T_ * c_.n_experts));
        out_.resize(static_cast<size_t>(T_ * c_.d_model));
    }
    void run() override {
        simd::moe_route(pool_, target_, x_, packed_, w_, c_, MutView{route_.data(), T_, c_.n_experts});
        simd::moe_experts(pool_, target_, x_, View{route_.data(), T_, c_.n_experts}, packed_, w_, c_,
                          MutView{out_.data(), T_, c_.d_model});
    }
    std::vector<float> output() const override { return out_; }

   private:
    View own(View v, size_t slot) {
        copies_[slot].assign(v.data, v.data + (v.data ? v.size() : 0));
        return v.data ? View{copies_[slot].data(), v.rows, v.cols} : View{};
    }
    BlockConfig c_;
    int64_t T_;
    MoePacked packed_;
    std::vector<float> copies_[6];
    View x_;
    MoeWeights w_;
    std::vector<float> route_, out_;
};

// block: one forward over T tokens from an empty cache. decode: one token
// after `context` tokens already in the cache (the cache is rolled back after
// each run, so every run is the same step).
class BlockBench : public BenchBase {
   public:
    BlockBench(const ImplOptions& o, const BenchInputs& in) : BenchBase(o), c_(in.config) {
        w_ = prepare_weights(pool_, in.weights, c_, elem_);
        x_ = staged(in.x, elem_);
        pos_.assign(in.pos.data, in.pos.data + in.pos.n);
        const size_t ctx_n = in.context_x.data ? rows_of(in.context_x) : 0;
        cache_.reset(elem_, ctx_n + rows_of(in.x), static_cast<size_t>(c_.kv_width()));
        if (ctx_n > 0) {
            const Buffer cx = staged(in.context_x, elem_);
            EngineContext ctx{pool_, target_, rope_};
            forward(ctx, w_, cx.c(), in.context_pos.data, ctx_n, cache_, s_);
        }
        context_ = cache_.len;
    }
    void run() override {
        cache_.len = context_;
        EngineContext ctx{pool_, target_, rope_};
        forward(ctx, w_, x_.c(), pos_.data(), pos_.size(), cache_, s_);
    }
    std::vector<float> output() const override {
        return widened(s_.out, pos_.size(), static_cast<size_t>(c_.d_model));
    }

   private:
    BlockConfig c_;
    EngineWeights w_;
    Buffer x_;
    std::vector<int64_t> pos_;
    KvCache cache_;
    size_t context_ = 0;
    RunState s_;
    RopeTable rope_;
};

}  // namespace

std::unique_ptr<Implementation> make_simd(const ImplOptions& options) { return std::make_unique<SimdImpl>(options); }

std::string simd_details() {
    return describe_targets() + "; storage f32 or bf16 (--dtype), " +
           std::to_string(std::max(1u, std::thread::hardware_concurrency())) + " threads by default";
}

std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& o, const BenchInputs& in) {
    switch (in.op) {
        case Op::rmsnorm: return std::make_unique<RmsNormBench>(o, in, false);
        case Op::qk_norm: return std::make_unique<RmsNormBench>(o, in, true);
        case Op::rope: return std::make_unique<RopeBench>(o, in);
        case Op::attention: return std::make_unique<AttentionBench>(o, in);
        case Op::swiglu: return std::make_unique<SwigluBench>(o, in);
        case Op::block:
        case Op::decode: return std::make_unique<BlockBench>(o, in);
        case Op::paged_attention: return std::make_unique<PagedBench>(o, in);
        case Op::moe: return std::make_unique<MoeBench>(o, in);
        case Op::moe_route:
        case Op::moe_experts: break;  // timed whole, as moe
        case Op::mla_attention: return std::make_unique<MlaBench>(o, in);
    }
    throw ImplError("simd bench: unknown op");
}

}  // namespace conform::simd

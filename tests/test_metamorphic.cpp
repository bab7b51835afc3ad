// Metamorphic properties: relations between runs that must hold whatever the
// exact values, each one a trap a wrong implementation falls into.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <rapidcheck/catch.h>

#include "gen/gen.h"
#include "helpers.h"
#include "scalar/scalar.h"

using namespace conform;

namespace {

Tensor run_attention(Implementation& impl, const Tensor& q, const Tensor& k, const Tensor& v,
                     const std::vector<int64_t>& qp, const std::vector<int64_t>& kp, AttentionParams p) {
    Tensor out(q.rows(), q.cols());
    impl.attention(q.view(), k.view(), v.view(), {qp.data(), (int64_t)qp.size()}, {kp.data(), (int64_t)kp.size()}, p,
                   out.mut());
    return out;
}

Tensor run_rope(const Tensor& x, const std::vector<int64_t>& pos, RopeParams p) {
    Tensor out(x.rows(), x.cols());
    scalar::rope(x.view(), {pos.data(), (int64_t)pos.size()}, p, out.mut());
    return out;
}

Tensor matmul(const Tensor& a, const Tensor& w) {
    Tensor out(a.rows(), w.cols());
    scalar::matmul(a.view(), w.view(), out.mut());
    return out;
}

// kv heads repeated to n_heads the way repeat_kv does it: head h gets kv head h / group.
Tensor repeat_kv(const Tensor& t, int64_t kv, int64_t group, int64_t hd) {
    Tensor out(t.rows(), kv * group * hd);
    for (int64_t s = 0; s < t.rows(); ++s)
        for (int64_t h = 0; h < kv * group; ++h)
            for (int64_t d = 0; d < hd; ++d) out.data[s * out.cols() + h * hd + d] = t.data[s * t.cols() + (h / group) * hd + d];
    return out;
}

}  // namespace

TEST_CASE("GQA equals multi-head attention over repeated kv heads", "[attention][scalar][metamorphic]") {
    auto impl = test::make("scalar");
    rc::prop("gqa == mha(repeat_interleave(k, v))", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::attention);
        const Case c = gen::materialize(s);
        const int64_t H = s.config.n_heads, KV = s.config.n_kv_heads, hd = s.config.head_dim;
        const Tensor gqa = run_attention(*impl, c.in("q"), c.in("k"), c.in("v"), c.pos("q_positions"),
                                         c.pos("k_positions"), {H, KV, hd});
        const Tensor mha = run_attention(*impl, c.in("q"), repeat_kv(c.in("k"), KV, H / KV, hd),
                                         repeat_kv(c.in("v"), KV, H / KV, hd), c.pos("q_positions"),
                                         c.pos("k_positions"), {H, H, hd});
        RC_ASSERT(std::memcmp(gqa.data.data(), mha.data.data(), gqa.data.size() * 4) == 0);
    });
}

TEST_CASE("reference GQA with n_kv = n_heads is multi-head attention", "[attention][reference][metamorphic]") {
    // The reference's repeat_interleave path against the scalar MHA loop, KV = H.
    auto impl = test::make("scalar");
    rc::prop("reference mha == scalar mha", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::attention);
        s.config.n_kv_heads = s.config.n_heads;
        const Case c = gen::materialize(s);
        const CaseResult r = test::check(*impl, c);
        RC_LOG() << test::explain(r);
        RC_ASSERT(r.pass);
    });
}

TEST_CASE("interleaved RoPE on x@W scores like NeoX on x@permute(W)", "[rope][scalar][metamorphic]") {
    rc::prop("HF converter permute", [] {
        const int64_t n = *rc::gen::inRange<int64_t>(1, 4), hd = 2 * *rc::gen::inRange<int64_t>(2, 17);
        const int64_t D = *rc::gen::inRange<int64_t>(1, 33), T = *rc::gen::inRange<int64_t>(1, 9);
        const int64_t pos0 = *rc::gen::inRange<int64_t>(0, 100000);
        gen::CaseSpec s;
        s.op = Op::swiglu;  // borrow its x and w1 draws: x[T, D], w[D, n*hd]
        s.T = T;
        s.config.d_model = D;
        s.config.ffn_dim = n * hd;
        s.seed = *rc::gen::inRange<uint64_t>(0, 1000);
        const Case c = gen::materialize(s);
        const Tensor& x = c.in("x");
        const Tensor& W = c.in("w1");
        // Meta -> HF: w.view(n, hd/2, 2, in).transpose(1, 2).reshape(out, in), on [out, in] storage;
        // with [in, out] storage it moves column h*hd + 2i + p to h*hd + p*hd/2 + i.
        Tensor Wp(D, n * hd);
        for (int64_t r = 0; r < D; ++r)
            for (int64_t h = 0; h < n; ++h)
                for (int64_t i = 0; i < hd / 2; ++i)
                    for (int64_t p = 0; p < 2; ++p)
                        Wp.data[r * n * hd + h * hd + p * hd / 2 + i] = W.data[r * n * hd + h * hd + 2 * i + p];
        std::vector<int64_t> pos(T);
        for (int64_t t = 0; t < T; ++t) pos[t] = pos0 + t;
        const Tensor a = run_rope(matmul(x, W), pos, {hd, RopeLayout::interleaved, 500000.0});
        const Tensor b = run_rope(matmul(x, Wp), pos, {hd, RopeLayout::neox, 500000.0});
        // Same pairs, same angles: b is a per-head permutation of a, so every q.k score agrees.
        for (int64_t t = 0; t < T; ++t)
            for (int64_t u = 0; u < T; ++u)
                for (int64_t h = 0; h < n; ++h) {
                    double sa = 0, sb = 0, mag = 0;
                    for (int64_t d = 0; d < hd; ++d) {
                        const int64_t o = h * hd + d;
                        sa += (double)a.data[t * n * hd + o] * a.data[u * n * hd + o];
                        sb += (double)b.data[t * n * hd + o] * b.data[u * n * hd + o];
                        mag += std::abs((double)a.data[t * n * hd + o] * a.data[u * n * hd + o]);
                    }
                    RC_ASSERT(std::abs(sa - sb) <= 1e-12 * std::max(1.0, mag));
                }
    });
}

TEST_CASE("RoPE preserves pair norms (x yarn's factor), passes non-rotary dims through, is the identity at position 0", "[rope][scalar][metamorphic]") {
    rc::prop("rotation", [] {
        gen::CaseSpec s = *gen::spec_gen(Op::rope);
        const Case c = gen::materialize(s);
        const Tensor& x = c.in("x");
        const RopeParams p = rope_params(c.config);  // every generated field: scaling and rotary dims too
        const Tensor y = run_rope(x, c.pos("positions"), p);
        const int64_t hd = s.config.head_dim, rd = p.rotary(), half = rd / 2;
        const double af = p.scaling.attention_factor;  // yarn scales cos and sin; 1 for every other type
        for (int64_t t = 0; t < x.rows(); ++t)
            for (int64_t h = 0; h < s.config.n_heads; ++h)
                for (int64_t i = 0; i < half; ++i) {  // pairs inside the rotary dims
                    const int64_t a = h * hd + (s.config.rope_layout == RopeLayout::neox ? i : 2 * i);
                    const int64_t b = h * hd + (s.config.rope_layout == RopeLayout::neox ? i + half : 2 * i + 1);
                    const double nx = std::hypot((double)x.data[t * x.cols() + a], (double)x.data[t * x.cols() + b]);
                    const double ny = std::hypot((double)y.data[t * x.cols() + a], (double)y.data[t * x.cols() + b]);
                    RC_ASSERT(std::abs(af * nx - ny) <= 4e-7 * af * nx + 1e-30);
                }
        // Dims past the rotary ones pass through unchanged.
        for (int64_t t = 0; t < x.rows(); ++t)
            for (int64_t h = 0; h < s.config.n_heads; ++h)
                for (int64_t d = rd; d < hd; ++d)
                    RC_ASSERT(y.data[t * x.cols() + h * hd + d] == x.data[t * x.cols() + h * hd + d]);
        // At position 0: the identity (times yarn's attention factor on the rotary dims).
        std::vector<int64_t> zero(x.rows(), 0);
        const Tensor y0 = run_rope(x, zero, p);
        if (af == 1.0) {
            RC_ASSERT(std::memcmp(y0.data.data(), x.data.data(), x.data.size() * 4) == 0);
        } else {
            for (int64_t i = 0; i < x.numel(); ++i) {
                const bool rotary = i % hd < rd;
                const double want = rotary ? af * x.data[i] : x.data[i];
                RC_ASSERT(std::abs(y0.data[i] - want) <= 0x1p-23 * std::abs(want));
            }
        }
    });
}

TEST_CASE("QK-norm with unit weights still changes the block's output", "[block][reference][metamorphic]") {
    gen::CaseSpec s;
    s.op = Op::block;
    s.T = 6;
    s.config.d_model = 32;
    s.config.n_heads = 4;
    s.config.n_kv_heads = 2;
    s.config.head_dim = 8;
    s.config.ffn_dim = 48;
    s.config.qk_norm = true;
    s.pos = 100;
    s.seed = 3;
    Case with = gen::materialize(s);
    for (auto* w : {&with.inputs["q_norm"], &with.inputs["k_norm"]}) std::fill(w->data.begin(), w->data.end(), 1.0f);
    Case without = with;
    without.config.qk_norm = false;
    without.inputs.erase("q_norm");
    without.inputs.erase("k_norm");
    const NamedD a = ref::run(with), b = ref::run(without);
    double diff = 0;
    for (size_t i = 0; i < a.at("out").data.size(); ++i) diff = std::max(diff, std::abs(a.at("out").data[i] - b.at("out").data[i]));
    REQUIRE(diff > 1e-3);
    // And the scalar implementation agrees with the reference on the unit-weight case.
    auto impl = test::make("scalar");
    const CaseResult r = test::check(*impl, with);
    INFO(test::explain(r));
    REQUIRE(r.pass);
}

TEST_CASE("decode equals block", "[decode][scalar][metamorphic]") {
    auto impl = test::make("scalar");
    rc::prop("decode(prefill P) == block", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::decode);
        const Case c = gen::materialize(s);
        Case as_block = c;
        as_block.op = Op::block;
        const ImplOutputs d = run_impl(*impl, c), b = run_impl(*impl, as_block);
        RC_ASSERT(d.error.empty());
        RC_ASSERT(b.error.empty());
        // Same arithmetic in the same order (impls/scalar/block.cpp promises it): bit for bit.
        const auto& x = d.outputs.at("out").data;
        const auto& y = b.outputs.at("out").data;
        RC_ASSERT(x.size() == y.size());
        for (size_t i = 0; i < x.size(); ++i) {
            RC_LOG() << "element " << i << ": decode " << x[i] << " block " << y[i];
            RC_ASSERT(x[i] == y[i]);
        }
    });
}

TEST_CASE("fused QKV is bitwise identical to three separate products", "[block][scalar][metamorphic]") {
    auto impl = test::make("scalar");
    rc::prop("[wq|wk|wv] == wq, wk, wv", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::block);
        const Case c = gen::materialize(s);
        const ImplOutputs o = run_impl(*impl, c);
        RC_ASSERT(o.error.empty());
        Tensor attn_in(c.in("x").rows(), s.config.d_model);
        for (size_t i = 0; i < attn_in.data.size(); ++i) attn_in.data[i] = (float)o.outputs.at("attn_in").data[i];
        for (const char* name : {"q", "k", "v"}) {
            Tensor sep = matmul(attn_in, c.in(std::string("w") + name));
            if (s.config.qkv_bias) {  // the bias added to the finished product, as q_proj does
                const Tensor& b = c.in(std::string("b") + name);
                for (size_t i = 0; i < sep.data.size(); ++i) sep.data[i] += b.data[i % b.data.size()];
            }
            const auto& fused = o.outputs.at(name).data;
            for (size_t i = 0; i < fused.size(); ++i) RC_ASSERT((float)fused[i] == sep.data[i]);
        }
    });
}

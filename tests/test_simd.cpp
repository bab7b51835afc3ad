// The SIMD implementation: every op against the LibTorch reference on property
// cases, for every compiled target this CPU runs and both storage dtypes; and
// the properties the design promises — decode == block bit for bit, the same
// bits for any thread count, bf16 outputs that are the f32 result rounded to
// nearest even.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cstring>

#include "compare/tolerance.h"
#include "gen/gen.h"
#include "helpers.h"
#include "simd/kernels.h"
#include "simd/simd.h"
#include "simd/target.h"

using namespace conform;

namespace {

std::vector<std::string> runnable_targets() {
    std::vector<std::string> out;
    for (const auto& t : simd::compiled_targets())
        if (t.supported) out.push_back(t.name);
    return out;
}

std::unique_ptr<Implementation> make_simd(const std::string& target, DType dtype, int threads = 0) {
    ImplOptions o;
    o.dtype = dtype;
    o.simd_target = target;
    o.threads = threads;
    return simd::make_simd(o);
}

void simd_conforms(Op op, DType dtype) {
    for (const std::string& target : runnable_targets()) {
        auto impl = make_simd(target, dtype);
        rc::prop(std::string("simd/") + target + " " + to_string(op) + " [" + to_string(dtype) + "] conforms", [&] {
            const gen::CaseSpec spec = *gen::spec_gen(op);
            const Case c = gen::materialize(spec);
            validate_case(c);
            const CaseResult r = test::check(*impl, c, dtype);
            RC_LOG() << test::explain(r);
            RC_ASSERT(r.error.empty());
            RC_ASSERT(r.pass);
        });
    }
}

// Runs c on impl and returns its "out" (decode, block) as float32 bits.
std::vector<double> out_of(Implementation& impl, const Case& c) {
    ImplOutputs o = run_impl(impl, c);
    if (!o.error.empty()) throw std::runtime_error(o.error);
    return o.outputs.at("out").data;
}

Case as_op(Case c, Op op) {
    c.op = op;
    return c;
}

}  // namespace

TEST_CASE("simd lists its targets and refuses unknown ones", "[simd]") {
    const auto targets = simd::compiled_targets();
    REQUIRE_FALSE(targets.empty());
    int best = 0;
    for (const auto& t : targets) best += t.best;
    REQUIRE(best == 1);
    REQUIRE(targets.back().name == "scalar");  // Highway's fallback is always compiled
    REQUIRE_THROWS_WITH(make_simd("neon", DType::f32), Catch::Contains("compiled:"));
    REQUIRE_THROWS_WITH(make_simd("", DType::f16), Catch::Contains("f32 or bf16"));
}

TEST_CASE("simd vs reference, every op, f32 and bf16", "[simd]") {
    const Op op = GENERATE(from_range(kAllOps.begin(), kAllOps.end()));
    const DType dtype = GENERATE(DType::f32, DType::bf16);
    REQUIRE(make_simd("", dtype)->implements(op));
    simd_conforms(op, dtype);
}

// Found by a fresh seed (CI, 2026-12-06): simd's bf16 decode kept its FP8
// cache's dequantized values (code * scale) in its bf16 cache buffer, one
// rounding more than an engine's FP8 read, and with qk_gain 16 the logits
// carried it past the bound. Until the cache keeps them in float32, simd in
// bf16 does not declare decode's kv_cache_dtype: the case is not offered
// (and in f32 it is, and conforms).
TEST_CASE("simd does not claim bf16 decode with an FP8 cache, and in f32 it does and conforms", "[simd]") {
    const Case c = gen::materialize(*gen::parse_case_id(
        "decode(T=317,D=34,H=3,KV=3,hd=8,F=17,layout=neox,theta=1000,scaling=linear,factor=3,qk_norm=1,"
        "eps=1.0000000000000001e-05,pos=30,prefill=0,qk_gain=16,sinks=1,kv_dtype=fp8_e5m2,kv_scale=tensor,mag=1,"
        "outliers=0,seed=25104198)"));
    const Twist* kv = find_twist("kv_cache_dtype");
    REQUIRE(kv);
    CHECK_FALSE(make_simd("", DType::bf16)->twists(Op::decode).allows(*kv, c.config));
    CHECK(make_simd("", DType::bf16)->twists(Op::paged_attention).allows(*kv, c.config));
    auto f32 = make_simd("", DType::f32);
    CHECK(f32->twists(Op::decode).allows(*kv, c.config));
    const CaseResult r = test::check(*f32, c, DType::f32);
    INFO(test::explain(r));
    CHECK(r.pass);
}

// Found by soak.short (2026-12-06): with chunk 1 each token sees only its own
// key and the sink, and at qk_gain 16 its score (298) sits 2 from the sink's
// (296). bf16's q and k move the score by ~2, so an honest bf16 engine moves
// that head's weight from the key to the sink (p 0.87 -> 0.44) and its output
// toward the sink's 0. attn's bound allowed it (its spread counts the sink's
// 0); its carry through wo into h did not (the spread there counted the
// visible values only), and the case failed at 0.46x on h.
TEST_CASE("simd bf16 decode conforms where a head's weight moves onto its sink", "[simd]") {
    const Case c = gen::materialize(*gen::parse_case_id(
        "decode(T=317,D=23,H=3,KV=1,hd=2,F=4,layout=neox,theta=10000,qk_norm=0,eps=1.0000000000000001e-05,pos=0,"
        "prefill=0,qk_gain=16,bias=1,bias_mean=-8,chunk=1,sinks=1,attn_scale=0.66666666666666663,mag=1,"
        "outliers=0,seed=532374447)"));
    auto bf16 = make_simd("", DType::bf16);
    const CaseResult r = test::check(*bf16, c, DType::bf16);
    INFO(test::explain(r));
    CHECK(r.pass);
}

// The prefill path of the product (more rows than a tile, K in several
// blocks, A in several row blocks) is reached only by shapes larger than the
// generators draw.
TEST_CASE("simd swiglu with the blocked product conforms", "[swiglu][simd][long]") {
    gen::CaseSpec s;
    s.op = Op::swiglu;
    s.T = 131;  // > 120 rows per A block
    s.config.d_model = 300;  // > 256: K blocked in the gate/up product
    s.config.ffn_dim = 530;  // > 256: K blocked in the down product; not a multiple of 8 or 16
    s.seed = 3;
    const Case c = gen::materialize(s);
    for (const std::string& target : runnable_targets())
        for (DType dtype : {DType::f32, DType::bf16}) {
            auto impl = make_simd(target, dtype);
            const CaseResult r = test::check(*impl, c, dtype);
            INFO(target << " " << to_string(dtype) << "\n" << test::explain(r));
            REQUIRE(r.pass);
        }
}

TEST_CASE("simd block at a real head size conforms", "[block][simd][long]") {
    gen::CaseSpec s;
    s.op = Op::block;
    s.T = 40;
    s.config.d_model = 288;
    s.config.ffn_dim = 770;
    s.config.n_heads = 8;
    s.config.n_kv_heads = 2;
    s.config.head_dim = 64;
    s.config.rope_theta = 500000;
    s.pos = 4000;
    s.config.qk_norm = true;
    s.seed = 5;
    const Case c = gen::materialize(s);
    for (const std::string& target : runnable_targets())
        for (DType dtype : {DType::f32, DType::bf16}) {
            auto impl = make_simd(target, dtype);
            const CaseResult r = test::check(*impl, c, dtype);
            INFO(target << " " << to_string(dtype) << "\n" << test::explain(r));
            REQUIRE(r.pass);
        }
}

// Decode runs the same per-row arithmetic as the block, through the cache.
TEST_CASE("simd decode equals simd block bit for bit", "[decode][simd]") {
    for (const std::string& target : runnable_targets())
        for (DType dtype : {DType::f32, DType::bf16}) {
            auto impl = make_simd(target, dtype);
            rc::prop("simd/" + target + " decode == block [" + to_string(dtype) + "]", [&] {
                Case c = gen::materialize(*gen::spec_gen(Op::decode));
                round_inputs(c, dtype);
                const auto dec = out_of(*impl, c);
                const auto blk = out_of(*impl, as_op(c, Op::block));
                RC_ASSERT(dec.size() == blk.size());
                for (size_t i = 0; i < dec.size(); ++i) {
                    RC_LOG() << "element " << i << ": decode " << dec[i] << " block " << blk[i];
                    RC_ASSERT(std::memcmp(&dec[i], &blk[i], sizeof(double)) == 0);
                }
            });
        }
}

// Every output element is computed by one task whose arithmetic does not
// depend on the split, so any thread count gives the same bits.
TEST_CASE("simd results do not depend on the thread count", "[block][simd]") {
    gen::CaseSpec s;
    s.op = Op::decode;
    s.T = 24;
    s.prefill = 9;
    s.config.d_model = 200;
    s.config.ffn_dim = 390;
    s.config.n_heads = 6;
    s.config.n_kv_heads = 3;
    s.config.head_dim = 32;
    s.seed = 9;
    Case c = gen::materialize(s);
    Case sw = gen::materialize([&] {
        gen::CaseSpec t = s;
        t.op = Op::swiglu;
        t.T = 130;
        t.config.d_model = 300;
        t.config.ffn_dim = 300;
        return t;
    }());
    for (DType dtype : {DType::f32, DType::bf16}) {
        round_inputs(c, dtype);
        round_inputs(sw, dtype);
        auto one = make_simd("", dtype, 1);
        const auto dec1 = out_of(*one, c), blk1 = out_of(*one, as_op(c, Op::block)), sw1 = out_of(*one, sw);
        for (int threads : {2, 3, 2}) {
            auto many = make_simd("", dtype, threads);
            INFO(threads << " threads, " << to_string(dtype));
            REQUIRE(out_of(*many, c) == dec1);
            REQUIRE(out_of(*many, as_op(c, Op::block)) == blk1);
            REQUIRE(out_of(*many, sw) == sw1);
        }
    }
}

// In bf16 the kernels run the f32 arithmetic and round once on store: the
// output must be the f32 output rounded to nearest even, on every target and
// also in the partial-vector tails (widths that are not a multiple of a vector).
TEST_CASE("simd bf16 stores round to nearest even", "[simd]") {
    for (const std::string& target : runnable_targets()) {
        auto f32 = make_simd(target, DType::f32);
        auto bf16 = make_simd(target, DType::bf16);
        rc::prop("simd/" + target + " bf16 == round(f32)", [&] {
            const Op op = *rc::gen::element(Op::rmsnorm, Op::rope, Op::qk_norm);
            Case c = gen::materialize(*gen::spec_gen(op));
            round_inputs(c, DType::bf16);
            const auto wide = out_of(*f32, c);
            const auto narrow = out_of(*bf16, c);
            for (size_t i = 0; i < wide.size(); ++i) {
                const float want = simd::to_f32(simd::to_bf16(static_cast<float>(wide[i])));
                RC_LOG() << "element " << i << ": f32 " << wide[i] << " bf16 " << narrow[i] << " want " << want;
                RC_ASSERT(static_cast<float>(narrow[i]) == want);
            }
        });
    }
}

TEST_CASE("to_bf16 rounds to nearest even like the harness", "[simd]") {
    rc::prop("to_bf16 == round_to(bf16)", [] {
        const uint32_t bits = *rc::gen::arbitrary<uint32_t>();
        float f;
        std::memcpy(&f, &bits, 4);
        RC_PRE(std::isfinite(f));
        RC_ASSERT(simd::to_f32(simd::to_bf16(f)) == static_cast<float>(round_to(f, DType::bf16)));
    });
    // Ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    REQUIRE(simd::to_f32(simd::to_bf16(1.0f + 1.0f / 256)) == 1.0f);
    REQUIRE(simd::to_f32(simd::to_bf16(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256);
    REQUIRE(std::isnan(simd::to_f32(simd::to_bf16(std::nanf("")))));
}

namespace {
// Columns [h*w, (h+1)*w) of t, as their own [rows, w] tensor.
Tensor head_cols(const Tensor& t, int64_t h, int64_t w) {
    Tensor out(t.rows(), w);
    for (int64_t r = 0; r < t.rows(); ++r)
        std::memcpy(out.data.data() + r * w, t.data.data() + r * t.cols() + h * w, sizeof(float) * static_cast<size_t>(w));
    return out;
}
}  // namespace

// The split-KV job scores blocks of query heads against each key row as it
// is read (up to 8, four dot products at once) and adds four value rows at a
// time; each head's arithmetic must be its own alone: query head h of a
// group of G gives the bits it gives as the only head over its kv head.
TEST_CASE("simd paged attention: a head's bits do not depend on the heads blocked with it", "[paged][simd]") {
    for (DType dtype : {DType::f32, DType::bf16}) {
        auto impl = make_simd("", dtype);
        rc::prop(std::string("simd paged head blocks [") + to_string(dtype) + "]", [&] {
            gen::CaseSpec s = *gen::spec_gen(Op::paged_attention);
            const int64_t G = *rc::gen::element<int64_t>(1, 3, 4, 5, 9);
            s.config.n_heads = G * s.config.n_kv_heads;
            Case c = gen::materialize(s);
            round_inputs(c, dtype);
            const ImplOutputs all = run_impl(*impl, c);
            RC_ASSERT(all.error.empty());
            const int64_t H = c.config.n_heads, hd = c.config.head_dim;
            for (int64_t h = 0; h < H; h += std::max<int64_t>(1, H / 4)) {
                const int64_t g = h / G;
                Case one = c;
                one.config.n_heads = one.config.n_kv_heads = 1;
                one.inputs["q"] = head_cols(c.inputs.at("q"), h, hd);
                for (const char* kv : {"k_cache", "v_cache"}) one.inputs[kv] = head_cols(c.inputs.at(kv), g, hd);
                if (c.inputs.count("sinks")) one.inputs["sinks"] = head_cols(c.inputs.at("sinks"), h, 1);
                for (const char* sc : {"k_scale", "v_scale"})
                    if (c.inputs.count(sc) && c.inputs.at(sc).cols() > 1) one.inputs[sc] = head_cols(c.inputs.at(sc), g, 1);
                const ImplOutputs alone = run_impl(*impl, one);
                RC_ASSERT(alone.error.empty());
                const DTensor &o = all.outputs.at("out"), &l = all.outputs.at("lse");
                for (int64_t t = 0; t < o.rows(); ++t) {
                    RC_LOG() << "G " << G << " head " << h << " row " << t;
                    for (int64_t d = 0; d < hd; ++d)
                        RC_ASSERT(std::memcmp(&o.data[t * H * hd + h * hd + d], &alone.outputs.at("out").data[t * hd + d],
                                              sizeof(double)) == 0);
                    RC_ASSERT(std::memcmp(&l.data[t * H + h], &alone.outputs.at("lse").data[t], sizeof(double)) == 0);
                }
            }
        });
    }
}

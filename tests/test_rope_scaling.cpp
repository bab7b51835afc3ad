#include <algorithm>
// RoPE scaling (linear, llama3, yarn, dynamic NTK) and partial rotary: the
// relations HF's formulas imply, each implementation against the reference on
// scaled cases, and the two scaling mutants caught and named.
#include <catch2/catch.hpp>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <type_traits>
#include <cmath>
#include <cstring>
#include <functional>
#include <rapidcheck/catch.h>

#include "diagnose/diagnose.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "helpers.h"
#include "reference/reference.h"
#include "scalar/scalar.h"

using namespace conform;

namespace {

constexpr double kPi = 3.14159265358979323846;

Tensor run_rope(Implementation& impl, const Tensor& x, const std::vector<int64_t>& pos, const RopeParams& p) {
    Tensor out(x.rows(), x.cols());
    impl.rope(x.view(), {pos.data(), (int64_t)pos.size()}, p, out.mut());
    return out;
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
    return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * 4) == 0;
}

Case case_of(const std::string& id) {
    std::string err;
    auto s = gen::parse_case_id(id, &err);
    INFO(err);
    REQUIRE(s);
    return gen::materialize(*s);
}

RopeScaling dynamic_scaling(double factor, int64_t orig) {
    RopeScaling s;
    s.type = RopeScalingType::dynamic;
    s.factor = factor;
    s.original_max_position = orig;
    return s;
}

RopeScaling llama31() {
    RopeScaling s;
    s.type = RopeScalingType::llama3;
    s.factor = 8;
    s.low_freq_factor = 1;
    s.high_freq_factor = 4;
    s.original_max_position = 8192;
    return s;
}

bool is_scaled(const gen::CaseSpec& s) {
    return s.config.rope_scaling.type != RopeScalingType::none || s.config.rotary_dim != 0;
}

}  // namespace

TEST_CASE("dynamic NTK inside the original context is exactly unscaled RoPE", "[rope][scaling][metamorphic]") {
    auto impl = test::make("scalar");
    rc::prop("max(pos) + 1 <= original_max_position: dynamic == none, bitwise", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::rope);
        if (s.config.head_dim <= 2) s.config.head_dim = 4;
        s.pos = *rc::gen::inRange<int64_t>(0, 200);
        const auto ps = gen::positions_of(s.pos, s.T, s.shape);
        const int64_t L = *std::max_element(ps.begin(), ps.end()) + 1;  // max(pos) + 1, whatever the positions' shape
        s.config.rope_scaling = dynamic_scaling(*rc::gen::element(2.0, 3.0, 4.0), L + *rc::gen::inRange<int64_t>(0, 50));
        const Case c = gen::materialize(s);
        RopeParams plain = rope_params(c.config);
        plain.scaling = RopeScaling{};
        RC_ASSERT(bitwise_equal(run_rope(*impl, c.in("x"), c.pos("positions"), rope_params(c.config)),
                                run_rope(*impl, c.in("x"), c.pos("positions"), plain)));
        // The reference, in float64, likewise.
        Case u = c;
        u.config.rope_scaling = RopeScaling{};
        RC_ASSERT(ref::run(c).at("out").data == ref::run(u).at("out").data);
    });
    // ... and one position past it (length 21 > 20), it is not.
    Case c = case_of("rope(T=4,n=2,hd=16,layout=neox,theta=10000,scaling=dynamic,factor=2,orig=20,pos=17,mag=1,"
                     "outliers=0,seed=3)");
    Case u = c;
    u.config.rope_scaling = RopeScaling{};
    REQUIRE(ref::run(c).at("out").data != ref::run(u).at("out").data);
}

TEST_CASE("linear scaling by f at position f q is unscaled RoPE at q", "[rope][scaling][metamorphic]") {
    auto impl = test::make("scalar");
    rc::prop("linear(f) at f q == none at q (f a power of two: exact)", [&] {
        gen::CaseSpec s = *gen::spec_gen(Op::rope);
        s.config.rope_scaling = RopeScaling{};
        const int64_t f = *rc::gen::element<int64_t>(2, 4, 8);
        const Case c = gen::materialize(s);
        std::vector<int64_t> q = c.pos("positions"), fq = q;
        for (auto& p : fq) p *= f;
        RopeParams lin = rope_params(c.config);
        lin.scaling.type = RopeScalingType::linear;
        lin.scaling.factor = static_cast<double>(f);
        RopeParams plain = rope_params(c.config);
        RC_ASSERT(bitwise_equal(run_rope(*impl, c.in("x"), fq, lin), run_rope(*impl, c.in("x"), q, plain)));
    });
}

TEST_CASE("llama3 keeps high frequencies, divides low ones by factor, blends between", "[rope][scaling]") {
    for (int64_t rd : {4, 16, 64, 128}) {
        RopeParams p;
        p.head_dim = rd;
        p.theta = 500000;
        p.scaling = llama31();
        RopeParams plain = p;
        plain.scaling = RopeScaling{};
        std::vector<double> got(rd / 2), base(rd / 2);
        scalar::rope_inv_freq(p, 1, got.data());
        scalar::rope_inv_freq(plain, 1, base.data());
        int kept = 0, divided = 0, blended = 0;
        for (int64_t i = 0; i < rd / 2; ++i) {
            const double wavelen = 2 * kPi / base[i];
            INFO("rd " << rd << " i " << i << " wavelen " << wavelen);
            if (wavelen < 8192.0 / 4) {
                REQUIRE(got[i] == base[i]);
                ++kept;
            } else if (wavelen > 8192.0 / 1) {
                REQUIRE(got[i] == base[i] / 8);
                ++divided;
            } else {
                REQUIRE(got[i] < base[i]);
                REQUIRE(got[i] > base[i] / 8);
                ++blended;
            }
        }
        if (rd >= 16) REQUIRE((kept > 0 && divided > 0));
        if (rd == 128) REQUIRE(blended > 0);
    }
}

TEST_CASE("yarn: at position 0 the output is x times the attention factor", "[rope][scaling]") {
    auto impl = test::make("scalar");
    Case c = case_of("rope(T=1,n=2,hd=16,layout=interleaved,theta=1000000,scaling=yarn,factor=4,orig=32768,"
                     "beta_fast=32,beta_slow=1,attn_factor=1.1386294361119891,pos=0,mag=1,outliers=0,seed=1)");
    const Tensor out = run_rope(*impl, c.in("x"), c.pos("positions"), rope_params(c.config));
    const float m = static_cast<float>(c.config.rope_scaling.attention_factor);
    for (size_t i = 0; i < out.data.size(); ++i) REQUIRE(out.data[i] == c.in("x").data[i] * m);
    const auto r = ref::run(c).at("out").data;
    for (size_t i = 0; i < r.size(); ++i)
        REQUIRE(std::abs(r[i] - double(c.in("x").data[i]) * c.config.rope_scaling.attention_factor) < 1e-12);
}

TEST_CASE("partial rotary passes the tail through and rotates the head as a rotary_dim RoPE", "[rope][scaling]") {
    for (const char* name : {"scalar", "simd"}) {
        auto impl = test::make(name);
        rc::prop(std::string(name) + ": tail copied, first rd dims = RoPE over rd", [&] {
            gen::CaseSpec s = *gen::spec_gen(Op::rope);
            s.config.head_dim = *rc::gen::element<int64_t>(8, 16, 32, 64);
            s.config.rotary_dim = s.config.head_dim / *rc::gen::element<int64_t>(2, 4);
            const Case c = gen::materialize(s);
            const int64_t hd = s.config.head_dim, rd = s.config.rotary_dim, n = s.config.n_heads, T = s.T;
            const Tensor& x = c.in("x");
            const Tensor out = run_rope(*impl, x, c.pos("positions"), rope_params(c.config));
            // the same heads cut to their first rd dims, rotated by a RoPE of head_dim rd
            Tensor front(T, n * rd);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < n; ++h)
                    for (int64_t d = 0; d < rd; ++d) front.data[t * n * rd + h * rd + d] = x.data[t * n * hd + h * hd + d];
            RopeParams small = rope_params(c.config);
            small.head_dim = rd;
            small.rotary_dim = 0;
            const Tensor want = run_rope(*impl, front, c.pos("positions"), small);
            for (int64_t t = 0; t < T; ++t)
                for (int64_t h = 0; h < n; ++h)
                    for (int64_t d = 0; d < hd; ++d) {
                        const float got = out.data[t * n * hd + h * hd + d];
                        const float expect = d < rd ? want.data[t * n * rd + h * rd + d] : x.data[t * n * hd + h * hd + d];
                        RC_ASSERT(got == expect);
                    }
        });
    }
}

TEST_CASE("decode with dynamic NTK beyond the context equals the block (the call's length)", "[decode][scaling]") {
    // 6 tokens at 30..35 with original context 32: the call's length 36 > 32,
    // while the prefill's (33) and the first steps' are not beyond by as much.
    const Case blk = case_of("block(T=6,D=16,H=4,KV=2,hd=8,F=16,layout=neox,theta=10000,scaling=dynamic,factor=4,"
                                 "orig=32,qk_norm=1,eps=1.0000000000000001e-05,pos=30,mag=1,outliers=0,seed=5)");
    for (const char* name : {"scalar", "simd"}) {
        auto impl = test::make(name);
        for (int64_t prefill : {0, 2, 5}) {
            Case dec = blk;
            dec.op = Op::decode;
            dec.prefill = prefill;
            const CaseResult r = test::check(*impl, dec);
            INFO(name << " prefill " << prefill << "\n" << test::explain(r));
            REQUIRE(r.pass);
        }
    }
    // What a per-step length would do: the first two tokens alone (length 32,
    // inside the context) are rotated unscaled, unlike in the whole call.
    Case first = blk;
    first.inputs["x"] = Tensor(2, blk.in("x").cols());
    std::copy(blk.in("x").data.begin(), blk.in("x").data.begin() + 2 * blk.in("x").cols(), first.inputs["x"].data.begin());
    first.positions["positions"] = {30, 31};
    const auto whole = ref::run(blk).at("q_rot").data, alone = ref::run(first).at("q_rot").data;
    REQUIRE(!std::equal(alone.begin(), alone.end(), whole.begin()));
}

TEST_CASE("every implementation conforms on scaled and partial-rotary property cases", "[rope][scaling][simd]") {
    struct Run {
        const char* impl;
        DType dtype;
    };
    for (Run run : {Run{"scalar", DType::f32}, Run{"simd", DType::f32}, Run{"simd", DType::bf16}}) {
        auto impl = test::make(run.impl, run.dtype);
        for (Op op : {Op::rope, Op::block, Op::decode}) {
            int scaled = 0;
            for (int i = 0; i < 60; ++i) {
                const gen::CaseSpec s = gen::draw(op, 7, i);
                if (!is_scaled(s)) continue;
                ++scaled;
                const CaseResult r = test::check(*impl, gen::materialize(s), run.dtype);
                INFO(run.impl << " " << to_string(run.dtype) << " " << gen::canonical_id(s) << "\n" << test::explain(r));
                REQUIRE(r.pass);
            }
            REQUIRE(scaled >= 15);  // the generator must reach scaled cases
        }
    }
}

TEST_CASE("the generator reaches every scaling type, both sides of dynamic's context, partial rotary",
          "[gen][scaling]") {
    int types[5] = {}, inside = 0, beyond = 0, partial = 0;
    for (Op op : {Op::rope, Op::block, Op::decode})
        for (int i = 0; i < 100; ++i) {
            const gen::CaseSpec s = gen::draw(op, 11, i);
            ++types[static_cast<int>(s.config.rope_scaling.type)];
            partial += s.config.rotary_dim != 0;
            if (s.config.rope_scaling.type == RopeScalingType::dynamic) (s.pos + s.T <= s.config.rope_scaling.original_max_position ? inside : beyond)++;
            if (s.config.rope_scaling.type == RopeScalingType::llama3) {
                REQUIRE(s.config.rope_theta == 500000);
                REQUIRE(s.config.rope_scaling == llama31());
            }
            // every id parses back to the same spec
            std::string err;
            const auto back = gen::parse_case_id(gen::canonical_id(s), &err);
            INFO(gen::canonical_id(s) << " " << err);
            REQUIRE(back);
            REQUIRE(gen::canonical_id(*back) == gen::canonical_id(s));
        }
    for (int t = 0; t < 5; ++t) REQUIRE(types[t] >= 10);
    REQUIRE(inside >= 5);
    REQUIRE(beyond >= 5);
    REQUIRE(partial >= 20);
}

TEST_CASE("case ids: scaling fields only when present, bad ones refused", "[gen][scaling]") {
    const std::string plain = "rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,mag=1,outliers=0,seed=12)";
    REQUIRE(gen::canonical_id(*gen::parse_case_id(plain)) == plain);
    REQUIRE(gen::parse_case_id(plain)->config.rope_scaling == RopeScaling{});
    auto refused = [](const std::string& id, const std::string& says) {
        std::string err;
        INFO(id);
        REQUIRE_FALSE(gen::parse_case_id(id, &err));
        INFO(err);
        REQUIRE(err.find(says) != std::string::npos);
    };
    const std::string head = "rope(T=2,n=1,hd=16,layout=neox,theta=10000,";
    const std::string tail = "pos=3,mag=1,outliers=0,seed=1)";
    refused(head + "scaling=llama3,factor=8,orig=8192," + tail, "missing field 'low_freq'");
    refused(head + "scaling=linear,factor=2,orig=32," + tail, "field 'orig' does not apply to scaling=linear");
    refused(head + "factor=2," + tail, "does not apply to scaling=none");
    refused(head + "scaling=cubic,factor=2," + tail, "field 'scaling': expected linear, llama3, yarn or dynamic");
    refused(head + "scaling=linear,factor=0.5," + tail, "rope_factor");
    refused(head + "scaling=dynamic,factor=2,orig=0," + tail, "rope_original_max_position");
    refused(head + "rd=5," + tail, "rotary_dim");
    refused(head + "rd=32," + tail, "rotary_dim");
    refused("attention(T=1,S=1,H=1,KV=1,hd=4,qpos=0,kpos=0,rd=2,mag=1,outliers=0,seed=1)", "does not apply to op attention");
}

TEST_CASE("a case with a bad scaling or rotary_dim is refused by field", "[core][scaling]") {
    Case c = case_of("rope(T=2,n=1,hd=16,layout=neox,theta=10000,pos=3,mag=1,outliers=0,seed=1)");
    auto refused = [&](const std::function<void(BlockConfig&)>& spoil, const std::string& field) {
        Case b = c;
        spoil(b.config);
        try {
            validate_case(b);
            FAIL("accepted a config with a bad " << field);
        } catch (const InputError& e) {
            INFO(e.what());
            REQUIRE(std::string(e.what()).find("config/" + field + ":") != std::string::npos);
        }
    };
    refused([](BlockConfig& k) { k.rotary_dim = 7; }, "rotary_dim");
    refused([](BlockConfig& k) { k.rotary_dim = 18; }, "rotary_dim");
    refused([](BlockConfig& k) { k.rope_scaling.type = RopeScalingType::linear, k.rope_scaling.factor = 0; }, "rope_factor");
    refused([](BlockConfig& k) { k.rope_scaling = dynamic_scaling(2, 0); }, "rope_original_max_position");
    refused([](BlockConfig& k) { k.rope_scaling = llama31(), k.rope_scaling.high_freq_factor = 1; },
            "rope_high_freq_factor");
    refused([](BlockConfig& k) { k.rope_scaling.attention_factor = 2; }, "rope_attention_factor");
    refused([](BlockConfig& k) { k.rope_scaling = dynamic_scaling(2, 8), k.rotary_dim = 2; }, "rotary_dim");
}

TEST_CASE("the scaling mutants are caught, and named", "[mutants][scaling][diagnose]") {
    auto scalar = test::make("scalar");
    auto named = [](Implementation& impl, const Case& c) {
        const CaseResult r = test::check(impl, c);
        REQUIRE_FALSE(r.pass);
        ImplOutputs out = run_impl(impl, c);
        const diagnose::Diagnosis d = diagnose::diagnose(c, DType::f32, out.outputs, r);
        return d.ids();
    };
    SECTION("rope_scaling_ignored: linear, llama3 beyond 8192, yarn, dynamic beyond") {
        auto m = test::make("rope_scaling_ignored");
        for (const char* id :
             {"rope(T=3,n=2,hd=16,layout=neox,theta=10000,scaling=linear,factor=4,pos=100,mag=1,outliers=0,seed=2)",
              "rope(T=3,n=2,hd=32,layout=interleaved,theta=500000,scaling=llama3,factor=8,low_freq=1,high_freq=4,"
              "orig=8192,pos=9000,mag=1,outliers=0,seed=2)",
              "block(T=3,D=16,H=2,KV=1,hd=16,F=16,layout=neox,theta=1000000,scaling=yarn,factor=4,orig=32768,"
              "beta_fast=32,beta_slow=1,attn_factor=1.1386294361119891,qk_norm=0,eps=1.0000000000000001e-05,"
              "pos=40000,mag=1,outliers=0,seed=2)",
              "decode(T=4,D=16,H=2,KV=1,hd=16,F=16,layout=neox,theta=10000,rd=8,scaling=dynamic,factor=2,orig=16,"
              "qk_norm=0,eps=1.0000000000000001e-05,pos=20,prefill=1,mag=1,outliers=0,seed=2)"}) {
            const Case c = case_of(id);
            INFO(id);
            REQUIRE(test::check(*scalar, c).pass);
            REQUIRE(named(*m, c) == std::vector<std::string>{"rope_scaling_ignored"});
        }
    }
    SECTION("dynamic_ntk_inside_context: inside the context, where scalar is unscaled") {
        auto m = test::make("dynamic_ntk_inside_context");
        const Case c = case_of("rope(T=4,n=2,hd=16,layout=neox,theta=10000,scaling=dynamic,factor=2,orig=64,pos=20,"
                               "mag=1,outliers=0,seed=2)");
        REQUIRE(test::check(*scalar, c).pass);
        REQUIRE(named(*m, c) == std::vector<std::string>{"dynamic_ntk_inside_context"});
        // and no other scaling type is touched by it
        const Case lin = case_of("rope(T=4,n=2,hd=16,layout=neox,theta=10000,scaling=linear,factor=2,pos=20,mag=1,"
                                 "outliers=0,seed=2)");
        REQUIRE(test::check(*m, lin).pass);
    }
}

namespace {

// Rewrites one attribute of /a/config in a fixture file (nullptr: deletes it).
template <typename V>
void set_config_attr(const std::string& path, const char* name, const V* value) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(f >= 0);
    const hid_t g = H5Gopen2(f, "/a/config", H5P_DEFAULT);
    REQUIRE(g >= 0);
    if (H5Aexists(g, name) > 0) H5Adelete(g, name);
    if (value) {
        const hid_t s = H5Screate(H5S_SCALAR);
        hid_t ft, mt;
        if constexpr (std::is_same_v<V, std::string>) {
            ft = mt = H5Tcopy(H5T_C_S1);
            H5Tset_size(ft, value->size() + 1);
        } else if constexpr (std::is_same_v<V, double>) {
            ft = H5Tcopy(H5T_IEEE_F64LE), mt = H5Tcopy(H5T_NATIVE_DOUBLE);
        } else {
            ft = H5Tcopy(H5T_STD_I64LE), mt = H5Tcopy(H5T_NATIVE_INT64);
        }
        const hid_t a = H5Acreate2(g, name, ft, s, H5P_DEFAULT, H5P_DEFAULT);
        REQUIRE(a >= 0);
        if constexpr (std::is_same_v<V, std::string>)
            H5Awrite(a, mt, value->c_str());
        else
            H5Awrite(a, mt, value);
        H5Aclose(a);
        if (mt != ft) H5Tclose(mt);
        H5Tclose(ft);
        H5Sclose(s);
    }
    H5Gclose(g);
    H5Fclose(f);
}

}  // namespace

TEST_CASE("fixtures carry RoPE scaling and rotary_dim, and refuse bad ones by attribute", "[fixtures][scaling]") {
    const std::string dir = std::filesystem::temp_directory_path() / ("conform-scaling-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string good = dir + "/good.h5";
    h5::FixtureCase fc;
    fc.c = case_of("rope(T=3,n=2,hd=16,layout=neox,theta=500000,rd=8,scaling=llama3,factor=8,low_freq=1,high_freq=4,"
                   "orig=8192,pos=9000,mag=1,outliers=0,seed=2)");
    fc.c.group = "a";
    fc.c.expected = ref::run(fc.c);
    h5::write_fixture(good, {fc}, true);
    const std::vector<Case> back = h5::read_fixture_in_process(good);
    REQUIRE(back.size() == 1);
    REQUIRE(back[0].config.rope_scaling == fc.c.config.rope_scaling);
    REQUIRE(back[0].config.rotary_dim == 8);

    auto refused = [&](const std::function<void(const std::string&)>& spoil, const std::string& says) {
        const std::string bad = dir + "/bad.h5";
        std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
        spoil(bad);
        try {
            h5::read_fixture_in_process(bad);
            FAIL("accepted: " << says);
        } catch (const InputError& e) {
            INFO(e.what());
            REQUIRE(std::string(e.what()).rfind(bad + ":/a: ", 0) == 0);
            REQUIRE(std::string(e.what()).find(says) != std::string::npos);
        }
    };
    const double half = 0.5, two = 2.0;
    const int64_t seven = 7, zero = 0;
    const std::string cubic = "cubic", none = "none";
    refused([&](const std::string& p) { set_config_attr(p, "rope_factor", &half); }, "config/rope_factor: must be");
    refused([&](const std::string& p) { set_config_attr<double>(p, "rope_low_freq_factor", nullptr); },
            "config/rope_low_freq_factor: missing (rope_scaling \"llama3\" needs it)");
    refused([&](const std::string& p) { set_config_attr(p, "rope_scaling", &cubic); }, "config/rope_scaling: expected");
    refused([&](const std::string& p) { set_config_attr(p, "rope_scaling", &none); },
            "config/rope_factor: does not apply to rope_scaling \"none\"");
    refused([&](const std::string& p) { set_config_attr(p, "rope_beta_fast", &two); },
            "config/rope_beta_fast: does not apply to rope_scaling \"llama3\"");
    refused([&](const std::string& p) { set_config_attr(p, "rotary_dim", &seven); }, "config/rotary_dim: must be");
    refused([&](const std::string& p) { set_config_attr(p, "rope_original_max_position", &zero); },
            "config/rope_original_max_position: must be > 0");
    std::filesystem::remove_all(dir);
}

// Generators: ids reproduce cases, generated cases reach the traps, shrinking
// gives small readable counterexamples.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>
#include <algorithm>
#include <cmath>
#include <functional>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "gen/gen.h"
#include "core/rng.h"
#include "helpers.h"

using namespace conform;

TEST_CASE("a canonical id rebuilds exactly the same case", "[gen]") {
    for (Op op : kAllOps) {
        rc::prop(std::string("id round trip ") + to_string(op), [op] {
            const gen::CaseSpec s = *gen::spec_gen(op);
            const std::string id = gen::canonical_id(s);
            std::string err;
            const auto back = gen::parse_case_id(id, &err);
            RC_ASSERT(back.has_value());
            RC_ASSERT(gen::canonical_id(*back) == id);
            const Case a = gen::materialize(s), b = gen::materialize(*back);
            RC_ASSERT(a.inputs.size() == b.inputs.size());
            for (const auto& [name, t] : a.inputs) RC_ASSERT(test::same_bits(t.data, b.inputs.at(name).data));
            RC_ASSERT(a.positions == b.positions);
            validate_case(a);  // every generated case is valid
        });
    }
}

TEST_CASE("malformed case ids are refused with the reason", "[gen]") {
    std::string err;
    REQUIRE_FALSE(gen::parse_case_id("nope(T=1)", &err));
    REQUIRE(err.find("unknown op") != std::string::npos);
    REQUIRE_FALSE(gen::parse_case_id("rope(T=1,n=1)", &err));
    REQUIRE(err.find("missing field") != std::string::npos);
    REQUIRE_FALSE(gen::parse_case_id("rmsnorm(T=x,D=4,eps=1e-5,mag=1,outliers=0,seed=1)", &err));
    REQUIRE_FALSE(gen::parse_case_id("rmsnorm(T=1,D=4,eps=1e-5,mag=1,outliers=0,seed=1,bogus=2)", &err));
    REQUIRE(err.find("unknown field") != std::string::npos);
}

TEST_CASE("generated cases reach the traps", "[gen]") {
    std::set<int64_t> hd;
    std::set<double> theta;
    bool gqa = false, mqa = false, mha = false, far = false, interleaved = false, neox = false, t1 = false, odd = false;
    for (int i = 0; i < 300; ++i) {
        const gen::CaseSpec a = gen::draw(Op::attention, 1, i);
        gqa |= a.config.n_kv_heads > 1 && a.config.n_kv_heads < a.config.n_heads;
        mqa |= a.config.n_kv_heads == 1 && a.config.n_heads > 1;
        mha |= a.config.n_kv_heads == a.config.n_heads;
        t1 |= a.T == 1;
        odd |= a.S % 8 != 0 && a.S > 8;
        const gen::CaseSpec r = gen::draw(Op::rope, 1, i);
        hd.insert(r.config.head_dim);
        theta.insert(r.config.rope_theta);
        far |= r.pos > 100000;
        interleaved |= r.config.rope_layout == RopeLayout::interleaved;
        neox |= r.config.rope_layout == RopeLayout::neox;
    }
    REQUIRE(gqa);
    REQUIRE(mqa);
    REQUIRE(mha);
    REQUIRE(t1);
    REQUIRE(odd);
    REQUIRE(far);
    REQUIRE(interleaved);
    REQUIRE(neox);
    REQUIRE(theta.count(10000.0));
    REQUIRE(theta.count(500000.0));
    REQUIRE(theta.count(1000000.0));
    REQUIRE(hd.count(4));
    REQUIRE(hd.count(64));
}

TEST_CASE("shrinking yields a small counterexample", "[gen]") {
    // A planted "bug" that shows only past position 4000 with at least 3 tokens.
    int index = -1;
    for (int i = 0; i < 500 && index < 0; ++i) {
        const gen::CaseSpec s = gen::draw(Op::rope, 5, i);
        if (s.pos >= 4000 && s.T >= 3) index = i;
    }
    REQUIRE(index >= 0);
    const gen::Shrunk sh = gen::shrink(Op::rope, 5, index, [](const gen::CaseSpec& s) { return s.pos >= 4000 && s.T >= 3; });
    INFO(gen::canonical_id(sh.spec));
    REQUIRE(sh.spec.T == 3);
    REQUIRE(sh.spec.pos == 4000);
    REQUIRE(sh.spec.config.head_dim == 4);
    REQUIRE(sh.spec.config.n_heads == 1);
    REQUIRE(sh.spec.seed == 0);
}

TEST_CASE("a failing paged batch shrinks to the sequences and pages its bug needs", "[gen][paged]") {
    // Planted bugs on the batch's shape alone, each starting from the first
    // drawn batch of 3 sequences or more and 5 pages or more that shows it.
    auto pages = [](const gen::CaseSpec& s, size_t b) {
        return (s.kv_lens[b] + s.config.page_size - 1) / s.config.page_size;
    };
    auto total_pages = [&](const gen::CaseSpec& s) {
        int64_t n = 0;
        for (size_t b = 0; b < s.kv_lens.size(); ++b) n += pages(s, b);
        return n;
    };
    struct Planted {
        const char* what;
        std::function<bool(const gen::CaseSpec&)> fails;
        size_t sequences;
        int64_t pages;
    };
    const std::vector<Planted> bugs = {
        // A page boundary past the first page, at the offset P - 1 (two pages: 2P - 1 keys).
        {"a sequence of 2 pages or more whose last page holds P - 1 keys",
         [&](const gen::CaseSpec& s) {
             for (size_t b = 0; b < s.kv_lens.size(); ++b)
                 if (s.q_lens[b] > 0 && pages(s, b) >= 2 && s.kv_lens[b] % s.config.page_size == s.config.page_size - 1 &&
                     s.config.page_size > 1)
                     return true;
             return false;
         },
         1, 2},
        // Two sequences with keys and queries: another's keys can leak.
        {"two sequences with keys and queries",
         [&](const gen::CaseSpec& s) {
             int n = 0;
             for (size_t b = 0; b < s.kv_lens.size(); ++b) n += s.kv_lens[b] > 0 && s.q_lens[b] > 0;
             return n >= 2;
         },
         2, 2},
        // A chunk of 2 queries or more over a cached prefix of its own.
        {"a chunk over a cached prefix",
         [&](const gen::CaseSpec& s) {
             for (size_t b = 0; b < s.kv_lens.size(); ++b)
                 if (s.q_lens[b] >= 2 && s.kv_lens[b] > s.q_lens[b]) return true;
             return false;
         },
         1, 1},
        // A sequence of 100 keys or more (a kernel that splits its keys at
        // 64): RapidCheck shrinks its length to 100 but can only shrink the
        // page size toward 16 (seven pages); larger pages make it one.
        {"a sequence of 100 keys or more",
         [&](const gen::CaseSpec& s) {
             for (size_t b = 0; b < s.kv_lens.size(); ++b)
                 if (s.q_lens[b] > 0 && s.kv_lens[b] >= 100) return true;
             return false;
         },
         1, 1},
    };
    for (const Planted& bug : bugs) {
        INFO(bug.what);
        int index = -1;
        for (int i = 0; i < 2000 && index < 0; ++i) {
            const gen::CaseSpec s = gen::draw(Op::paged_attention, 11, i);
            if (s.kv_lens.size() >= 3 && total_pages(s) >= 5 && bug.fails(s)) index = i;
        }
        REQUIRE(index >= 0);
        INFO("from " << gen::canonical_id(gen::draw(Op::paged_attention, 11, index)));
        const gen::Shrunk sh = gen::shrink(Op::paged_attention, 11, index, bug.fails);
        INFO("to " << gen::canonical_id(sh.spec));
        CHECK(bug.fails(sh.spec));
        CHECK(sh.spec.kv_lens.size() == bug.sequences);
        CHECK(total_pages(sh.spec) == bug.pages);
        std::string err;
        CHECK(gen::parse_case_id(gen::canonical_id(sh.spec), &err));  // the shrunk batch is an id that replays
    }
}

TEST_CASE("the ziggurat draws N(0, 1): moments, tails and the distribution function", "[gen]") {
    // The paged pools' keys and values. 4M draws: each statistic's standard
    // error is far inside its bound (mean 5e-4, variance 7e-4, the KS
    // statistic's 1% point 8.1e-4), and a wrong layer, wedge or tail moves one
    // past it (a tail sampled from r alone, the exponential part dropped,
    // leaves P(|x| > 3.5) at 0).
    Rng r{12345};
    const int n = 1 << 22;
    std::vector<double> x(n);
    double sum = 0, sq = 0;
    int beyond2 = 0, beyond3 = 0, beyond35 = 0;
    for (double& v : x) {
        v = r.ziggurat();
        sum += v;
        sq += v * v;
        beyond2 += std::abs(v) > 2.0;
        beyond3 += std::abs(v) > 3.0;
        beyond35 += std::abs(v) > 3.5;
    }
    const double mean = sum / n, var = sq / n - mean * mean;
    CHECK(std::abs(mean) < 3e-3);
    CHECK(std::abs(var - 1.0) < 4e-3);
    auto tail = [](double t) { return std::erfc(t / std::sqrt(2.0)); };  // P(|x| > t)
    CHECK(std::abs(beyond2 / double(n) - tail(2.0)) < 5 * std::sqrt(tail(2.0) / n));
    CHECK(std::abs(beyond3 / double(n) - tail(3.0)) < 5 * std::sqrt(tail(3.0) / n));
    CHECK(std::abs(beyond35 / double(n) - tail(3.5)) < 5 * std::sqrt(tail(3.5) / n));  // past r = 3.44: the tail's own sampler
    std::sort(x.begin(), x.end());
    double ks = 0;
    for (int i = 0; i < n; i += 97) {
        const double F = 0.5 * std::erfc(-x[static_cast<size_t>(i)] / std::sqrt(2.0));
        ks = std::max({ks, std::abs(F - double(i) / n), std::abs(F - double(i + 1) / n)});
    }
    CHECK(ks < 1.63 / std::sqrt(double(n)));
}

TEST_CASE("latent attention's widths are refused naming the field", "[gen][mla]") {
    std::string err;
    const auto spec = gen::parse_case_id(
        "mla_attention(H=2,dc=16,dn=8,dr=4,dv=8,P=4,kv=9/0,q=1/1,mag=1,outliers=0,seed=5)", &err);
    REQUIRE(spec);
    const Case good = gen::materialize(*spec);
    validate_case(good);
    for (const auto& [field, value, says] :
         {std::tuple<const char*, int64_t, const char*>{"kv_lora_rank", 0, "config/kv_lora_rank: must be > 0"},
          {"qk_rope_head_dim", -3, "config/qk_rope_head_dim: must be > 0"},
          {"v_head_dim", int64_t{1} << 40, "config/v_head_dim: must be at most 65536"}}) {
        Case bad = good;
        for_each_field(bad.config, [&](const ConfigField& f, auto& v) {
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int64_t>)
                if (std::string_view(f.name) == field) v = value;
        });
        INFO(field);
        CHECK_THROWS_WITH(validate_case(bad), Catch::Contains(says));
    }
    // A pool row the batch owns must be finite, in either cache.
    Case nan = good;
    nan.inputs.at("kpe_cache").data[static_cast<size_t>(nan.pos("kv_indices")[0] * 4 * 4)] = NAN;
    CHECK_THROWS_WITH(validate_case(nan), Catch::Contains("inputs/kpe_cache: non-finite value"));
}

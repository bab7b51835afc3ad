// The comparator itself: a planted error of known size is reported, at the right place.
#include <catch2/catch.hpp>
#include <cmath>

#include "compare/metrics.h"
#include "compare/tolerance.h"

using namespace conform;

TEST_CASE("a planted error is measured and located as (token, head, dim)", "[compare]") {
    DTensor ref;
    ref.shape = {5, 24};  // 3 heads of 8
    for (int i = 0; i < 120; ++i) ref.data.push_back(std::sin(0.3 * i));
    std::vector<float> a(ref.data.begin(), ref.data.end());
    const int64_t flat = 3 * 24 + 2 * 8 + 5;  // token 3, head 2, dim 5
    a[flat] += 0.25f;
    const Metrics m = measure(a.data(), ref, 8);
    REQUIRE(m.max_abs == Approx(0.25).epsilon(1e-5));
    REQUIRE(m.worst.token == 3);
    REQUIRE(m.worst.head == 2);
    REQUIRE(m.worst.dim == 5);
    REQUIRE(m.worst.col == 21);
    REQUIRE_FALSE(m.nonfinite);
    REQUIRE(m.nmse > 0);
    REQUIRE(m.cosine < 1.0);
    REQUIRE(count_over(a.data(), ref, 0.1) == 1);

    Baseline b;
    b.err_library = 1e-7;
    b.err_sequential = 2e-7;
    const Verdict v = judge(Op::rope, DType::f32, m, b, ref, 1);
    REQUIRE_FALSE(v.pass);
    REQUIRE(v.allowed == Approx(2 * 2e-7 + rounding_floor(ref, DType::f32)));
    REQUIRE(v.margin < 1);
}

TEST_CASE("NaN anywhere fails at once, with its index", "[compare]") {
    DTensor ref;
    ref.shape = {2, 4};
    ref.data.assign(8, 1.0);
    std::vector<float> a(8, 1.0f);
    a[6] = NAN;
    const Metrics m = measure(a.data(), ref, 0);
    REQUIRE(m.nonfinite);
    REQUIRE(m.first_nonfinite.flat == 6);
    REQUIRE(m.first_nonfinite.token == 1);
    REQUIRE(m.first_nonfinite.col == 2);
    const Verdict v = judge(Op::rmsnorm, DType::f32, m, Baseline{}, ref, 0);
    REQUIRE_FALSE(v.pass);
    REQUIRE(v.decided_by == "nonfinite");
}

TEST_CASE("an exact answer passes with infinite margin; the floor tracks magnitude", "[compare]") {
    DTensor ref;
    ref.shape = {1, 3};
    ref.data = {1000.0, -2.0, 0.5};
    std::vector<float> a = {1000.0f, -2.0f, 0.5f};
    const Verdict v = judge(Op::rmsnorm, DType::f32, measure(a.data(), ref, 0), Baseline{}, ref, 0);
    REQUIRE(v.pass);
    REQUIRE(std::isinf(v.margin));
    // f32 rounding noise at 1000.3 is ~6e-5: the floor is at that scale, not at 1e-7.
    REQUIRE(v.floor > 1e-5);
    REQUIRE(v.floor < 2e-4);
    REQUIRE(round_to(1.0 + 1.0 / 512, DType::bf16) == 1.0);  // bf16 keeps 8 significant bits
    REQUIRE(round_to(257.0, DType::bf16) == 256.0);
    REQUIRE(round_to(1.0 + 1.0 / 1024, DType::f16) == 1.0 + 1.0 / 1024);
}

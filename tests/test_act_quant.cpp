// The activation quantisers of conform/dtype.h (act_quant_row): what
// llama.cpp's CPU backend does to a weight product's input (Q8_0:
// quantize_row_q8_0_ref, Q8_K: quantize_row_q8_K_ref), checked on the
// values the formats pin down — the largest element exact to ±127 codes, the
// f16 scale, the two tie rules, a short last block, a block of zeros — and
// on random rows against the bound the format promises.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "conform/dtype.h"

using namespace conform;

namespace {

std::vector<float> round_trip(const std::vector<float>& x, ActQuant q) {
    std::vector<float> y(x.size());
    act_quant_row(x.data(), y.data(), static_cast<int64_t>(x.size()), q);
    return y;
}

}  // namespace

TEST_CASE("Q8_0: scale in f16, codes rounded half away from zero, per block of 32", "[act_quant]") {
    // amax 127: d = 1 exactly, so a code is x rounded, and x = ±2.5 is a tie.
    std::vector<float> x(32, 0.0f);
    x[0] = 127.0f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.5f, x[4] = 3.49f;
    const std::vector<float> y = round_trip(x, ActQuant::q8_0);
    CHECK(y[0] == 127.0f);
    CHECK(y[1] == 3.0f);   // roundf: away from zero
    CHECK(y[2] == -3.0f);
    CHECK(y[3] == 1.0f);
    CHECK(y[4] == 3.0f);
    CHECK(y[5] == 0.0f);

    // amax 1: d = 1/127 is not an f16, and the dequantised max is 127 · f16(d), not 1.
    std::vector<float> u(32, 0.25f);
    u[7] = -1.0f;
    const std::vector<float> v = round_trip(u, ActQuant::q8_0);
    const float d16 = f16_float(f16_bits(1.0f / 127.0f));
    REQUIRE(d16 != 1.0f / 127.0f);
    CHECK(v[7] == -127.0f * d16);
    CHECK(v[7] != -1.0f);
    CHECK(v[0] == std::round(0.25f * (1.0f / (1.0f / 127.0f))) * d16);

    // 40 elements: a block of 32 and a short one of 8 with its own scale.
    std::vector<float> w(40, 100.0f);
    for (int j = 32; j < 40; ++j) w[static_cast<size_t>(j)] = 0.001f * static_cast<float>(j - 31);
    const std::vector<float> z = round_trip(w, ActQuant::q8_0);
    CHECK(z[39] == 127.0f * f16_float(f16_bits(w[39] / 127.0f)));  // its own amax, not the first block's
    CHECK(z[32] != 0.0f);                                           // under the first block's scale it would be 0

    // A block of zeros stays zero (no 0/0).
    const std::vector<float> zeros = round_trip(std::vector<float>(32, 0.0f), ActQuant::q8_0);
    for (float f : zeros) CHECK(f == 0.0f);
    // A scale that underflows f16 (amax 1e-39: 1 / d is inf) stores 0: zeros, never inf · 0.
    std::vector<float> tiny(32, 0.0f);
    tiny[3] = 1e-39f, tiny[4] = 3e-6f;
    for (float f : round_trip(tiny, ActQuant::q8_0)) CHECK(f == 0.0f);
    tiny[4] = 0.0f;
    for (float f : round_trip(tiny, ActQuant::q8_0)) CHECK(f == 0.0f);
}

TEST_CASE("Q8_K: scale from the signed max, codes rounded half to even, per block of 256", "[act_quant]") {
    std::vector<float> x(256, 0.0f);
    x[9] = 127.0f;  // iscale = -1: codes are -rint(x)
    x[0] = 2.5f, x[1] = -2.5f, x[2] = 3.5f;
    const std::vector<float> y = round_trip(x, ActQuant::q8_k);
    CHECK(y[9] == 127.0f);
    CHECK(y[0] == 2.0f);  // rint: to even
    CHECK(y[1] == -2.0f);
    CHECK(y[2] == 4.0f);
    // A negative max: iscale = -127 / m > 0, the max's code is -127, the others' follow its sign.
    std::vector<float> n(256, 1.0f);
    n[3] = -127.0f;
    const std::vector<float> m = round_trip(n, ActQuant::q8_k);
    CHECK(m[3] == -127.0f);
    CHECK(m[0] == 1.0f);
    // iscale overflows for a max of 1e-39: the block is zeros, not NaN.
    std::vector<float> tiny(256, 0.0f);
    tiny[1] = -1e-39f;
    for (float f : round_trip(tiny, ActQuant::q8_k)) CHECK(f == 0.0f);
}

TEST_CASE("quantised rows stay within half a step of the block's scale", "[act_quant]") {
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (ActQuant q : {ActQuant::q8_0, ActQuant::q8_k}) {
        for (int n : {1, 31, 32, 33, 255, 256, 300, 4096}) {
            std::vector<float> x(static_cast<size_t>(n));
            for (float& v : x) v = g(rng) * (rng() % 4 == 0 ? 50.0f : 1.0f);
            const std::vector<float> y = round_trip(x, q);
            const int B = static_cast<int>(act_quant_block(q));
            for (int b0 = 0; b0 < n; b0 += B) {
                float amax = 0;
                for (int j = b0; j < std::min(n, b0 + B); ++j) amax = std::max(amax, std::fabs(x[static_cast<size_t>(j)]));
                const double step = amax / 127.0;
                for (int j = b0; j < std::min(n, b0 + B); ++j) {
                    INFO(to_string(q) << " n=" << n << " j=" << j);
                    // half a step, the f16 scale's rounding (q8_0: 2^-11 relative, times 127 codes), float32 ops
                    CHECK(std::fabs(y[static_cast<size_t>(j)] - x[static_cast<size_t>(j)]) <=
                          0.5 * step + 127.0 * step * (q == ActQuant::q8_0 ? std::ldexp(1.0, -11) : 0.0) + 1e-6 * amax);
                }
            }
        }
    }
    // none: the row as it is.
    const std::vector<float> x = {1.5f, -2.25f, 3e-9f};
    CHECK(round_trip(x, ActQuant::none) == x);
}

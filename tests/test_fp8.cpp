// The FP8 formats of a KV cache (conform/dtype.h) against the OCP 8-bit
// floating point specification: every code decoded by the spec's formula
// (written here from the bit layout, apart from dtype.h's), the values the
// spec names, and every conversion checked against a brute-force search over
// all 256 codes — nearest, ties to the even code, saturating at the largest
// finite value — on random floats from the subnormals to past the max, and on
// every midpoint between neighbouring codes; and against ONNX Runtime's own
// conversion (an independent producer: tests/fp8/ort_vectors.txt, recorded at
// a desk by scripts/ort-fp8-vectors.js), bit for bit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "conform/dtype.h"
#include "fp8/draw.h"

using namespace conform;

namespace {

struct Spec {
    KvCacheDtype d;
    int E, M, bias;
    bool ieee;  // e5m2: the top exponent is inf / NaN; e4m3fn: only S.1111.111 is NaN
};
const Spec kSpecs[] = {{KvCacheDtype::fp8_e4m3, 4, 3, 7, false}, {KvCacheDtype::fp8_e5m2, 5, 2, 15, true}};

// The spec's value of a code: (-1)^s * 2^(e - bias) * (1 + m / 2^M), or
// 2^(1 - bias) * (m / 2^M) for e = 0.
double spec_value(const Spec& s, int code) {
    const int sign = code >> 7, e = (code >> s.M) & ((1 << s.E) - 1), m = code & ((1 << s.M) - 1);
    const int emax = (1 << s.E) - 1;
    double v;
    if (s.ieee && e == emax) v = m == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
    else if (!s.ieee && e == emax && m == (1 << s.M) - 1) v = std::nan("");
    else if (e == 0) v = std::pow(2.0, 1 - s.bias) * (m / std::pow(2.0, s.M));
    else v = std::pow(2.0, e - s.bias) * (1 + m / std::pow(2.0, s.M));
    return sign ? -v : v;
}

// The code the spec's round-to-nearest-even gives x, by search: the nearest
// non-negative finite value, ties to the even code; past the largest value
// the next step up (what the exponent would give) competes too, and wins
// only as overflow — saturated to the max, or reported as -1.
int brute_force(const Spec& s, double x, bool truncate, bool* overflow) {
    const double a = std::fabs(x);
    int best = -1;
    double best_d = 0, top = 0;
    int top_code = 0;
    for (int c = 0; c < 128; ++c) {
        const double v = spec_value(s, c);
        if (!std::isfinite(v)) continue;
        if (v > top) top = v, top_code = c;
        if (truncate && v > a) continue;
        const double d = std::fabs(v - a);
        if (best < 0 || d < best_d || (d == best_d && (c & 1) == 0)) best = c, best_d = d;
    }
    // The value one step past the max (the max's exponent, mantissa one more; its code's parity is the max's + 1).
    const double step = std::pow(2.0, std::floor(std::log2(top)) - s.M);
    const double next = top + step, d_next = std::fabs(next - a);
    *overflow = !truncate && (d_next < best_d || (d_next == best_d && (top_code & 1) == 1));
    if (*overflow) best = top_code;
    return best | (std::signbit(x) ? 0x80 : 0);
}

}  // namespace

TEST_CASE("FP8 e4m3 and e5m2 decode every code as the OCP spec defines it", "[fp8]") {
    for (const Spec& s : kSpecs)
        for (int c = 0; c < 256; ++c) {
            const double want = spec_value(s, c);
            const float got = fp8_float(static_cast<uint8_t>(c), s.d);
            INFO(to_string(s.d) << " code " << c);
            if (std::isnan(want)) CHECK(std::isnan(got));
            else CHECK(static_cast<double>(got) == want);
        }
    // The values the spec names.
    CHECK(fp8_float(0x7E, KvCacheDtype::fp8_e4m3) == 448.0f);
    CHECK(fp8_float(0x01, KvCacheDtype::fp8_e4m3) == std::ldexp(1.0f, -9));
    CHECK(fp8_float(0x08, KvCacheDtype::fp8_e4m3) == std::ldexp(1.0f, -6));
    CHECK(fp8_float(0x38, KvCacheDtype::fp8_e4m3) == 1.0f);
    CHECK(std::isnan(fp8_float(0x7F, KvCacheDtype::fp8_e4m3)));
    CHECK(fp8_float(0x7B, KvCacheDtype::fp8_e5m2) == 57344.0f);
    CHECK(std::isinf(fp8_float(0x7C, KvCacheDtype::fp8_e5m2)));
    CHECK(fp8_float(0x01, KvCacheDtype::fp8_e5m2) == std::ldexp(1.0f, -16));
    CHECK(fp8_float(0x3C, KvCacheDtype::fp8_e5m2) == 1.0f);
}

TEST_CASE("FP8 conversion rounds to nearest even and saturates, as a search over all codes does", "[fp8]") {
    std::mt19937_64 rng(20261204);
    for (const Spec& s : kSpecs) {
        std::vector<double> xs;
        // Every finite code's value, and every midpoint between neighbours (the ties).
        std::vector<double> values;
        for (int c = 0; c < 128; ++c)
            if (std::isfinite(spec_value(s, c))) values.push_back(spec_value(s, c));
        for (size_t i = 0; i < values.size(); ++i) {
            xs.push_back(values[i]);
            if (i + 1 < values.size()) xs.push_back((values[i] + values[i + 1]) / 2);
        }
        const double top = values.back(), step = top - values[values.size() - 2];
        for (double x : {top + step / 4, top + step / 2, top + step * 0.75, top * 4, 1e30}) xs.push_back(x);
        // Log-uniform magnitudes from below the smallest subnormal to past the max.
        std::uniform_real_distribution<double> lg(-s.bias - s.M - 3, std::log2(top) + 2);
        for (int i = 0; i < 200000; ++i) xs.push_back(static_cast<float>(std::exp2(lg(rng))));
        int checked = 0;
        for (double x0 : xs)
            for (double x : {x0, -x0}) {
                const float f = static_cast<float>(x);
                if (static_cast<double>(f) != x) continue;  // only what a float holds
                for (bool truncate : {false, true}) {
                    bool overflow = false;
                    const int want = brute_force(s, f, truncate, &overflow);
                    INFO(to_string(s.d) << " x=" << x << (truncate ? " truncated" : ""));
                    CHECK(fp8_bits(f, s.d, {truncate, true}) == want);
                    ++checked;
                    if (truncate) continue;  // (a truncating write that does not saturate is no kernel's)
                    const uint8_t unsat = fp8_bits(f, s.d, {false, false});
                    if (overflow) {
                        const float v = fp8_float(unsat, s.d);
                        CHECK((s.ieee ? std::isinf(v) : std::isnan(v)));
                    } else {
                        CHECK(unsat == want);
                    }
                }
            }
        CHECK(checked > 600000);  // 200k draws and ~250 ties, each sign, both roundings
        CHECK(std::isnan(fp8_round(NAN, s.d)));
        CHECK(fp8_round(INFINITY, s.d) == static_cast<float>(top));  // saturating, as __NV_SATFINITE
    }
}

TEST_CASE("FP8 conversion is bit-identical to ONNX Runtime's Cast on a million floats", "[fp8]") {
    std::ifstream in(std::string(CONFORM_SOURCE_DIR) + "/tests/fp8/ort_vectors.txt");
    REQUIRE(in.good());
    const std::vector<uint32_t> x = test::fp8_inputs();
    std::string line;
    int formats = 0;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream ls(line);
        std::string name;
        size_t n = 0, chunk = 0;
        ls >> name >> n >> chunk;
        const auto d = parse_kv_cache_dtype(name);
        REQUIRE(d);
        REQUIRE(n == x.size());
        REQUIRE(chunk == static_cast<size_t>(test::kFp8Chunk));
        std::vector<uint32_t> out(n);
        for (size_t i = 0; i < n; ++i) {
            float f;
            std::memcpy(&f, &x[i], 4);
            const float y = fp8_round(f, *d);  // saturating, round to nearest even: Cast's saturate=1
            std::memcpy(&out[i], &y, 4);
        }
        for (size_t c = 0; c * chunk < n; ++c) {
            std::string want;
            ls >> want;
            const uint64_t got = test::fnv1a(out.data() + c * chunk, std::min(chunk, n - c * chunk));
            char hex[17];
            std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(got));
            INFO(name << " chunk " << c);
            CHECK(want == hex);
        }
        ++formats;
    }
    CHECK(formats == 2);
}

// harness/core/rng.h — the one deterministic generator behind every drawn
// tensor (property cases, the random model): splitmix64 + Box–Muller (the
// ziggurat for the paged pools), so a seed gives the same values on every
// platform and standard library (std::normal_distribution does not).
#pragma once

#include <cmath>
#include <cstdint>

namespace conform {

struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1): log() is safe
    double normal() {
        const double u = uniform(), v = uniform();
        return std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v);
    }
    int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
    // N(0, 1) by Marsaglia and Tsang's ziggurat ("The Ziggurat Method for
    // Generating Random Variables", J. Stat. Software 5(8), 2000), 128
    // layers: one draw and a compare for 98.8% of values, where Box–Muller
    // takes two draws, a log, a sqrt and a cos. For the paged caches' pools
    // (a serving batch's is 356M values: 12 s by normal(), a third of its
    // judging). The layer is the draw's low 7 bits and the value its high
    // 32, so the two are independent (the paper's RNOR shares them).
    double ziggurat();
};

namespace detail {
struct ZigguratTables {
    double k[128], w[128], f[128];  // |h| < k[i]: inside layer i's box; x = h * w[i]; f = exp(-x^2/2) at its edges
    ZigguratTables() {
        const double m1 = 2147483648.0, vn = 9.91256303526217e-3;  // 2^31; each layer's area
        double dn = 3.442619855899, tn = dn;                            // the base layer's edge: the tail starts here
        const double q = vn / std::exp(-0.5 * dn * dn);
        k[0] = dn / q * m1;
        k[1] = 0;
        w[0] = q / m1;
        w[127] = dn / m1;
        f[0] = 1.0;
        f[127] = std::exp(-0.5 * dn * dn);
        for (int i = 126; i >= 1; --i) {
            dn = std::sqrt(-2.0 * std::log(vn / dn + std::exp(-0.5 * dn * dn)));
            k[i + 1] = dn / tn * m1;
            tn = dn;
            f[i] = std::exp(-0.5 * dn * dn);
            w[i] = dn / m1;
        }
    }
};
inline const ZigguratTables& ziggurat_tables() {
    static const ZigguratTables t;
    return t;
}
}  // namespace detail

inline double Rng::ziggurat() {
    const detail::ZigguratTables& z = detail::ziggurat_tables();
    constexpr double r = 3.442619855899;  // where the tail begins
    for (;;) {
        const uint64_t u = next();
        const int i = static_cast<int>(u & 127);
        const int32_t h = static_cast<int32_t>(u >> 32);
        const double x = h * z.w[i];
        const double a = std::abs(static_cast<double>(h));
        if (a < z.k[i]) return x;  // inside the layer's box
        if (i == 0) {              // the tail past r: Marsaglia's exponential rejection
            double t, y;
            do {
                t = -std::log(uniform()) / r;
                y = -std::log(uniform());
            } while (y + y < t * t);
            return h > 0 ? r + t : -r - t;
        }
        if (z.f[i] + uniform() * (z.f[i - 1] - z.f[i]) < std::exp(-0.5 * x * x)) return x;  // the wedge
    }
}

}  // namespace conform

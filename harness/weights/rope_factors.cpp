#include "weights/rope_factors.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "weights/error.h"

namespace conform::weights {

namespace {

constexpr double kPi = 3.14159265358979323846;

double wavelength(double theta, int64_t rotary_dim, int64_t i) {
    const double inv = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(rotary_dim));
    return 2 * kPi / inv;
}

bool close(double a, double b) { return std::fabs(a - b) <= kFactorTolerance * std::max(std::fabs(a), std::fabs(b)); }

std::string num(double v) {
    std::ostringstream o;
    o.precision(9);
    o << v;
    return o.str();
}

// The first pair where `factors` and llama3(s) differ, or -1.
int64_t first_mismatch(const std::vector<float>& factors, const std::vector<double>& want) {
    for (size_t i = 0; i < factors.size(); ++i)
        if (!close(factors[i], want[i])) return static_cast<int64_t>(i);
    return -1;
}

// v rounded to 1/1000 when that is within the tolerance (1 for 0.9999996).
double snap(double v) {
    const double r = std::round(v * 1000.0) / 1000.0;
    return std::fabs(r - v) <= kFactorTolerance * std::max(1.0, std::fabs(v)) ? r : v;
}

}  // namespace

std::vector<double> llama3_factors(double theta, int64_t rotary_dim, const RopeScaling& s) {
    std::vector<double> f(static_cast<size_t>(rotary_dim / 2));
    const double L = static_cast<double>(s.original_max_position);
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
        const double wl = wavelength(theta, rotary_dim, i);
        if (wl < L / s.high_freq_factor) f[i] = 1.0;
        else if (wl > L / s.low_freq_factor) f[i] = s.factor;
        else {
            const double sm = (L / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
            f[i] = 1.0 / ((1 - sm) / s.factor + sm);
        }
    }
    return f;
}

FactorFit fit_rope_factors(const std::vector<float>& factors, double theta, int64_t rotary_dim,
                           int64_t original_context, const std::string& where) {
    auto refuse = [&](const std::string& what) {
        throw WeightsError(where + ": " + what +
                           " (the block's RopeScaling has no per-pair factors, so only a table that the llama3 "
                           "formula gives is accepted)");
    };
    if (static_cast<int64_t>(factors.size()) * 2 != rotary_dim)
        refuse(std::to_string(factors.size()) + " factors, expected rotary dim / 2 = " + std::to_string(rotary_dim / 2));
    for (size_t i = 0; i < factors.size(); ++i)
        if (!(factors[i] >= 1.0f - kFactorTolerance) || !std::isfinite(factors[i]))
            refuse("pair " + std::to_string(i) + ": factor " + num(factors[i]) + ", expected a finite number >= 1");

    FactorFit fit;
    const double factor = *std::max_element(factors.begin(), factors.end());
    if (close(factor, 1.0)) {
        fit.how = "rope_freqs.weight: every factor is 1: no scaling";
        return fit;
    }
    const double L = original_context > 0 ? static_cast<double>(original_context) : 8192.0;
    std::vector<double> u_mid, s_mid;   // pairs strictly between 1 and factor
    double u_full_max = -1, u_one_min = -1;  // nearest pairs at either end
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
        const double u = L / wavelength(theta, rotary_dim, i);
        const double f = factors[i];
        if (close(f, 1.0)) u_one_min = u_one_min < 0 ? u : std::min(u_one_min, u);
        else if (close(f, factor)) u_full_max = std::max(u_full_max, u);
        else {
            u_mid.push_back(u);
            s_mid.push_back((1.0 / f - 1.0 / factor) / (1.0 - 1.0 / factor));
        }
    }
    if (u_one_min < 0 && u_mid.empty()) {
        fit.scaling.type = RopeScalingType::linear;
        fit.scaling.factor = factor;
        fit.how = "rope_freqs.weight: every factor is " + num(factor) + ": linear scaling by it";
        return fit;
    }

    // s = (u - low) / (high - low) = alpha u + beta.
    double low = 0, high = 0;
    if (u_mid.size() >= 2) {
        double su = 0, ss = 0, suu = 0, sus = 0;
        const double n = static_cast<double>(u_mid.size());
        for (size_t k = 0; k < u_mid.size(); ++k) {
            su += u_mid[k], ss += s_mid[k], suu += u_mid[k] * u_mid[k], sus += u_mid[k] * s_mid[k];
        }
        const double alpha = (n * sus - su * ss) / (n * suu - su * su);
        const double beta = (ss - alpha * su) / n;
        low = -beta / alpha;
        high = low + 1.0 / alpha;
    } else if (u_mid.size() == 1) {
        low = u_full_max;  // s = 0 at the nearest pair scaled in full (the largest factor is one)
        high = low + (u_mid[0] - low) / s_mid[0];
    } else {  // s = 0 and 1 at the nearest pairs either side
        low = u_full_max, high = u_one_min;
    }
    if (!(low > 0) || !(high > low) || !std::isfinite(high))
        refuse("the factors fit low_freq_factor " + num(low) + " and high_freq_factor " + num(high) +
               ", expected 0 < low < high");

    RopeScaling s;
    s.type = RopeScalingType::llama3;
    s.factor = snap(factor);
    s.original_max_position = static_cast<int64_t>(L);
    s.low_freq_factor = snap(low);
    s.high_freq_factor = snap(high);
    int64_t bad = first_mismatch(factors, llama3_factors(theta, rotary_dim, s));
    if (bad >= 0) {  // the rounding to 1/1000 was too much: the fitted values themselves
        s.factor = factor, s.low_freq_factor = low, s.high_freq_factor = high;
        bad = first_mismatch(factors, llama3_factors(theta, rotary_dim, s));
    }
    if (bad >= 0) {
        const auto want = llama3_factors(theta, rotary_dim, s);
        refuse("pair " + std::to_string(bad) + ": factor " + num(factors[bad]) + ", but the best llama3 fit (factor " +
               num(s.factor) + ", low_freq_factor " + num(s.low_freq_factor) + ", high_freq_factor " +
               num(s.high_freq_factor) + ", original context " + num(L) + ") gives " + num(want[bad]));
    }
    std::ostringstream how;
    how << "rope_freqs.weight: " << factors.size() << " per-pair factors equal the llama3 formula's (within "
        << kFactorTolerance << " relative) for factor " << num(s.factor) << ", low_freq_factor " << num(s.low_freq_factor)
        << ", high_freq_factor " << num(s.high_freq_factor) << ", original context " << num(L)
        << (original_context > 0 ? " (rope.scaling.original_context_length)"
                                 : " (not in the file: 8192 taken, the converter's default; only L/low and L/high "
                                   "matter and those were fitted)");
    fit.scaling = s;
    fit.how = how.str();
    return fit;
}

}  // namespace conform::weights

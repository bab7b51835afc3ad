// Norm mutants: QK-norm missing or misplaced (semantics.md, bug class 7) and
// RMSNorm's scale computed wrongly ("others worth a mutant").
#include <cmath>
#include <vector>

#include "mutants/mutants.h"

namespace conform::mutants {
namespace {

using scalar::ScalarImpl;

// Class 7 (tt-mlir #9042): QK-norm dropped on the block path although the config has it.
struct QkNormMissing : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    std::pair<View, View> norm_qk(View q, View k, const BlockWeights&, const BlockConfig&, MutView,
                                  MutView) override {
        return {q, k};
    }
};

// Class 7 (aprender #2085): QK-norm applied after RoPE instead of before —
// missing where it belongs, added on the rotated q and k.
struct QkNormAfterRope : QkNormMissing {
    using QkNormMissing::QkNormMissing;
    void rotate_qk(View q, View k, Positions pos, const BlockWeights& w, const BlockConfig& c, MutView q_rot,
                   MutView k_rot) override {
        ScalarImpl::rotate_qk(q, k, pos, w, c, q_rot, k_rot);
        ScalarImpl::norm_qk(q_rot, k_rot, w, c, q_rot, k_rot);
    }
};

// Class 7: QK-norm applied whatever the config says (a Qwen3 path run for
// Llama), with unit weights where the checkpoint has none.
struct QkNormAlwaysOn : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    std::pair<View, View> norm_qk(View q, View k, const BlockWeights& w, const BlockConfig& c, MutView q_normed,
                                  MutView k_normed) override {
        BlockConfig on = c;
        on.qk_norm = true;
        BlockWeights unit = w;
        ones_.assign(static_cast<size_t>(c.head_dim), c.norm_plus_one ? 0.0f : 1.0f);  // a unit scale either way
        if (!c.qk_norm) unit.q_norm = unit.k_norm = View{ones_.data(), 1, c.head_dim};
        return ScalarImpl::norm_qk(q, k, unit, on, q_normed, k_normed);
    }
    std::vector<float> ones_;
};

// eps outside the square root: x / (sqrt(mean(x^2)) + eps).
float inv_rms_eps_outside(const float* x, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    return 1.0f / (std::sqrt(ss / static_cast<float>(n)) + eps);
}

// mean |x| in place of mean x^2: 1 / sqrt(mean(|x|) + eps).
float inv_rms_mean_abs(const float* x, int64_t n, float eps) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += std::abs(x[i]);
    return 1.0f / std::sqrt(s / static_cast<float>(n) + eps);
}

// The sum of squares over whole groups of 8 only: a vector loop whose scalar
// tail was forgotten, so the last n % 8 elements are left out of the sum (the
// divisor still n). Small: at n = 4099 the rms moves by 3/8198 of itself,
// inside a bf16 kernel's error, far outside a float32 one's.
float inv_rms_tail_skipped(const float* x, int64_t n, float eps) {
    float ss = 0.0f;
    for (int64_t i = 0; i < n - n % 8; i++) ss += x[i] * x[i];
    return 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
}

// Both norms share the row kernel, so its bug reaches rmsnorm and qk_norm alike.
template <scalar::InvRms F>
struct NormScale : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override { scalar::rmsnorm(x, w, p, out, F); }
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override { scalar::qk_norm(x, w, p, out, F); }
};

// LayerNorm for RMSNorm: each row centred (its mean subtracted) before it is
// divided by its rms — in both norms (the block's and QK-norm).
struct LayerNormNotRms : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override {
        ScalarImpl::rmsnorm(centred(x, x.cols), w, p, out);
    }
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override {
        ScalarImpl::qk_norm(centred(x, p.head_dim), w, p, out);
    }
    View centred(View x, int64_t group) {
        buf_.assign(x.data, x.data + x.size());
        for (int64_t r = 0; r < x.rows * x.cols / group; ++r) {
            float mean = 0.0f;
            for (int64_t i = 0; i < group; ++i) mean += buf_[static_cast<size_t>(r * group + i)];
            mean /= static_cast<float>(group);
            for (int64_t i = 0; i < group; ++i) buf_[static_cast<size_t>(r * group + i)] -= mean;
        }
        return View{buf_.data(), x.rows, x.cols};
    }
    std::vector<float> buf_;
};


}  // namespace

std::unique_ptr<Implementation> qk_norm_after_rope(const ImplOptions& o) {
    return detail::make<QkNormAfterRope>("qk_norm_after_rope", o);
}
std::unique_ptr<Implementation> qk_norm_always_on(const ImplOptions& o) {
    return detail::make<QkNormAlwaysOn>("qk_norm_always_on", o);
}
std::unique_ptr<Implementation> rmsnorm_eps_outside_sqrt(const ImplOptions& o) {
    return detail::make<NormScale<inv_rms_eps_outside>>("rmsnorm_eps_outside_sqrt", o);
}
std::unique_ptr<Implementation> rmsnorm_mean_not_squared(const ImplOptions& o) {
    return detail::make<NormScale<inv_rms_mean_abs>>("rmsnorm_mean_not_squared", o);
}
std::unique_ptr<Implementation> rmsnorm_tail_skipped(const ImplOptions& o) {
    return detail::make<NormScale<inv_rms_tail_skipped>>("rmsnorm_tail_skipped", o);
}

std::unique_ptr<Implementation> layer_norm_not_rms(const ImplOptions& o) {
    return detail::make<LayerNormNotRms>("layer_norm_not_rms", o);
}

}  // namespace conform::mutants

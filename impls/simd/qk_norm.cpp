// qk_norm — per-head RMSNorm, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/qk_norm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/qk_norm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

void QkNormRowsExport(CRows x, size_t n_heads, size_t hd, const float* w, float eps, MRows out, size_t r0,
                      size_t r1) {
    QkNormRows(x, n_heads, hd, w, eps, out, r0, r1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(QkNormRowsExport);

namespace kern {
void qk_norm_rows(Target t, CRows x, size_t n_heads, size_t hd, const float* w, float eps, MRows out, size_t r0,
                  size_t r1) {
    CONFORM_DISPATCH(t, QkNormRowsExport)(x, n_heads, hd, w, eps, out, r0, r1);
}
}  // namespace kern

void qk_norm(ThreadPool& pool, Target t, CRows x, size_t T, size_t n_heads, size_t hd, const float* w, float eps,
             MRows out) {
    pool.RunRanges(T, [&](size_t r0, size_t r1, int) { kern::qk_norm_rows(t, x, n_heads, hd, w, eps, out, r0, r1); });
}

}  // namespace conform::simd
#endif  // HWY_ONCE

// rmsnorm — RMSNorm and the fused residual add + RMSNorm, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/rmsnorm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/rmsnorm-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

void RmsNormRowsExport(CRows x, const float* w, size_t D, float eps, MRows out, size_t r0, size_t r1) {
    RmsNormRows(x, w, D, eps, out, r0, r1);
}
void AddRmsNormRowsExport(CRows r, CRows d, MRows h, const float* w, size_t D, float eps, MRows n, size_t r0,
                          size_t r1) {
    AddRmsNormRows(r, d, h, w, D, eps, n, r0, r1);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(RmsNormRowsExport);
HWY_EXPORT(AddRmsNormRowsExport);

namespace kern {
void rmsnorm_rows(Target t, CRows x, const float* w, size_t D, float eps, MRows out, size_t r0, size_t r1) {
    CONFORM_DISPATCH(t, RmsNormRowsExport)(x, w, D, eps, out, r0, r1);
}
void add_rmsnorm_rows(Target t, CRows r, CRows d, MRows h, const float* w, size_t D, float eps, MRows n, size_t r0,
                      size_t r1) {
    CONFORM_DISPATCH(t, AddRmsNormRowsExport)(r, d, h, w, D, eps, n, r0, r1);
}
}  // namespace kern

void rmsnorm(ThreadPool& pool, Target t, CRows x, size_t T, size_t D, const float* w, float eps, MRows out) {
    pool.RunRanges(T, [&](size_t r0, size_t r1, int) { kern::rmsnorm_rows(t, x, w, D, eps, out, r0, r1); });
}

}  // namespace conform::simd
#endif  // HWY_ONCE

// matmul — the packed-panel product of matmul-inl.h, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matmul.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/matmul-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

size_t GemmRowBlockT() { return kMR; }
void PackAExport(CRows a, size_t M, size_t K, float* packed, size_t r0, size_t r1) { PackA(a, M, K, packed, r0, r1); }
void GemmPanelsExport(const Gemm& g, size_t p0, size_t p1) { GemmPanels(g, p0, p1); }

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/dispatch.h"

namespace conform::simd {

HWY_EXPORT(GemmRowBlockT);
HWY_EXPORT(PackAExport);
HWY_EXPORT(GemmPanelsExport);

namespace kern {
size_t gemm_row_block(Target t) { return CONFORM_DISPATCH(t, GemmRowBlockT)(); }
void pack_a(Target t, CRows a, size_t M, size_t K, float* packed, size_t r0, size_t r1) {
    CONFORM_DISPATCH(t, PackAExport)(a, M, K, packed, r0, r1);
}
void gemm_panels(Target t, const Gemm& g, size_t p0, size_t p1) { CONFORM_DISPATCH(t, GemmPanelsExport)(g, p0, p1); }
}  // namespace kern

}  // namespace conform::simd
#endif  // HWY_ONCE

// rope — table-driven RoPE and the fused QK-norm + RoPE, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/rope.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/rope-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

void RopeRowsExport(CRows x, size_t n_heads, const RopeRows& table, MRows out, size_t r0, size_t r1) {
    RopeRowsAny(x, n_heads, table, out, r0, r1);
}
void QkvRopeRowsExport(const kern::QkvRope& job, size_t r0, size_t r1) { QkvRopeRows(job, r0, r1); }

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(RopeRowsExport);
HWY_EXPORT(QkvRopeRowsExport);

namespace kern {
void rope_rows(Target t, CRows x, size_t n_heads, const RopeRows& table, MRows out, size_t r0, size_t r1) {
    CONFORM_DISPATCH(t, RopeRowsExport)(x, n_heads, table, out, r0, r1);
}
void qkv_rope_rows(Target t, const QkvRope& job, size_t r0, size_t r1) {
    CONFORM_DISPATCH(t, QkvRopeRowsExport)(job, r0, r1);
}
}  // namespace kern

void rope(ThreadPool& pool, Target t, RopeTable& table, CRows x, size_t T, size_t n_heads, const int64_t* pos,
          const RopeParams& p, MRows out) {
    const RopeRows rows = table.rows(pos, T, rope_for_call(p, rope_seq_len(pos, T)));
    pool.RunRanges(T, [&](size_t r0, size_t r1, int) { kern::rope_rows(t, x, n_heads, rows, out, r0, r1); });
}

}  // namespace conform::simd
#endif  // HWY_ONCE

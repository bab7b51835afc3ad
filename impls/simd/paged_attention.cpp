// paged_attention — split-KV attention over a paged cache, compiled per target
// (the math: paged_attention-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/paged_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/paged_attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

void PagedSplitExport(const PagedJob& job, size_t b, size_t g, size_t c) { PagedSplit(job, b, g, c); }
void PagedMergeExport(const PagedJob& job, size_t t, size_t splits, float* lse_row) {
    PagedMerge(job, t, splits, lse_row);
}

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(PagedSplitExport);
HWY_EXPORT(PagedMergeExport);

void paged_attention(ThreadPool& pool, Target t, PagedJob& job, float* lse) {
    // Splits of whole pages, at least 64 keys: a decode step over 8k keys is
    // 128 items per kv head, enough to fill every core, and a split is long
    // enough that its partial state costs less than its keys.
    job.split = job.P * std::max<size_t>(1, (64 + job.P - 1) / job.P);
    size_t splits = 1;
    for (size_t b = 0; b < job.B; ++b)
        splits = std::max(splits, (static_cast<size_t>(job.kv_len(b)) + job.split - 1) / job.split);
    job.splits = splits;
    const size_t hdp = (job.hd + 15) / 16 * 16;  // at least PaddedHeadDim on every target (16 f32 lanes at most)
    job.stride = hdp + 2;
    std::vector<float> partials(job.T * job.H * splits * job.stride);
    job.partials = partials.data();
    // Phase 1: (sequence, kv head, split) items; items past a sequence's keys
    // still run, to mark their rows' partial states empty.
    std::vector<size_t> items;
    for (size_t b = 0; b < job.B; ++b)
        for (size_t g = 0; g < job.KV; ++g)
            for (size_t c = 0; c < splits; ++c) items.push_back((b * job.KV + g) * splits + c);
    pool.Run(items.size(), [&](size_t i, int) {
        const size_t item = items[i], c = item % splits, g = (item / splits) % job.KV, b = item / splits / job.KV;
        CONFORM_DISPATCH(t, PagedSplitExport)(job, b, g, c);
    });
    // Phase 2: merge each row's splits (after every split is written: Run returns when all items have).
    pool.Run(job.T, [&](size_t row, int) { CONFORM_DISPATCH(t, PagedMergeExport)(job, row, splits, lse + row * job.H); });
}

}  // namespace conform::simd
#endif  // HWY_ONCE

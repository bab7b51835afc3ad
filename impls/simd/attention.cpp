// attention — GQA attention with an online softmax, compiled per target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "simd/attention-inl.h"

HWY_BEFORE_NAMESPACE();
namespace conform::simd {
namespace HWY_NAMESPACE {

void AttentionItemsExport(const Attn& job, size_t i0, size_t i1) { AttentionItems(job, i0, i1); }

}  // namespace HWY_NAMESPACE
}  // namespace conform::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "simd/dispatch.h"
#include "simd/ops.h"

namespace conform::simd {

HWY_EXPORT(AttentionItemsExport);

namespace kern {
void attention_items(Target t, const Attn& job, size_t i0, size_t i1) {
    CONFORM_DISPATCH(t, AttentionItemsExport)(job, i0, i1);
}
}  // namespace kern

void attention(ThreadPool& pool, Target t, const Attn& job) {
    // Round-robin chunks of (token, kv head) items: with causal rows, later
    // tokens cost more, so contiguous halves would leave one thread idle.
    const size_t items = job.T * job.KV;
    const size_t chunk = std::max<size_t>(1, items / (static_cast<size_t>(pool.size()) * 8));
    pool.Run((items + chunk - 1) / chunk, [&](size_t i, int) {
        kern::attention_items(t, job, i * chunk, std::min(items, (i + 1) * chunk));
    });
}

}  // namespace conform::simd
#endif  // HWY_ONCE

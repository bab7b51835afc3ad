// impls/simd/dispatch.h — calling an exported kernel for a Target.
//
// Include after hwy/highway.h, in the HWY_ONCE part of a SIMD .cpp. The table
// index of a target is what hwy::ChosenTarget::GetIndex() would return had
// Update() been given that target alone; every SIMD translation unit is built
// with the same HWY_TARGETS, so the index means the same entry everywhere.
#pragma once

#include <hwy/highway.h>

#include "simd/target.h"

namespace conform::simd::detail {

inline size_t table_index(int64_t target_bit) {
    const int64_t mask = (HWY_CHOSEN_TARGET_SHIFT(target_bit) | HWY_CHOSEN_TARGET_MASK_SCALAR) &
                         HWY_CHOSEN_TARGET_MASK_TARGETS;
    return hwy::Num0BitsBelowLS1Bit_Nonzero64(static_cast<uint64_t>(mask));
}

}  // namespace conform::simd::detail

#if (HWY_TARGETS & (HWY_TARGETS - 1)) == 0
// One compiled target: nothing to choose.
#define CONFORM_DISPATCH(target, FUNC) HWY_STATIC_DISPATCH(FUNC)
#else
#define CONFORM_DISPATCH(target, FUNC)                                                             \
    (*((target).forced ? HWY_DISPATCH_TABLE(FUNC)[::conform::simd::detail::table_index((target).bit)] \
                       : &HWY_DYNAMIC_DISPATCH(FUNC)))
#endif

// harness/h5/schema.h — facts of the fixture schema (fixtures/SCHEMA.md)
// that the reader and the writer share.
#pragma once

#include <cstdint>

namespace conform::h5 {

// Any config size above this is corrupt, not a model.
inline constexpr int64_t kMaxSize = int64_t(1) << 24;

}  // namespace conform::h5

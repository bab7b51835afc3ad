// harness/h5/schema.h — facts of the fixture schema (fixtures/SCHEMA.md)
// that the reader and the writer share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "conform/config.h"

namespace conform::h5 {

// Any config size above this is corrupt, not a model.
inline constexpr int64_t kMaxSize = int64_t(1) << 24;

// The optional RoPE attributes beyond theta, every one of them.
extern const std::vector<std::string> kScalingParams;

// Which of them a scaling type takes (all explicit: no HF default is assumed
// for a missing one).
std::vector<std::string> scaling_params(RopeScalingType t);

}  // namespace conform::h5

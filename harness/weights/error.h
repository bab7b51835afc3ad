// harness/weights/error.h — the one exception the checkpoint readers throw.
#pragma once

#include <stdexcept>

namespace conform::weights {

// A checkpoint that cannot be read as the block's weights: "FILE: TENSOR:
// FIELD: what is wrong (expected ..., found ...)", or "FILE: FIELD: ..." when
// no tensor is involved. The command maps it to exit code 2.
struct WeightsError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace conform::weights

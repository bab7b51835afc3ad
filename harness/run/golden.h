// harness/run/golden.h — golden data from our reference, and failing property
// cases saved as regression fixtures.
//
// A separate library from fixture.h: this side needs the LibTorch reference,
// the file format does not.
#pragma once

#include <cstdint>
#include <string>

#include "conform/config.h"
#include "core/case.h"

namespace conform::h5 {

// The golden outputs of a case: our reference in float64 (library order, no
// variant) — "out" and, for block, every tap; decode "out" only.
NamedD golden_expected(const Case& c);

// Where a failure came from, recorded in the saved file's attributes.
struct FailureInfo {
    std::string impl;           // the implementation that failed
    DType dtype = DType::f32;   // the dtype it ran in
    uint64_t run_seed = 0;      // the gate's --seed
    int shrink_steps = 0;
    std::string first_failing;  // first failing tensor, when known
    std::string error;          // the implementation's error, when it threw
};

// "<case id made file-name safe>.<impl>.h5"; the id alone names the case, the
// implementation keeps two implementations' failures of one case apart.
std::string failure_file_name(const std::string& case_id, const std::string& impl);

// Group name of a saved failure inside its file.
inline constexpr const char* kFailureGroup = "failure";

// Writes a failing property case, with golden expected values, as a one-case
// fixture dir/failure_file_name(...). Returns its path. Throws InputError when
// the file exists and !force (see write_fixture).
std::string save_failure(const std::string& dir, const Case& c, const FailureInfo& info, bool force);

// The command that replays a saved (or any) fixture case on one implementation.
std::string fixture_replay_command(const std::string& impl, const std::string& file, const std::string& group,
                                   DType dtype);

}  // namespace conform::h5

// impls/simd/simd.h — the Highway implementation, seen from outside.
//
// float32 or bf16 storage (ImplOptions::dtype; arithmetic always f32), one
// compiled Highway target per run (ImplOptions::simd_target, default the best
// this CPU has), a thread pool of ImplOptions::threads (0: every core).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conform/bench.h"
#include "conform/impl.h"

namespace conform::simd {

std::unique_ptr<Implementation> make_simd(const ImplOptions& options);

// `conform list`: one line naming the compiled targets and the one in use.
std::string simd_details();

// ---- for `conform bench` (conform/bench.h) --------------------------------

std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& options, const BenchInputs& in);

}  // namespace conform::simd

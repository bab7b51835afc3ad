// harness/cli/flags.h — the flags that choose implementations and cases,
// shared by the gate and `conform coverage` (so coverage counts what the gate
// runs), declared on an app; what they are as typed, and their translation
// into a run::Selection and run::ImplRequest, are harness/run/resolve.h.
#pragma once

#include <CLI/CLI.hpp>

#include "run/resolve.h"

namespace conform::cli {

using run::CaseFlags;
using run::kDefaultSeed;
using run::kFullSizeCases;
using run::kFullSizeRows;
using run::parse_seed;
using run::Resolved;
using run::resolve_case_flags;
using run::split_list;
using run::WorkerFlags;
using run::apply_worker_flags;

// --impl --op --cases --seed --dtype --params --shard --case --fixtures
// --no-default-fixtures --fixture-case, and the CONFIG flags.
void add_case_flags(CLI::App& app, CaseFlags& f);

// --impl-lib, --impl-cmd, --impl-fd, --call-timeout, --worker-memory,
// --worker-cpu; and, for the gate, --isolate and --no-isolate.
void add_worker_flags(CLI::App& app, WorkerFlags& f, bool gate);

// A number >= 0 (> 0), finite: CLI11's NonNegativeNumber and PositiveNumber
// let "nan" and "inf" through to a float flag (--shrink-time nan ran).
CLI::Validator nonnegative();
CLI::Validator positive();

// --seed: "random" or a number (digits only); not empty, which would mean
// the default seed without saying so.
CLI::Validator seed_text();

// --threads N: at most the CPUs this process may run on (sched_getaffinity),
// so that a typo cannot start a million threads at once; 0 is "theirs".
CLI::Validator machine_threads();

// --blas-core auto | keep | NAME (harness/reference/blas.h): which OpenBLAS
// core LibTorch's matmul runs on, chosen before the command's work.
void add_blas_core_flag(CLI::App& app, std::string& mode);

}  // namespace conform::cli

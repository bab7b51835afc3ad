// harness/run/runner.h — carrying out a plan: every case on every chosen
// implementation, judged against the reference (or a fixture's expected
// values), the first failure per (op, implementation) shrunk and explained,
// failures saved as fixtures on request, everything into one RunReport.
//
// The shrink rule under sharding: a shard's first failure (per op and
// implementation) is the run's first only if no case of another shard
// before it fails too, and only the run's first is shrunk; so the merged
// shards report exactly what the unsharded run does.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"
#include "run/plan.h"

namespace conform::run {

// Which failures are diagnosed (--diagnose). The first failure of each op and
// implementation is shrunk and diagnosed in full whatever the mode (but
// none); `first` checks each later failure against the bugs already named
// for that op and implementation (a few reference runs) and diagnoses in
// full only one that none of them explains — at most kMaxDiagnosed per op
// and implementation; `all` diagnoses every failure in full; `none` shrinks
// and diagnoses nothing: the verdict and the metrics only.
enum class DiagnoseMode { all, first, none };
std::optional<DiagnoseMode> parse_diagnose_mode(const std::string& s);
constexpr int kMaxDiagnosed = 3;

struct RunOptions {
    DiagnoseMode diagnose = DiagnoseMode::first;
    gen::ShrinkLimits shrink{400, 30.0};  // per failure shrunk
    std::string save_failures;  // directory: every failing property case, shrunk, as a one-case fixture
    bool force = false;         // --save-failures may overwrite
    std::string replay_flags;   // appended to every replay command (" --dtype bf16 --simd-target avx2")
    // --weights: called as each checkpoint layer is loaded, with its weights' and stream's statistics.
    std::function<void(const LayerStats&)> on_layer;
    // --require-twists: twists every implementation must declare for the ops that read them.
    std::vector<const Twist*> require_twists;
};

struct Outcome {
    RunReport report;
    std::map<size_t, std::string> shrunk_from;  // result index -> the drawn case a shrunk one came from
    std::vector<std::string> saved;             // --save-failures: "saved: PATH\n  replay: ..." per file
    bool save_failed = false;                   // a save failed for a reason other than the case itself
};

// Called after each case (all its implementations): cases done, failures so far.
using OnCase = std::function<void(int done, int failures)>;

Outcome execute(const Plan& plan, ImplSet& impls, const RunOptions& o, const OnCase& on_case = {});

// The conform-report/1 document of an outcome, with what identifies the run
// (params, shard, shrunk_from; `config` given by the caller) for merge-reports.
nlohmann::json report_json(const Outcome& out, const Plan& plan, const nlohmann::json& config = nullptr);

// A property case as a run sees it: drawn, rounded to the dtype, validated.
// A generated case that fails validation is conform's bug, not the user's:
// std::logic_error (exit 70), never InputError.
Case property_case(const gen::CaseSpec& spec, DType dtype);

// One implementation on one case, judged: a thrown error or a broken buffer
// contract is a failed result with its reason; the result names impl and origin.
struct Judged {
    ImplOutputs out;
    CaseResult result;
};
Judged run_and_judge(Implementation& impl, const std::string& name, const Case& c, DType dtype, const Truth& truth);

}  // namespace conform::run

// harness/report/merge.h — conform merge-reports: the JSON reports of a
// sharded run (--shard i/n, or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS, one per CI
// runner) joined into the report the unsharded run would have written.
//
// The shards must be one run: the same schema and identity fields (seed,
// cases per op, dtype, implementations, ops, --params, fixture files, model
// config), every shard of the same total exactly once, and no case in two of
// them. Anything else is a MergeError naming the file and the field.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace conform::report {

// A report that is not a shard of this run, or not a report (exit 2).
struct MergeError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The fields of a report that identify a run: shards of one run agree on every one.
const std::vector<std::string>& run_identity_fields();

// The merged conform-report/1 document of the shards at `paths` (their
// cases in the gate's order, error maps kept as the gate keeps them, not-run
// and nothing-ran entries summed, "merged_from" naming the shards).
nlohmann::json merge_reports(const std::vector<std::string>& paths);

// The terminal summary of a merged report: op × impl, cases and passes, each
// failure's replay, and the totals.
std::string merge_summary(const nlohmann::json& merged);

}  // namespace conform::report

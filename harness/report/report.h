// harness/report/report.h — what a run tells people (terminal) and machines (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/phases.h"
#include "judge/judge.h"

namespace conform {

struct RunReport {
    uint64_t seed = 0;
    int cases_per_op = 0;
    std::vector<std::string> impls;
    std::vector<std::string> ops;
    std::string dtype = "f32";
    std::vector<std::string> fixtures;  // files read
    std::vector<CaseResult> results;
    double seconds = 0;
    // Cases an implementation declined through supports() — never silently:
    // a plugin without RoPE scaling must not look like it passed scaled cases.
    struct NotRun {
        std::string impl, op, reason;  // the first reason given
        int cases = 0;
    };
    std::vector<NotRun> not_run;
    void add_not_run(const std::string& impl, const std::string& op, const std::string& reason);
    // Implementations that were asked to run and had no case judged (every
    // case declined): a run that ran nothing has passed nothing. The reason
    // joins their not_run entries.
    // And per op: an op an implementation offers, with property cases
    // drawn, none of them judged (declined through supports(), while it
    // answers the fixture cases it could read the answers of): that op ran
    // nothing, and the implementation does not pass.
    struct NothingRan {
        std::string impl, op, reason;  // op "": no case of any op
    };
    std::vector<NothingRan> nothing_ran;
    void add_nothing_ran(const std::string& impl, const std::string& op = "");
    // The twists an implementation does not declare (conform/twists.h), per
    // op of the run that reads them: it was offered no case with one on, and
    // its property cases were drawn without them. Listed, never silent.
    struct NotOffered {
        std::string impl, op;
        std::vector<std::string> twists;
    };
    std::vector<NotOffered> not_offered;
    // --require-twists: each twist asked for that an implementation does not
    // declare for an op that reads it ("impl op: twist"); the run does not pass.
    std::vector<std::string> missing_twists;
    // Each worker's calls, repeats and restarts: a worker restarted after a
    // crash between cases (in a supports request) fails no case, and must
    // not pass in silence.
    struct WorkerStats {
        std::string impl;
        int calls = 0, repeats = 0, restarts = 0;
    };
    std::vector<WorkerStats> workers;
    // Where the run's time went (harness/core/phases.h): reading, drawing,
    // the reference and baselines, each implementation, judging, diagnosis.
    std::vector<phases::Phase> phases;

    // Every case passed, and every implementation asked for had a case judged.
    bool all_pass() const;
};

// op × impl table: cases run, passed, worst error vs bound, margin; then each failure.
void print_summary(std::ostream& os, const RunReport& r);
void print_failure(std::ostream& os, const CaseResult& c);
// The phases, largest first, with their share of the total (conform --verbose).
void print_phases(std::ostream& os, const RunReport& r);

nlohmann::json to_json(const ErrorMap& m);  // reports/README.md, "error_map"
nlohmann::json to_json(const CaseResult& c);
nlohmann::json to_json(const RunReport& r);  // "schema": "conform-report/1"

// Writes atomically (temporary file, then rename). Throws with the path on failure.
void write_file_atomic(const std::string& path, const std::string& content);

// A file, as the file system knows it.
struct FileId {
    uint64_t dev = 0, ino = 0;
    bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};
// The same, into the directory dirfd refers to (`shown` names the file in
// messages); returns the file written.
FileId write_file_atomic_at(int dirfd, const std::string& name, const std::string& content, const std::string& shown);

}  // namespace conform

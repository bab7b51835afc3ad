// harness/run/plan.h — what a run will do, decided before anything runs:
// which implementations (made and ready), which property cases (draws of a
// gen::Stream per op, after --params and the shard), which fixture cases.
// The gate, `conform coverage` and `conform mutants` plan through here, and
// `conform merge-reports` checks shards against the same run identity, so
// what coverage counts is what the gate runs.
//
// Errors are thrown, never printed: InputError (a bad case id, fixture file,
// --params that selects nothing: exit 2) and UnavailableError (a named
// implementation this machine cannot run: exit 3).
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/case.h"
#include "gen/gen.h"
#include "worker/client.h"
#include "run/real.h"
#include "run/select.h"

namespace conform::run {

// A named implementation that cannot run on this machine (exit 3).
struct UnavailableError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- implementations ---------------------------------------------------------------

struct ImplRequest {
    std::vector<std::string> names;  // empty: the workers given, else every available gate implementation
    bool names_explicit = false;     // named by the user: unavailable is then an error, not a skip
    ImplOptions options;             // dtype, simd target, threads
    std::vector<std::string> impl_libs;  // --impl-lib: C plugins (conform/plugin.h), each hosted by conform-worker
    std::vector<std::string> impl_cmds;  // --impl-cmd: commands speaking the worker protocol (impls/WORKERS.md)
    std::vector<std::string> impl_fds;   // --impl-fd R,W: a worker conform did not start, on inherited descriptors
    bool has_workers() const { return !impl_libs.empty() || !impl_cmds.empty() || !impl_fds.empty(); }
    bool isolate = false;                // --isolate: the in-repo implementations in workers too
    // Worker limits (impls/WORKERS.md): per call, memory (0: the default for
    // the kind), CPU time; the seed of the repeated calls and the poison.
    double call_timeout_s = 120;
    uint64_t worker_memory = 0;
    uint64_t worker_cpu_s = 3600;
    std::optional<uint64_t> seed;  // none: from the clock
    // Calls repeated to check they are deterministic (bench: 0, since it
    // checks the outputs itself and a repeat would be timed too).
    double repeat_fraction = 0.125;
};

struct Chosen {
    std::string name;
    std::unique_ptr<Implementation> impl;
    std::string replay_flags;  // what a replay command needs to find it again (" --impl-lib PATH")
    worker::WorkerImpl* worker = nullptr;  // impl, when it is a worker process (bench, stats)
};

struct ImplSet {
    std::vector<Chosen> impls;
    std::vector<std::string> skipped;  // "cuda: no CUDA device visible", not named and unavailable
    Chosen* find(const std::string& name);
};

// The default memory limit of a plugin worker: 16 GiB or half this machine's memory, the smaller.
uint64_t default_plugin_memory();

// Starts the workers (their names come from their hello), looks each name up
// and makes the implementation. Throws InputError (unknown name, a library
// that is not a plugin, a name taken twice) or UnavailableError (a named
// implementation or a worker that cannot run here).
ImplSet choose_implementations(const ImplRequest& r);

// ---- cases -------------------------------------------------------------------------

struct Selection {
    std::vector<Op> ops;  // empty: every op
    int cases = 100;      // property cases per op
    uint64_t seed = 0;
    DType dtype = DType::f32;
    std::string params;   // --params regex over case ids ("" = every case)
    select::Shard shard;
    std::string case_id;  // replay one property case
    std::vector<std::string> fixtures;  // --fixtures: files or directories (replace the regression set)
    bool default_fixtures = true;       // without --fixtures: the repo's fixtures/ (not with --case)
    std::string fixture_case;           // only fixture cases whose group has this name
    // --preset / --config: every property case pinned to this block (widths
    // already scaled down unless --full-size); the regression set then runs
    // only when named.
    std::optional<BlockConfig> pin;
    // --weights: the checkpoint whose layers the property cases take (the
    // pin is its configuration, at full size); its layers, one at a time.
    std::shared_ptr<RealModel> real;
    int64_t max_rows = 0;  // gen::Stream::max_rows: --max-rows, for full-size runs
};

// The fixture cases a run takes: the files given (or the default set), the
// selected ops, --fixture-case, --params and the shard.
struct FixtureSelection {
    std::vector<Case> cases;          // in this shard
    std::vector<std::string> files;   // every file read
    std::vector<std::string> paths;   // as given, or the default directory
    bool by_default = false;          // the repo's regression set, not named by the user
    size_t before_shard = 0;          // selected cases before sharding
};

struct OpPlan {
    Op op;
    int64_t layer = -1;                 // --weights: the checkpoint layer its cases take
    gen::Stream stream;                 // what a property case of this op is drawn from (and shrunk in): its
                                        // twists the declared ones of the implementations it is for
    std::vector<select::Pick> picks;    // property cases in this shard
    std::vector<select::Pick> outside;  // matching cases of the other shards (the first failure's rule)
    int matched = 0;                    // property cases matching --params, before sharding
    int drawn = 0;                      // draws looked at
    std::vector<std::string> impls;     // the implementations it is drawn for; empty: every one
    bool for_impl(const std::string& name) const {
        return impls.empty() || std::find(impls.begin(), impls.end(), name) != impls.end();
    }
};

struct Plan {
    Selection selection;
    std::vector<OpPlan> ops;
    FixtureSelection fixtures;
    int total_cases = 0;  // property + fixture cases in this shard (the progress line's total)
    int fixture_cases(Op op) const;
};

// Throws InputError with the message for the user (exit 2).
Plan make_plan(const Selection& s);

// Asked only what it declares: an op whose implementations declare different
// twists (Implementation::twists) is drawn once per declaration, each with
// the run's --cases, from the same seed — so an undeclared twist costs an
// implementation no case, and implementations that declare every twist run
// the cases they always did. A --case replay stays one case for all.
void plan_for(Plan& plan, const ImplSet& impls);

// The repo's regression fixtures directory, spelled "fixtures" when run from
// the source tree; "" when there is none.
std::string default_fixture_dir();

}  // namespace conform::run

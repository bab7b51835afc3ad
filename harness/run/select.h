// harness/run/select.h — which cases a run takes: the --params filter,
// sharding, and the trap dimensions a case reaches; and the progress line.
//
// The gate and `conform coverage` both select through here, so coverage is
// true of what the gate runs.
//
//   --params REGEX   keeps the cases whose canonical id matches (a search, not
//                    a full match: `layout=interleaved`, `theta=500000\b`;
//                    matched in time linear in the id, core/pattern.h).
//                    Property cases are drawn until N match (at most
//                    kMaxDraws draws per op), so `--cases 100 --params X`
//                    still runs 100 cases of X when the generators reach it.
//                    A fixture case is matched on "<file name>:/<group> " plus
//                    an id of the same keys built from its config and inputs.
//   --shard i/n      (or TEST_SHARD_INDEX / TEST_TOTAL_SHARDS) keeps the cases
//                    whose id hashes to i mod n: shards are disjoint, their
//                    union is the unsharded run, whatever the implementations.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/case.h"
#include "core/pattern.h"
#include "gen/gen.h"

namespace conform::select {

// ---- --params ----------------------------------------------------------------------

class ParamFilter {
public:
    // Empty pattern: everything matches. Throws PatternError on a bad pattern
    // (core/pattern.h: ECMAScript's syntax, matched in linear time).
    explicit ParamFilter(const std::string& pattern = "");
    bool active() const { return !pattern_.empty(); }
    const std::string& pattern() const { return pattern_; }
    bool matches(const std::string& text) const;

private:
    std::string pattern_;
    std::optional<Pattern> re_;
};

// Why a pattern does not compile, in words ("" when it does).
std::string regex_problem(const std::string& pattern);

// A fixture case described by the keys a property id of its op carries
// (without mag / outliers / seed, which a fixture does not have); pos is the
// first position.
gen::CaseSpec spec_of(const Case& c);
std::string params_text(const Case& fixture_case);

// ---- sharding ----------------------------------------------------------------------

struct Shard {
    int index = 0;
    int total = 1;
    bool active() const { return total > 1; }
};

// "i/n" with 0 <= i < n; nullopt with the reason otherwise.
std::optional<Shard> parse_shard(const std::string& text, std::string* error);

// The shard from --shard (may be empty) and TEST_SHARD_INDEX /
// TEST_TOTAL_SHARDS (null when unset). Both given must agree; an env pair
// must be complete. nullopt with the reason on any inconsistency.
std::optional<Shard> resolve_shard(const std::string& flag, const char* env_index, const char* env_total,
                                   std::string* error);

// Which shard a case belongs to: FNV-1a of its key (a property case's
// canonical id; a fixture case's file path and group) mod n. Equal ids go
// to the same shard, so even a repeated draw cannot straddle two shards.
int shard_of(const std::string& key, int total);
bool in_shard(const std::string& key, const Shard& s);
std::string fixture_key(const Case& c);

// Bazel / gtest: a test runner that understands sharding touches this file.
void touch_shard_status_file(const char* path);

// ---- property cases ------------------------------------------------------------------

inline constexpr int kMaxDraws = 20000;  // per op, when --params skips draws

struct Pick {
    int index = 0;  // the draw's index: gen::draw(stream, index), and what shrinking replays
    gen::CaseSpec spec;
    std::string id;
};

struct PropertySelection {
    std::vector<Pick> picks;    // in this shard
    std::vector<Pick> outside;  // matching, in the other shards (the gate asks whether one failed first)
    int matched = 0;            // matching --params, before sharding (<= cases)
    int drawn = 0;              // draws looked at
};

// The first `cases` draws that match `params` (all of them without a
// filter), then those in the shard.
PropertySelection select_property(const gen::Stream& stream, int cases, const ParamFilter& params, const Shard& shard);

// ---- trap dimensions (conform coverage) --------------------------------------------------

// One dimension of the traps, its classes, and the ops it applies to.
struct Dimension {
    std::string name;
    std::vector<std::string> classes;
    std::vector<Op> ops;
    bool relevant(Op op) const;
};
const std::vector<Dimension>& dimensions();

// The classes a case reaches, per dimension (same order as dimensions(); an
// empty list where the dimension does not apply). `c` is the case as it runs
// (gen::materialize, or a fixture's): its config and real positions.
std::vector<std::vector<int>> classes_of(const Case& c);
int64_t max_position(const Case& c);  // over every position input

// ---- progress ------------------------------------------------------------------------

// "[ 120/ 740] 16%  2 failed  0:12 elapsed  ETA 1:03"
std::string progress_text(int done, int total, int failures, double elapsed_s);

// One line on a terminal, rewritten in place at most ~10 times a second and
// cleared by finish(). Writes nothing when disabled.
class Progress {
public:
    Progress(std::ostream& os, bool enabled, int total);
    ~Progress();
    void update(int done, int failures);
    void finish();

private:
    std::ostream& os_;
    bool enabled_;
    int total_;
    bool shown_ = false;
    std::chrono::steady_clock::time_point start_, last_;
};

// Whether progress lines belong on stderr: a terminal, and not disabled.
bool progress_wanted(bool quiet, bool json);

}  // namespace conform::select

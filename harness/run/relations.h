// harness/run/relations.h — what a paged batch's outputs must satisfy
// whatever their values, checked on the implementation alone, without the
// reference: a sequence's rows are the same alone and in the batch
// (batch_alone), when its pages move elsewhere in the pool
// (pages_relocated), when the batch is reordered (batch_permuted), when its
// queries come in two calls — a chunk, then the rest over the longer cache:
// chunked prefill, and prefill then a decode step (chunked) — when the rows
// no one owns hold huge finite values instead of NaN (poison_finite: a
// kernel that reads them but masks NaN), and on a second run (repeat). Each
// is a check of its own, reported as its own row of the table
// ("<impl> relations") and its own cases in the report.
//
// Bitwise where the implementation declares batch invariance
// (Implementation::batch_invariant), within twice the case's tolerance
// otherwise (two outputs each within it of the truth); the first element
// that breaks one is reported with the difference in ulps.
#pragma once

#include <string>
#include <vector>

#include "judge/judge.h"

namespace conform::run {

// The relations checked on a case of an op that pages (kPaged), one
// CaseResult each (impl "<name> relations", origin "relation"); empty for
// another op. `outputs`: the implementation's outputs on c, judged already.
// c is borrowed: its caches are lent to the derived calls, and the two
// relations that change them change them in place and undo it (a serving
// pool is GBs; copies of it were most of the relations' time). c is as it
// was when this returns.
std::vector<CaseResult> check_relations(Implementation& impl, const std::string& name, Case& c, DType dtype,
                                        const NamedD& outputs, const Truth& truth);

// The derived cases, for tests: a case and, for each of its query rows, the
// row of the original case it must reproduce.
struct Derived {
    Case c;
    std::vector<int64_t> rows;  // rows[r]: the original row of derived row r
};
Derived sequence_alone(const Case& c, int64_t b);
Derived pages_relocated(const Case& c, uint64_t seed);
Derived batch_reversed(const Case& c);
// Sequence b's first `first` queries over its keys but the last q_len - first
// (the chunk before), and the rest over all its keys (the call after): two
// cases, rows of b each.
std::pair<Derived, Derived> sequence_chunked(const Case& c, int64_t b, int64_t first);
// The poison replaced by huge finite values (±1e30, by row).
Derived poison_finite(const Case& c);

}  // namespace conform::run

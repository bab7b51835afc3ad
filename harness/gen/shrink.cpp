// The draw of case n of a stream (RapidCheck's random stream per op, seed
// and index), and shrinking: RapidCheck's shrinks of the spec, then a paged
// batch's own (fewer sequences, pages, queries).
#include <chrono>

#include <rapidcheck.h>

#include "gen/detail.h"

namespace conform::gen {

using detail::batch_totals;
using detail::kPageSizes;
using detail::pages_needed;

namespace {

// A paged batch with these sequences.
CaseSpec with_batch(CaseSpec s, std::vector<int64_t> kv, std::vector<int64_t> q) {
    s.kv_lens = std::move(kv);
    s.q_lens = std::move(q);
    batch_totals(s);
    return s;
}

// Smaller batches than s, most reduced first: a sequence dropped; a
// sequence a page shorter (its last page's length kept: the boundary a bug
// may need), or down to that last page alone; its queries down to one, or
// one fewer; pages one size larger (fewer of them). Every candidate has a
// query somewhere, and no sequence more queries than keys.
std::vector<CaseSpec> smaller_batches(const CaseSpec& s) {
    std::vector<CaseSpec> out;
    const int64_t P = s.config.page_size, B = static_cast<int64_t>(s.kv_lens.size());
    auto add = [&](std::vector<int64_t> kv, std::vector<int64_t> q) {
        if (std::all_of(q.begin(), q.end(), [](int64_t n) { return n == 0; })) return;
        for (size_t b = 0; b < kv.size(); ++b) q[b] = std::min(q[b], std::max<int64_t>(kv[b], std::min<int64_t>(q[b], 1)));
        out.push_back(with_batch(s, std::move(kv), std::move(q)));
    };
    for (int64_t b = 0; b < B && B > 1; ++b) {
        auto kv = s.kv_lens, q = s.q_lens;
        kv.erase(kv.begin() + b);
        q.erase(q.begin() + b);
        add(kv, q);
    }
    for (int64_t b = 0; b < B; ++b) {
        const int64_t kv_b = s.kv_lens[static_cast<size_t>(b)];
        if (kv_b <= P) continue;
        const int64_t tail = (kv_b - 1) % P + 1;  // its last page's rows
        for (int64_t shorter : {tail, kv_b - P}) {
            if (shorter == kv_b - P && shorter == tail) break;  // two pages: the one candidate already added
            auto kv = s.kv_lens;
            kv[static_cast<size_t>(b)] = shorter;
            add(kv, s.q_lens);
        }
    }
    for (int64_t b = 0; b < B; ++b) {
        const int64_t q_b = s.q_lens[static_cast<size_t>(b)];
        if (q_b <= 1) continue;
        for (int64_t fewer : {int64_t{1}, q_b - 1}) {
            if (fewer == q_b - 1 && fewer == 1) break;  // two queries: the one candidate already added
            auto q = s.q_lens;
            q[static_cast<size_t>(b)] = fewer;
            add(s.kv_lens, q);
        }
    }
    for (int64_t larger : kPageSizes)
        if (larger > P) {
            CaseSpec t = s;
            t.config.page_size = larger;
            out.push_back(std::move(t));
            break;
        }
    return out;
}

// RapidCheck shrinks a batch by dropping sequences and by each sequence's
// drawn choices, which need not make it shorter: a length drawn among
// 41..599 shrinks to 41, three pages of 16. Then the batch itself, greedily:
// the first smaller batch that still fails is taken, until none does (or the
// limits are reached), so a bug that needs two sequences of one page each
// ends there.
void shrink_batch(Shrunk& out, const std::function<bool(const CaseSpec&)>& still_fails, const ShrinkLimits& limits,
                  const std::function<double()>& elapsed) {
    for (bool progressed = true; progressed;) {
        progressed = false;
        for (const CaseSpec& candidate : smaller_batches(out.spec)) {
            if (out.tried >= limits.max_tries) return void(out.stopped = Shrunk::Stop::tries);
            if (limits.max_seconds > 0 && elapsed() > limits.max_seconds) return void(out.stopped = Shrunk::Stop::time);
            // Only what is smaller: fewer sequences, pages or queries.
            if (candidate.kv_lens.size() == out.spec.kv_lens.size() && pages_needed(candidate) >= pages_needed(out.spec) &&
                candidate.T >= out.spec.T && candidate.S >= out.spec.S)
                continue;
            ++out.tried;
            if (still_fails(candidate)) {
                out.spec = candidate;
                ++out.steps;
                progressed = true;
                break;
            }
        }
    }
}

rc::Random random_for(Op op, uint64_t seed, int index) {
    return rc::Random(seed * 1000003ull + static_cast<uint64_t>(op) * 7919ull + static_cast<uint64_t>(index));
}
// RapidCheck's size grows over a run (small cases first); so do ours.
int size_for(int index) { return std::min(100, 10 + index); }
}  // namespace

CaseSpec draw(const Stream& s, int index) {
    return spec_gen(s)(random_for(s.op, s.seed, index), size_for(index)).value();
}

Shrunk shrink(const Stream& s, int index, const std::function<bool(const CaseSpec&)>& still_fails,
              const ShrinkLimits& limits) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    auto current = spec_gen(s)(random_for(s.op, s.seed, index), size_for(index));
    Shrunk out{current.value(), 0, 0};
    bool progressed = true;
    while (progressed && out.stopped == Shrunk::Stop::done) {
        progressed = false;
        auto shrinks = current.shrinks();
        while (auto next = shrinks.next()) {
            if (out.tried >= limits.max_tries) {
                out.stopped = Shrunk::Stop::tries;
                break;
            }
            if (limits.max_seconds > 0 && elapsed() > limits.max_seconds) {
                out.stopped = Shrunk::Stop::time;
                break;
            }
            ++out.tried;
            const CaseSpec candidate = next->value();
            if (still_fails(candidate)) {
                current = std::move(*next);
                out.spec = candidate;
                ++out.steps;
                progressed = true;
                break;
            }
        }
    }
    if (op_info(out.spec.op).uses(kPaged) && out.stopped == Shrunk::Stop::done)
        shrink_batch(out, still_fails, limits, elapsed);
    out.seconds = elapsed();
    return out;
}

}  // namespace conform::gen

// harness/gen/detail.h — what the generator's files share (not an interface:
// gen.h is). The generator is four files, one job each:
//   draw.cpp         a case's spec drawn (RapidCheck), the twists' draws (conform/twists.h), a pinned stream
//   ids.cpp          canonical ids and their parser
//   materialize.cpp  a spec's tensors, drawn from its seed
//   shrink.cpp       the draw of case n of a stream, and shrinking (RapidCheck's, then a paged batch's)
#pragma once

#include <array>
#include <cstdint>
#include <numeric>

#include "gen/gen.h"

namespace conform::gen::detail {

// Page sizes as engines use them (vLLM 16, FlashInfer 1 to 256,
// llama.cpp-like 5); shrinking a batch takes the next larger.
constexpr std::array<int64_t, 7> kPageSizes = {1, 5, 8, 16, 64, 128, 256};

// Pages a paged batch needs, and the pool it is drawn from (CaseSpec::pool
// times as many, and one more, so that a batch of empty sequences still has a cache).
inline int64_t pages_needed(const CaseSpec& s) {
    int64_t n = 0;
    for (int64_t kv : s.kv_lens) n += (kv + s.config.page_size - 1) / s.config.page_size;
    return n;
}
inline int64_t pool_pages(const CaseSpec& s) { return s.pool * pages_needed(s) + 1; }

// A batch's T and S, from its sequences' queries and keys.
inline void batch_totals(CaseSpec& s) {
    s.T = std::accumulate(s.q_lens.begin(), s.q_lens.end(), int64_t{0});
    s.S = std::max<int64_t>(1, std::accumulate(s.kv_lens.begin(), s.kv_lens.end(), int64_t{0}));
}

// The spec of a stream's next case (what spec_gen runs inside RapidCheck).
CaseSpec make(const Stream& st);

}  // namespace conform::gen::detail

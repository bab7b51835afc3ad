// tests/fuzz_mutate.h — what the two fuzzers (fuzz_fixtures.cpp,
// fuzz_weights.cpp) share: a size drawn from core's Rng, and the byte
// mutator that damages a valid file's bytes. Header-only, over core/rng.h
// alone: the fuzzers are built under the sanitizers with only their own
// copies of the code they test (tests/CMakeLists.txt).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "core/rng.h"

namespace conform::test {

// A size in [0, n), n == 0 giving 0 (Rng::below takes int64_t and divides by
// n): next() % n, the same draw as Rng::below for every n > 0.
inline size_t below(Rng& r, size_t n) { return n ? static_cast<size_t>(r.next() % n) : 0; }

// How far byte_edit reaches: `head`, the prefix where half the edits land
// (where a format's headers and metadata sit); the longest run of random,
// filled or copied bytes; the most garbage bytes appended.
struct ByteEditSizes {
    size_t head;
    size_t random_run;
    size_t fill_run;
    size_t copy_run;
    size_t append;
};

// Damages b (std::string or std::vector<char>) with one of seven edits drawn
// from r: truncation, flipped bits, random bytes, a run of 0x00 or 0xff, one
// byte replaced, garbage appended, a block copied over another. Returns what
// it did, for the failure message.
template <class Bytes>
std::string byte_edit(Bytes& b, Rng& r, const ByteEditSizes& z) {
    const size_t n = b.size();
    if (n == 0) return "empty";
    auto spot = [&] { return below(r, 2) ? below(r, std::min(n, z.head)) : below(r, n); };
    switch (below(r, 7)) {
        case 0: {
            const size_t len = below(r, 3) == 0 ? below(r, std::min<size_t>(n, 64)) : below(r, n);
            b.resize(len);
            return "truncated to " + std::to_string(len) + " bytes";
        }
        case 1: {
            const size_t k = 1 + below(r, 8);
            for (size_t i = 0; i < k; ++i) b[spot()] ^= static_cast<char>(1u << below(r, 8));
            return std::to_string(k) + " bits flipped";
        }
        case 2: {
            const size_t at = spot(), len = std::min(n - at, 1 + below(r, z.random_run));
            for (size_t i = 0; i < len; ++i) b[at + i] = static_cast<char>(r.next());
            return std::to_string(len) + " random bytes at " + std::to_string(at);
        }
        case 3: {
            const size_t at = spot(), len = std::min(n - at, 1 + below(r, z.fill_run));
            const char fill = below(r, 2) ? '\0' : '\xff';
            std::memset(b.data() + at, fill, len);
            return std::to_string(len) + (fill ? " 0xff" : " zero") + " bytes at " + std::to_string(at);
        }
        case 4: {
            const size_t at = spot();
            b[at] = static_cast<char>(r.next());
            return "byte " + std::to_string(at) + " replaced";
        }
        case 5: {
            const size_t k = 1 + below(r, z.append);
            for (size_t i = 0; i < k; ++i) b.push_back(static_cast<char>(r.next()));
            return std::to_string(k) + " garbage bytes appended";
        }
        default: {
            // A block of the file copied over another (plausible-looking metadata in the wrong place).
            const size_t from = below(r, n), to = spot(), len = std::min({n - from, n - to, 1 + below(r, z.copy_run)});
            std::memmove(b.data() + to, b.data() + from, len);
            return std::to_string(len) + " bytes copied from " + std::to_string(from) + " to " + std::to_string(to);
        }
    }
}

}  // namespace conform::test

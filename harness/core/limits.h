// harness/core/limits.h — the largest size conform accepts where a file or
// flag declares one, checked before any loop or allocation proportional to
// it (docs/inputs.md lists them with every other input bound). Each is far
// past any served model; in parentheses the largest known.
#pragma once

#include <cstdint>

namespace conform::limits {

inline constexpr int64_t kLayers = int64_t{1} << 12;    // 4096 (Llama 3.1 405B: 126)
inline constexpr int64_t kWidth = int64_t{1} << 20;     // hidden, FFN and H * head_dim (405B: 16384, 53248)
inline constexpr int64_t kHeads = int64_t{1} << 12;     // attention and kv heads (405B: 128)
inline constexpr int64_t kHeadDim = int64_t{1} << 12;   // (Gemma 3: 256; MLA's absorbed 576)
inline constexpr int64_t kVocab = int64_t{1} << 24;     // (Gemma 3: 262144)
inline constexpr int64_t kExperts = int64_t{1} << 12;   // (Kimi K2: 384)
inline constexpr int64_t kPosition = int64_t{1} << 40;  // positions and contexts (case ids' bound too)
inline constexpr int64_t kTokens = int64_t{1} << 24;    // tokens of one forward (a 16M-token prompt)

}  // namespace conform::limits

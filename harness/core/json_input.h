// harness/core/json_input.h — JSON conform is given (config.json, an index,
// a safetensors header, a shard report, a worker's frame), bounded before it
// is parsed and shown in messages without being trusted.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace conform {

// Nesting past any file conform reads (HF configs nest 3 deep). Printing or
// copying a value recurses once per level, so a value nested 200,000 deep
// (400 KB of brackets) would overflow the stack after it parsed.
inline constexpr int kMaxJsonDepth = 64;

// Why `text` must not be parsed ("" when it may): nested deeper than
// max_depth, or holding more than max_values values (strings, containers and
// commas counted; a parse is linear in them, but five million empty objects
// in 16 MB still take minutes). One pass, no recursion, no allocation.
std::string json_shape_problem(std::string_view text, int max_depth, uint64_t max_values);

// A JSON value for a message: at most `max` characters of its compact form
// ("..." where cut), built without recursion and without printing more than
// that — a 20 MB string or a million-entry array shows its start.
std::string shown(const nlohmann::json& v, size_t max = 80);

}  // namespace conform

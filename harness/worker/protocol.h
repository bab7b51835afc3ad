// harness/worker/protocol.h — the worker protocol's frames and messages
// (impls/WORKERS.md): "CFWK", a u32 header length, a u64 payload length, a
// JSON header, then the raw little-endian bytes of the tensors it lists.
// Shared by the judge's client (client.h) and the C-side worker (server.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/impl.h"

namespace conform::worker {

inline constexpr int kProtocol = 1;
inline constexpr uint32_t kMagic = 0x4B574643u;  // "CFWK" as little-endian bytes
inline constexpr uint64_t kMaxHeader = uint64_t(16) << 20;
inline constexpr uint64_t kMaxPayload = uint64_t(64) << 30;
inline constexpr int kMaxDepth = 32;  // of a header's JSON
// Values in a header's JSON (strings, containers, and one per comma): a call
// of a block lists about twenty tensors; a result a dozen.
inline constexpr uint64_t kMaxHeaderValues = 65536;

// A message that is not what the protocol says: the field, and what was found.
struct ProtocolError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// The other side went away (EOF on the pipe) or did not answer in time.
struct Closed : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct TimedOut : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Wire { f32, bf16, f16, i64, i32 };
const char* to_string(Wire w);
std::optional<Wire> parse_wire(const std::string& s);
size_t itemsize(Wire w);
Wire wire_of(DType d);

struct WireTensor {
    std::string name;
    Wire dtype = Wire::f32;
    std::vector<int64_t> shape;
    std::string bytes;  // prod(shape) * itemsize, row-major, little-endian

    int64_t numel() const;
};

struct Frame {
    nlohmann::json header;
    std::vector<WireTensor> tensors;  // the header's "inputs" (a call) or "outputs" (a result), with their bytes
};

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// Writes one frame: header["inputs" or "outputs"] (`list`) is filled from
// `tensors`. Throws Closed when the pipe is gone, TimedOut when a
// non-blocking fd stays full past the deadline.
void write_frame(int fd, nlohmann::json header, const std::vector<WireTensor>& tensors, const char* list,
                 const Deadline& deadline = std::nullopt);

// Reads one frame; the tensors are those the header lists under `list`
// ("inputs", "outputs"; nullptr: none expected). Throws ProtocolError
// naming the field, Closed on EOF (before or inside a frame), TimedOut past
// the deadline; a payload over max_payload bytes is refused before it is
// read (the judge passes what the request's outputs take), and so is a
// header nested deeper than kMaxDepth or holding more than kMaxHeaderValues values.
Frame read_frame(int fd, const char* list, const Deadline& deadline = std::nullopt,
                 uint64_t max_payload = kMaxPayload);

// Floats to the wire (the call's dtype; exact for values already rounded to
// it), and back to float32 (exact). Positions as i64; index arrays as i64
// or, where the worker asks for them so (its hello's index_dtype), i32:
// ProtocolError for a value past int32's range.
WireTensor to_wire(const std::string& name, const float* data, std::vector<int64_t> shape, Wire dtype);
WireTensor to_wire(const std::string& name, const int64_t* data, int64_t n, Wire dtype = Wire::i64);
// The tensor's values as float32 (f32/bf16/f16 only), row-major.
std::vector<float> widen(const WireTensor& t);
// The tensor's values as int64 (i64, or i32 widened).
std::vector<int64_t> as_i64(const WireTensor& t);

// A value a worker sent, for a message: JSON with every character past
// ASCII escaped (\uXXXX: no C1 control, bidi override or line separator
// reaches a terminal or a report as itself), at most `max` bytes.
std::string shown(const nlohmann::json& v, size_t max = 100);

// The block's configuration as the protocol carries it: every field,
// resolved (rotary_dim the dims actually rotated). And back (the C worker).
nlohmann::json config_to_json(const BlockConfig& c);
BlockConfig config_from_json(const nlohmann::json& j);  // throws ProtocolError naming the field

}  // namespace conform::worker

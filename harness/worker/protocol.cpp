#include "worker/protocol.h"

#include "core/json_input.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <type_traits>
#include <utility>

#include "conform/dtype.h"

namespace conform::worker {

using nlohmann::json;

const char* to_string(Wire w) {
    switch (w) {
        case Wire::f32: return "f32";
        case Wire::bf16: return "bf16";
        case Wire::f16: return "f16";
        case Wire::i64: return "i64";
        case Wire::i32: return "i32";
    }
    return "?";
}

std::optional<Wire> parse_wire(const std::string& s) {
    for (Wire w : {Wire::f32, Wire::bf16, Wire::f16, Wire::i64, Wire::i32})
        if (s == to_string(w)) return w;
    return std::nullopt;
}

size_t itemsize(Wire w) { return w == Wire::i64 ? 8 : w == Wire::f32 || w == Wire::i32 ? 4 : 2; }

Wire wire_of(DType d) { return d == DType::bf16 ? Wire::bf16 : d == DType::f16 ? Wire::f16 : Wire::f32; }

int64_t WireTensor::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

namespace {

// ---- raw I/O ---------------------------------------------------------------------

// All n bytes, or Closed / TimedOut. The fd may be non-blocking (the
// judge's end of a worker's stdin is): then a worker that stops reading
// costs the deadline, not forever.
void write_all(int fd, const void* data, size_t n, const Deadline& deadline) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int wait_ms = -1;
            if (deadline) {
                const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline -
                                                                                        std::chrono::steady_clock::now());
                if (left.count() <= 0)
                    throw TimedOut("the worker stopped reading its input (" + std::to_string(n) +
                                   " bytes of the request not sent)");
                wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
            }
            pollfd pfd{fd, POLLOUT, 0};
            if (::poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
                throw Closed(std::string("poll failed: ") + std::strerror(errno));
            continue;
        }
        if (w <= 0) throw Closed(std::string("the pipe is closed (") + std::strerror(errno) + ")");
        p += w;
        n -= static_cast<size_t>(w);
    }
}

// Exactly n bytes, or Closed / TimedOut.
void read_all(int fd, void* data, size_t n, const Deadline& deadline, const char* what) {
    char* p = static_cast<char*>(data);
    while (n > 0) {
        if (deadline) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline -
                                                                                    std::chrono::steady_clock::now());
            if (left.count() <= 0) throw TimedOut(std::string("no answer in time (waiting for ") + what + ")");
            pollfd pfd{fd, POLLIN, 0};
            const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) continue;  // the deadline check above decides
            if (r < 0) throw Closed(std::string("poll failed: ") + std::strerror(errno));
        }
        const ssize_t got = ::read(fd, p, n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 && errno == EAGAIN) continue;
        if (got <= 0) throw Closed(std::string("the pipe closed while reading ") + what);
        p += got;
        n -= static_cast<size_t>(got);
    }
}

}  // namespace

std::string shown(const json& v, size_t max) { return conform::shown(v, max); }

namespace {

template <typename T>
T get(const json& j, const char* field, const std::string& where) {
    if (!j.contains(field)) throw ProtocolError(where + field + ": missing");
    try {
        return j.at(field).get<T>();
    } catch (const json::exception&) {
        throw ProtocolError(where + field + ": wrong type, found " + shown(j.at(field)));
    }
}

}  // namespace

void write_frame(int fd, json header, const std::vector<WireTensor>& tensors, const char* list,
                 const Deadline& deadline) {
    uint64_t payload = 0;
    if (list) {
        json& l = header[list] = json::array();
        for (const auto& t : tensors) {
            l.push_back({{"name", t.name}, {"dtype", to_string(t.dtype)}, {"shape", t.shape}});
            payload += t.bytes.size();
        }
    }
    const std::string h = header.dump(-1, ' ', false, json::error_handler_t::replace);
    unsigned char pre[16];
    const uint32_t hl = static_cast<uint32_t>(h.size());
    for (int i = 0; i < 4; ++i) pre[i] = static_cast<unsigned char>(kMagic >> (8 * i));
    for (int i = 0; i < 4; ++i) pre[4 + i] = static_cast<unsigned char>(hl >> (8 * i));
    for (int i = 0; i < 8; ++i) pre[8 + i] = static_cast<unsigned char>(payload >> (8 * i));
    write_all(fd, pre, sizeof pre, deadline);
    write_all(fd, h.data(), h.size(), deadline);
    for (const auto& t : tensors) write_all(fd, t.bytes.data(), t.bytes.size(), deadline);
}

namespace {

// The parser's work bounded before it starts, in one linear pass: a header
// nested deeper than any message (printing or destroying a value nested a
// million deep would recurse through the stack), or holding more values than
// any message needs (five million empty objects, under the byte limit, kept
// the judge parsing for over ten minutes past a 3 s call timeout), is
// refused unparsed.
void check_header_shape(const std::string& h) {
    if (const std::string why = json_shape_problem(h, kMaxDepth, kMaxHeaderValues); !why.empty())
        throw ProtocolError("frame: header: " + why);
}

}  // namespace

Frame read_frame(int fd, const char* list, const Deadline& deadline, uint64_t max_payload) {
    unsigned char pre[16];
    read_all(fd, pre, sizeof pre, deadline, "a frame");
    uint32_t magic = 0, hl = 0;
    uint64_t pl = 0;
    for (int i = 0; i < 4; ++i) magic |= static_cast<uint32_t>(pre[i]) << (8 * i);
    for (int i = 0; i < 4; ++i) hl |= static_cast<uint32_t>(pre[4 + i]) << (8 * i);
    for (int i = 0; i < 8; ++i) pl |= static_cast<uint64_t>(pre[8 + i]) << (8 * i);
    if (magic != kMagic) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%02x %02x %02x %02x", pre[0], pre[1], pre[2], pre[3]);
        throw ProtocolError(std::string("frame: magic: expected 43 46 57 4b (\"CFWK\"), found ") + buf +
                            " (is something printing to the worker's stdout?)");
    }
    if (hl == 0 || hl > kMaxHeader)
        throw ProtocolError("frame: header length " + std::to_string(hl) + " is not in [1, " +
                            std::to_string(kMaxHeader) + "]");
    if (pl > kMaxPayload) throw ProtocolError("frame: payload length " + std::to_string(pl) + " is implausibly large");
    // Before a byte of it is read or allocated: a worker must not make the
    // judge allocate what it likes.
    if (pl > max_payload)
        throw ProtocolError("frame: payload length " + std::to_string(pl) + " is more than the " +
                            std::to_string(max_payload) + " bytes the request's outputs take");
    std::string h(hl, '\0');
    read_all(fd, h.data(), hl, deadline, "a frame's header");
    Frame f;
    check_header_shape(h);
    try {
        f.header = json::parse(h);
    } catch (const json::exception& e) {
        throw ProtocolError(std::string("frame: header: not JSON: ") + e.what());
    }
    if (!f.header.is_object()) throw ProtocolError("frame: header: expected a JSON object, found " + shown(f.header));
    if (!f.header.contains("type") || !f.header["type"].is_string())
        throw ProtocolError("frame: header: type: missing or not a string");
    uint64_t listed = 0;
    if (list && f.header.contains(list)) {
        const json& l = f.header[list];
        if (!l.is_array()) throw ProtocolError(std::string(list) + ": expected an array");
        for (size_t i = 0; i < l.size(); ++i) {
            const std::string where = std::string(list) + "[" + std::to_string(i) + "].";
            if (!l[i].is_object()) throw ProtocolError(where.substr(0, where.size() - 1) + ": expected an object");
            WireTensor t;
            t.name = get<std::string>(l[i], "name", where);
            const auto d = parse_wire(get<std::string>(l[i], "dtype", where));
            if (!d) throw ProtocolError(where + "dtype: expected f32, bf16, f16, i64 or i32, found " + shown(l[i]["dtype"]));
            t.dtype = *d;
            t.shape = get<std::vector<int64_t>>(l[i], "shape", where);
            uint64_t n = 1;
            for (int64_t s : t.shape) {
                if (s < 0 || s > (int64_t(1) << 40)) throw ProtocolError(where + "shape: dimension " + std::to_string(s));
                n *= static_cast<uint64_t>(s);
                if (n > kMaxPayload) throw ProtocolError(where + "shape: implausibly large");
            }
            listed += n * itemsize(t.dtype);
            f.tensors.push_back(std::move(t));
        }
    }
    if (listed != pl)
        throw ProtocolError("frame: payload length " + std::to_string(pl) + " is not the " + std::to_string(listed) +
                            " bytes its " + (list ? list : "header") + " list");
    for (auto& t : f.tensors) {
        t.bytes.resize(static_cast<size_t>(t.numel()) * itemsize(t.dtype));
        read_all(fd, t.bytes.data(), t.bytes.size(), deadline, "a frame's payload");
    }
    return f;
}

WireTensor to_wire(const std::string& name, const float* data, std::vector<int64_t> shape, Wire dtype) {
    WireTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    const size_t n = static_cast<size_t>(t.numel());
    t.bytes.resize(n * itemsize(dtype));
    if (dtype == Wire::f32) {
        std::memcpy(t.bytes.data(), data, n * 4);
    } else {
        for (size_t i = 0; i < n; ++i) {
            const uint16_t h = dtype == Wire::bf16 ? bf16_bits(data[i]) : f16_bits(data[i]);
            std::memcpy(t.bytes.data() + 2 * i, &h, 2);
        }
    }
    return t;
}

WireTensor to_wire(const std::string& name, const int64_t* data, int64_t n, Wire dtype) {
    WireTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = {n};
    if (dtype == Wire::i64) {
        t.bytes.assign(reinterpret_cast<const char*>(data), static_cast<size_t>(n) * 8);
        return t;
    }
    if (dtype != Wire::i32) throw ProtocolError(name + ": dtype: expected i64 or i32 for integers, found " + to_string(dtype));
    t.bytes.resize(static_cast<size_t>(n) * 4);
    for (int64_t i = 0; i < n; ++i) {
        if (data[i] < INT32_MIN || data[i] > INT32_MAX)
            throw ProtocolError(name + "[" + std::to_string(i) + "]: " + std::to_string(data[i]) + " does not fit i32");
        const int32_t v = static_cast<int32_t>(data[i]);
        std::memcpy(t.bytes.data() + 4 * i, &v, 4);
    }
    return t;
}

std::vector<float> widen(const WireTensor& t) {
    const size_t n = static_cast<size_t>(t.numel());
    std::vector<float> out(n);
    switch (t.dtype) {
        case Wire::f32: std::memcpy(out.data(), t.bytes.data(), n * 4); break;
        case Wire::bf16:
        case Wire::f16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, t.bytes.data() + 2 * i, 2);
                out[i] = t.dtype == Wire::bf16 ? bf16_float(h) : f16_float(h);
            }
            break;
        case Wire::i64:
        case Wire::i32: throw ProtocolError(t.name + ": dtype: expected a float dtype, found " + to_string(t.dtype));
    }
    return out;
}

std::vector<int64_t> as_i64(const WireTensor& t) {
    if (t.dtype != Wire::i64 && t.dtype != Wire::i32)
        throw ProtocolError(t.name + ": dtype: expected i64 or i32, found " + to_string(t.dtype));
    std::vector<int64_t> out(static_cast<size_t>(t.numel()));
    if (t.dtype == Wire::i64) {
        std::memcpy(out.data(), t.bytes.data(), out.size() * 8);
        return out;
    }
    for (size_t i = 0; i < out.size(); ++i) {
        int32_t v;
        std::memcpy(&v, t.bytes.data() + 4 * i, 4);
        out[i] = v;
    }
    return out;
}

namespace {

// A field's place in the config object: "rope_scaling.factor" is "factor"
// inside "rope_scaling".
std::pair<std::string, std::string> json_place(const ConfigField& f) {
    const std::string n = f.name;
    const size_t dot = n.find('.');
    return dot == std::string::npos ? std::pair{std::string(), n} : std::pair{n.substr(0, dot), n.substr(dot + 1)};
}

}  // namespace

// Every field (conform/config.h's table), rotary_dim as the rotated width
// (0 never crosses the wire), every scaling parameter whatever the type.
json config_to_json(const BlockConfig& c) {
    json j = json::object();
    auto put = [&](const ConfigField& f, json v) {
        const auto [object, key] = json_place(f);
        (object.empty() ? j : j[object])[key] = std::move(v);
    };
    for_each_field(c, [&](const ConfigField& f, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (is_named_enum<V>)
            put(f, to_string(v));
        else
            put(f, v);
    });
    j["rotary_dim"] = c.rotary();
    return j;
}

BlockConfig config_from_json(const json& j) {
    if (!j.is_object()) throw ProtocolError("config: expected an object");
    BlockConfig c;
    for_each_field(c, [&](const ConfigField& f, auto& v) {
        using V = std::decay_t<decltype(v)>;
        const auto [object, key] = json_place(f);
        const json* in = &j;
        if (!object.empty()) {
            if (!j.contains(object)) throw ProtocolError("config." + object + ": missing");
            in = &j[object];
        }
        const std::string where = "config." + (object.empty() ? std::string() : object + ".");
        if constexpr (std::is_same_v<V, RopeLayout>) {
            const auto l = parse_rope_layout(get<std::string>(*in, key.c_str(), where));
            if (!l) throw ProtocolError(where + key + ": expected neox or interleaved");
            v = *l;
        } else if constexpr (is_named_enum<V>) {
            const std::string name = get<std::string>(*in, key.c_str(), where);
            const auto t = parse_named(name, V{});
            if (!t) throw ProtocolError(where + key + ": unknown value \"" + name + "\"");
            v = *t;
        } else {
            v = get<V>(*in, key.c_str(), where);
        }
    });
    if (c.rotary_dim == c.head_dim) c.rotary_dim = 0;  // the whole head, as BlockConfig spells it
    return c;
}

}  // namespace conform::worker

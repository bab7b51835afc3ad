#include "worker/server.h"

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <random>

#include "conform/dtype.h"
#include "worker/protocol.h"

namespace conform::worker {

using nlohmann::json;

namespace {

constexpr int64_t kGuard = 64;  // sentinel floats after each output

// A float input widened to float32 (exact: the judge sent values of the
// call's dtype), with a copy of its wire bytes to notice a write into it.
struct Input {
    WireTensor wire;
    std::vector<float> f32;
    std::vector<int64_t> i64;
};

// An output buffer: [sentinels, 64 to 127 of them][poison × n][64 sentinels],
// at a fresh, randomly offset address every call.
class Output {
   public:
    Output(std::string name, int64_t rows, int64_t cols, uint32_t poison, uint32_t sentinel, size_t offset)
        : name_(std::move(name)), rows_(rows), cols_(cols), sentinel_(sentinel), offset_(offset) {
        const size_t n = static_cast<size_t>(rows * cols);
        buf_.assign(offset + n + kGuard, bits_float(sentinel));
        std::fill(buf_.begin() + static_cast<std::ptrdiff_t>(offset),
                  buf_.begin() + static_cast<std::ptrdiff_t>(offset + n), bits_float(poison));
    }
    MutView view() { return {buf_.data() + offset_, rows_, cols_}; }
    const std::string& name() const { return name_; }
    std::string overrun() const {
        const size_t n = static_cast<size_t>(rows_ * cols_);
        for (size_t i = 0; i < offset_; ++i)
            if (float_bits(buf_[i]) != sentinel_)
                return "wrote before the start of output '" + name_ + "' (element " +
                       std::to_string(static_cast<long long>(i) - static_cast<long long>(offset_)) + " was overwritten)";
        for (size_t i = 0; i < static_cast<size_t>(kGuard); ++i)
            if (float_bits(buf_[offset_ + n + i]) != sentinel_)
                return "wrote past the end of output '" + name_ + "' (sentinel " + std::to_string(i) + " after its " +
                       std::to_string(n) + " elements was overwritten)";
        return "";
    }
    WireTensor wire(Wire dtype) const {
        return to_wire(name_, buf_.data() + offset_, {rows_, cols_}, dtype);
    }

   private:
    std::string name_;
    int64_t rows_, cols_;
    uint32_t sentinel_;
    size_t offset_;
    std::vector<float> buf_;
};

struct Failure {
    std::string kind, message;
};

class Server {
   public:
    Server(const ServerInfo& info, int in, int out) : info_(info), in_(in), out_(out), rng_(std::random_device{}()) {}

    int run() {
        for (;;) {
            Frame f;
            try {
                f = read_frame(in_, "inputs");
            } catch (const Closed&) {
                return 0;
            } catch (const ProtocolError& e) {
                std::cerr << "conform-worker: protocol: " << e.what() << "\n";
                return 2;
            }
            const std::string type = f.header["type"].get<std::string>();
            try {
                if (type == "hello") hello();
                else if (type == "supports") supports(f.header);
                else if (type == "call") call(f);
                else if (type == "bye") return 0;
                else throw ProtocolError("type: unknown message type '" + type + "'");
            } catch (const ProtocolError& e) {
                std::cerr << "conform-worker: protocol: " << e.what() << "\n";
                return 2;
            } catch (const Closed&) {
                return 0;
            }
        }
    }

   private:
    void hello() {
        json ops = json::array(), dtypes = json::array(), invariant = json::array(), twists = json::object(),
             quant = json::object();
        for (Op op : info_.ops) ops.push_back(to_string(op));
        for (DType d : info_.dtypes) dtypes.push_back(to_string(d));
        // What the implementation declares batch invariant (its relations are
        // then judged bit for bit), asked of it as conform asks an
        // in-process one. One that cannot be made yet declares nothing; its
        // first call says why.
        try {
            Implementation& first = impl(info_.dtypes.front());
            for (Op op : info_.ops)
                if (first.batch_invariant(op)) invariant.push_back(to_string(op));
            for (Op op : info_.ops)
                if (has_weight_products(op) && first.activation_quant(op) != ActQuant::none)
                    quant[to_string(op)] = to_string(first.activation_quant(op));
            // The twists it computes, per op (conform/twists.h): an in-repo
            // implementation's every one, a plugin's its table's.
            for (Op op : info_.ops) twists[to_string(op)] = first.twists(op).entries();
        } catch (const std::exception&) {
        }
        write_frame(out_, {{"type", "hello"}, {"protocol", kProtocol}, {"name", info_.name},
                           {"description", info_.description}, {"ops", ops}, {"dtypes", dtypes},
                           {"supports", info_.supports}, {"batch_invariant", invariant}, {"twists", twists},
                           {"activation_quant", quant}},
                    {}, nullptr);
    }

    Implementation& impl(DType d) {
        auto it = impls_.find(d);
        if (it == impls_.end()) it = impls_.emplace(d, info_.make(d)).first;
        return *it->second;
    }

    static Op op_of(const json& h) {
        if (!h.contains("op") || !h["op"].is_string()) throw ProtocolError("op: missing or not a string");
        const auto op = parse_op(h["op"].get<std::string>());
        if (!op) throw ProtocolError("op: unknown op " + h["op"].dump());
        return *op;
    }
    static DType dtype_of(const json& h) {
        if (!h.contains("dtype") || !h["dtype"].is_string()) throw ProtocolError("dtype: missing or not a string");
        const auto d = parse_dtype(h["dtype"].get<std::string>());
        if (!d) throw ProtocolError("dtype: unknown dtype " + h["dtype"].dump());
        return *d;
    }

    void supports(const json& h) {
        const Op op = op_of(h);
        const DType d = dtype_of(h);
        if (!h.contains("config")) throw ProtocolError("config: missing");
        const BlockConfig c = config_from_json(h["config"]);
        Support s;
        try {
            s = impl(d).supports(op, c);
        } catch (const std::exception& e) {
            s = Support::no(e.what());
        }
        json r = {{"type", "supports"}, {"id", h.value("id", 0)}, {"ok", s.ok}};
        if (!s.ok) r["reason"] = s.reason;
        write_frame(out_, r, {}, nullptr);
    }

    void call(Frame& f) {
        const json& h = f.header;
        const int64_t id = h.value("id", int64_t(0));
        const Op op = op_of(h);
        const DType d = dtype_of(h);
        if (!h.contains("config")) throw ProtocolError("config: missing");
        const BlockConfig c = config_from_json(h["config"]);
        std::map<std::string, Input> in;
        for (auto& t : f.tensors) {
            Input x;
            if (t.dtype == Wire::i64 || t.dtype == Wire::i32) x.i64 = as_i64(t);
            else x.f32 = widen(t);
            const std::string name = t.name;
            x.wire = std::move(t);  // kept as it came: what the input must still be after the call
            in[name] = std::move(x);
        }
        const uint32_t poison = h.value("poison", 0x7FC0DEADu);
        const uint32_t sentinel = 0x7F800000u | (static_cast<uint32_t>(rng_()) & 0x3FFFFFu) | 0x200001u;
        std::vector<std::unique_ptr<Output>> outs;
        if (!h.contains("outputs") || !h["outputs"].is_array()) throw ProtocolError("outputs: missing or not an array");
        for (const auto& o : h["outputs"]) {
            const auto shape = o.value("shape", std::vector<int64_t>{});
            if (shape.size() != 2 || shape[0] < 0 || shape[1] < 0)
                throw ProtocolError("outputs: shape: expected [rows, cols], found " + o.value("shape", json()).dump());
            outs.push_back(std::make_unique<Output>(o.value("name", std::string()), shape[0], shape[1], poison,
                                                    sentinel, static_cast<size_t>(kGuard + rng_() % 64)));
        }
        std::vector<std::string> written;
        Failure fail;
        const auto t0 = std::chrono::steady_clock::now();
        try {
            written = dispatch(impl(d), op, c, h, in, outs);
        } catch (const ImplError& e) {
            fail = {"internal", e.what()};
        } catch (const std::exception& e) {
            fail = {"internal", e.what()};
        }
        const double seconds = info_.kernel_seconds && fail.kind.empty()
                                   ? info_.kernel_seconds()
                                   : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (fail.kind.empty())
            for (const auto& o : outs)
                if (std::string broke = o->overrun(); !broke.empty()) fail = {"internal", broke};
        if (fail.kind.empty())
            for (const auto& [name, x] : in)
                if (!unchanged(x))
                    fail = {"internal", std::string(to_string(op)) + " wrote into its input '" + name +
                                            "' (inputs are read-only)"};
        if (!fail.kind.empty()) {
            write_frame(out_, {{"type", "error"}, {"id", id}, {"kind", fail.kind}, {"message", fail.message}}, {}, nullptr);
            return;
        }
        std::vector<WireTensor> reply;
        for (const auto& o : outs)
            if (std::find(written.begin(), written.end(), o->name()) != written.end()) reply.push_back(o->wire(wire_of(d)));
        write_frame(out_, {{"type", "result"}, {"id", id}, {"seconds", seconds}}, reply, "outputs");
    }

    // Whether the implementation left an input as it came (its widened copy
    // against the wire bytes), without another copy of it.
    static bool unchanged(const Input& x) {
        const std::string& b = x.wire.bytes;
        if (x.wire.dtype == Wire::i64)
            return x.i64.size() * 8 == b.size() && std::memcmp(x.i64.data(), b.data(), b.size()) == 0;
        if (x.wire.dtype == Wire::i32) {
            if (x.i64.size() * 4 != b.size()) return false;
            for (size_t i = 0; i < x.i64.size(); ++i) {
                int32_t v;
                std::memcpy(&v, b.data() + 4 * i, 4);
                if (x.i64[i] != v) return false;
            }
            return true;
        }
        if (x.wire.dtype == Wire::f32)
            return x.f32.size() * 4 == b.size() && std::memcmp(x.f32.data(), b.data(), b.size()) == 0;
        for (size_t i = 0; i < x.f32.size(); ++i) {
            const uint16_t h = x.wire.dtype == Wire::bf16 ? bf16_bits(x.f32[i]) : f16_bits(x.f32[i]);
            if (std::memcmp(&h, b.data() + 2 * i, 2) != 0) return false;
        }
        return true;
    }

    // A request's tensors as the op's call takes them (OpInfo::invoke). A
    // vector input (the schema's [1, n]) comes as [n]; any other must be
    // [rows, cols]. "out" must have been asked for; a tap need not be.
    struct RequestCall final : CallTensors {
        Op op;
        const json& h;
        std::map<std::string, Input>& inputs;
        std::vector<std::unique_ptr<Output>>& outs;

        RequestCall(Op o, const json& hd, std::map<std::string, Input>& i, std::vector<std::unique_ptr<Output>>& os)
            : op(o), h(hd), inputs(i), outs(os) {}

        View in(const char* name) override {
            auto it = inputs.find(name);
            if (it == inputs.end()) return View{};
            const auto& s = it->second.wire.shape;
            bool vector = s.size() == 1;  // a [n] tensor is a vector whatever the op (decode's scales in a block call)
            for (const TensorSpec& t : op_info(op).inputs)
                if (name == std::string_view(t.name)) vector = vector || t.rows == Dim::one;
            if (vector) return View{it->second.f32.data(), 1, s.empty() ? 0 : s[0]};
            if (s.size() != 2) throw ProtocolError(std::string("inputs: ") + name + ": shape: expected [rows, cols]");
            return View{it->second.f32.data(), s[0], s[1]};
        }
        Positions pos(const char* name) override {
            auto it = inputs.find(name);
            if (it == inputs.end()) return Positions{};
            return Positions{it->second.i64.data(), static_cast<int64_t>(it->second.i64.size())};
        }
        MutView out(const char* name) override {
            for (auto& o : outs)
                if (o->name() == name) return o->view();
            if (name == std::string_view("out")) throw ProtocolError("outputs: no output named 'out' was requested");
            return MutView{};
        }
        int64_t prefill() override { return h.value("prefill", int64_t(0)); }
    };

    // The op's method, with the call's tensors; returns the outputs written:
    // those it reports among those asked for.
    static std::vector<std::string> dispatch(Implementation& impl, Op op, const BlockConfig& c, const json& h,
                                             std::map<std::string, Input>& in,
                                             std::vector<std::unique_ptr<Output>>& outs) {
        RequestCall call(op, h, in, outs);
        const TapSet ts = call_op(impl, op, c, call);
        std::vector<std::string> written;
        for (const auto& o : outs)
            if (wrote(ts, o->name())) written.push_back(o->name());
        return written;
    }

    const ServerInfo& info_;
    int in_, out_;
    std::mt19937_64 rng_;
    std::map<DType, std::unique_ptr<Implementation>> impls_;
};

}  // namespace

int serve(const ServerInfo& info, int in_fd, int out_fd) {
    return Server(info, in_fd, out_fd).run();
}

}  // namespace conform::worker

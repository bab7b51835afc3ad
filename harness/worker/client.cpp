#include "worker/client.h"

#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include "conform/dtype.h"
#include "worker/protocol.h"

namespace conform::worker {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string WorkerSpec::flag() const {
    switch (kind) {
        case Kind::command: return "--impl-cmd '" + target + "'";
        case Kind::plugin: return "--impl-lib " + target;
        case Kind::builtin: return "--isolate";
        case Kind::attached: return "--impl-fd " + target;
    }
    return "";
}

std::string worker_binary() {
    if (const char* env = std::getenv("CONFORM_WORKER_BINARY"); env && *env) return env;
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        const auto beside = std::filesystem::path(self).parent_path() / "conform-worker";
        std::error_code ec;
        if (std::filesystem::exists(beside, ec)) return beside.string();
    }
    return "conform-worker";  // on PATH (an installed conform)
}

// What a call asks for: a name and the judge's buffer to fill.
struct Want {
    std::string name;
    MutView dst;
};

namespace {

std::string last_lines(const std::string& text, size_t n) {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start <= text.size()) {
        const size_t nl = text.find('\n', start);
        lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
        if (nl == std::string::npos) break;
        start = nl + 1;
    }
    std::string out;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
        out += (out.empty() ? "" : " / ") + lines[i];
    return out;
}

// A string field of a worker's message, made printable (clean_text); "" when absent or not a string.
std::string text_field(const nlohmann::json& h, const char* field, size_t max = 2000) {
    return h.contains(field) && h[field].is_string() ? clean_text(h[field].get<std::string>(), max) : std::string();
}

}  // namespace

struct WorkerImpl::State {
    std::optional<Process> proc;
    int64_t next_id = 1;
    std::mt19937_64 rng;
    bool dead = true;
    std::string label;
    std::string gone;            // --impl-fd: why it stopped serving, once it has
};

WorkerImpl::WorkerImpl(const WorkerSpec& spec, DType dtype) : spec_(spec), dtype_(dtype), s_(std::make_unique<State>()) {
    const uint64_t seed = spec.seed ? *spec.seed : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    s_->rng.seed(seed ^ 0x9E3779B97F4A7C15ull);
}

WorkerImpl::~WorkerImpl() {
    if (s_ && s_->proc && !s_->dead) {
        try {
            write_frame(s_->proc->to_worker(), {{"type", "bye"}}, {}, nullptr, Clock::now() + std::chrono::seconds(2));
        } catch (const std::exception&) {
        }
        if (!s_->proc->wait(2.0)) s_->proc->kill();
        s_->proc->kill();  // its group too
    }
}

namespace {

std::vector<std::string> argv_for(const WorkerSpec& s) {
    std::vector<std::string> a = {worker_binary()};
    if (s.limits.memory_bytes) a.insert(a.end(), {"--memory", std::to_string(s.limits.memory_bytes)});
    a.insert(a.end(), {"--cpu", std::to_string(s.limits.cpu_seconds)});
    switch (s.kind) {
        case WorkerSpec::Kind::command: a.insert(a.end(), {"--exec", "--", "/bin/sh", "-c", "exec " + s.target}); break;
        case WorkerSpec::Kind::plugin: a.insert(a.end(), {"--plugin", s.target}); break;
        case WorkerSpec::Kind::builtin: a.insert(a.end(), {"--builtin", s.target}); break;
        case WorkerSpec::Kind::attached: break;  // not started by conform
    }
    return a;
}

Hello parse_hello(const json& h) {
    Hello out;
    const std::string where = "hello: ";
    if (h.value("protocol", 0) != kProtocol)
        throw ProtocolError(where + "protocol: expected " + std::to_string(kProtocol) + ", found " +
                            (h.contains("protocol") ? shown(h["protocol"]) : std::string("nothing")));
    if (!h.contains("name") || !h["name"].is_string()) throw ProtocolError(where + "name: missing or not a string");
    out.name = h["name"].get<std::string>();
    bool ok = !out.name.empty() && out.name.size() <= 64;
    for (char c : out.name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
    if (!ok)
        throw ProtocolError(where + "name: must be 1 to 64 characters of [A-Za-z0-9_.-], found " +
                            clean_text(h["name"].dump(), 100));
    out.description = h.contains("description") && h["description"].is_string()
                          ? clean_text(h["description"].get<std::string>(), 300)
                          : std::string();
    if (!h.contains("ops") || !h["ops"].is_array()) throw ProtocolError(where + "ops: missing or not an array");
    for (const auto& o : h["ops"]) {
        const auto op = o.is_string() ? parse_op(o.get<std::string>()) : std::nullopt;
        if (!op) throw ProtocolError(where + "ops: unknown op " + clean_text(o.dump(), 100) + " (ops: " + op_names() + ")");
        out.ops.push_back(*op);
    }
    if (out.ops.empty()) throw ProtocolError(where + "ops: empty: the worker implements no op");
    if (!h.contains("dtypes") || !h["dtypes"].is_array()) throw ProtocolError(where + "dtypes: missing or not an array");
    for (const auto& d : h["dtypes"]) {
        const auto dt = d.is_string() ? parse_dtype(d.get<std::string>()) : std::nullopt;
        if (!dt) throw ProtocolError(where + "dtypes: unknown dtype " + clean_text(d.dump(), 100) + " (f32, bf16, f16)");
        out.dtypes.push_back(*dt);
    }
    if (out.dtypes.empty()) throw ProtocolError(where + "dtypes: empty");
    out.supports = h.value("supports", false);
    if (h.contains("batch_invariant")) {
        if (!h["batch_invariant"].is_array()) throw ProtocolError(where + "batch_invariant: not an array");
        for (const auto& o : h["batch_invariant"]) {
            const auto op = o.is_string() ? parse_op(o.get<std::string>()) : std::nullopt;
            if (!op || std::find(out.ops.begin(), out.ops.end(), *op) == out.ops.end())
                throw ProtocolError(where + "batch_invariant: " + clean_text(o.dump(), 100) + " is not one of its ops");
            out.batch_invariant.push_back(*op);
        }
    }
    if (h.contains("index_dtype")) {
        const auto w = h["index_dtype"].is_string() ? parse_wire(h["index_dtype"].get<std::string>()) : std::nullopt;
        if (!w || (*w != Wire::i64 && *w != Wire::i32))
            throw ProtocolError(where + "index_dtype: expected \"i64\" or \"i32\", found " + clean_text(h["index_dtype"].dump(), 100));
        out.index_dtype = *w;
    }
    // What it computes: `twists`, a list of twist names ("sliding_window") or
    // values ("hidden_act=gelu_tanh") for every op, or an object of op → list.
    auto declare = [&](Op op, const json& list, const std::string& field) {
        if (!list.is_array()) throw ProtocolError(where + field + ": not an array of twist names");
        if (std::find(out.ops.begin(), out.ops.end(), op) == out.ops.end())
            throw ProtocolError(where + field + ": the worker does not implement " + to_string(op));
        TwistSet& set = out.twists.try_emplace(op, TwistSet::none()).first->second;
        for (const auto& d : list) {
            std::string why;
            if (!d.is_string() || !set.declare(d.get<std::string>(), &why))
                throw ProtocolError(where + field + ": " + (d.is_string() ? why : "not a string: " + clean_text(d.dump(), 100)));
        }
    };
    if (h.contains("twists")) {
        const json& tw = h["twists"];
        if (tw.is_array()) {
            for (Op op : out.ops) declare(op, tw, "twists");
        } else if (tw.is_object()) {
            for (const auto& [name, list] : tw.items()) {
                const auto op = parse_op(name);
                if (!op) throw ProtocolError(where + "twists: " + clean_text(name, 60) + " is not an op (" + op_names() + ")");
                declare(*op, list, "twists." + name);
            }
        } else {
            throw ProtocolError(where + "twists: not an array or an object");
        }
    }
    if (h.contains("kv_cache_dtypes")) {
        // A list: paged_attention's (the form from before decode had a cache); an object: per op.
        const json& kc = h["kv_cache_dtypes"];
        auto read = [&](Op op, const json& list, const std::string& field) {
            if (!list.is_array()) throw ProtocolError(where + field + ": not an array");
            for (const auto& d : list) {
                const auto k = d.is_string() ? parse_kv_cache_dtype(d.get<std::string>()) : std::nullopt;
                if (!k || *k == KvCacheDtype::none)
                    throw ProtocolError(where + field + ": expected \"fp8_e4m3\" or \"fp8_e5m2\", found " +
                                        clean_text(d.dump(), 100));
                if (std::find(out.ops.begin(), out.ops.end(), op) == out.ops.end())
                    throw ProtocolError(where + field + ": the worker does not implement " + to_string(op));
                out.kv_cache_dtypes[op].push_back(*k);
                // The form from before `twists`: the cache's dtype, and its scales either way.
                TwistSet& set = out.twists.try_emplace(op, TwistSet::none()).first->second;
                set.add(*find_twist("kv_cache_dtype"), static_cast<double>(*k));
                set.add(*find_twist("kv_scale_per_head"));
            }
        };
        if (kc.is_array()) {
            read(Op::paged_attention, kc, "kv_cache_dtypes");
        } else if (kc.is_object()) {
            for (const auto& [name, list] : kc.items()) {
                const auto op = parse_op(name);
                if (!op || !op_info(*op).uses(kFp8Cache))
                    throw ProtocolError(where + "kv_cache_dtypes: " + clean_text(name, 60) +
                                        " is not an op with a KV cache (paged_attention, decode)");
                read(*op, list, "kv_cache_dtypes." + name);
            }
        } else {
            throw ProtocolError(where + "kv_cache_dtypes: not an array or an object");
        }
    }
    if (h.contains("activation_quant")) {
        const json& a = h["activation_quant"];
        if (!a.is_object())
            throw ProtocolError(where + "activation_quant: not an object of op → \"q8_0\" | \"q8_k\" | \"none\"");
        for (const auto& [name, q] : a.items()) {
            const auto op = parse_op(name);
            if (!op || std::find(out.ops.begin(), out.ops.end(), *op) == out.ops.end())
                throw ProtocolError(where + "activation_quant: " + clean_text(name, 100) + " is not one of its ops");
            if (!has_weight_products(*op))
                throw ProtocolError(where + "activation_quant: " + name +
                                    " has no weight product (only swiglu, block and decode quantise activations)");
            const auto aq = q.is_string() ? parse_act_quant(q.get<std::string>()) : std::nullopt;
            if (!aq)
                throw ProtocolError(where + "activation_quant." + name + ": expected \"q8_0\", \"q8_k\" or \"none\", found " +
                                    clean_text(q.dump(), 100));
            if (*aq != ActQuant::none) out.activation_quant[*op] = *aq;
        }
    }
    return out;
}

}  // namespace

// Spawns the worker and reads its hello into s; throws StartError.
Hello launch(const WorkerSpec& spec, WorkerImpl::State& s);

std::unique_ptr<WorkerImpl> WorkerImpl::start(const WorkerSpec& spec, DType dtype) {
    std::unique_ptr<WorkerImpl> w(new WorkerImpl(spec, dtype));
    w->hello_ = launch(spec, *w->s_);
    const std::string who = spec.flag();
    if (std::find(w->hello_.dtypes.begin(), w->hello_.dtypes.end(), dtype) == w->hello_.dtypes.end()) {
        std::string ds;
        for (DType d : w->hello_.dtypes) ds += (ds.empty() ? "" : ", ") + std::string(to_string(d));
        throw StartError(w->hello_.name + " (" + who + ") runs in " + ds + " only, not " + to_string(dtype), false);
    }
    return w;
}

Hello launch(const WorkerSpec& spec, WorkerImpl::State& s) {
    const std::string who = spec.flag();
    s.dead = true;
    if (spec.kind == WorkerSpec::Kind::attached) {
        if (s.proc)  // its descriptors were taken once: there is no second start
            throw StartError(who + ": the process that started conform serves it, and conform cannot start it again" +
                                 (s.gone.empty() ? std::string() : " (it stopped serving: " + s.gone + ")"),
                             false);
        int from = -1, to = -1;
        char extra = 0;
        if (std::sscanf(spec.target.c_str(), "%d,%d%c", &from, &to, &extra) != 2)
            throw StartError(who + ": expected two descriptors READ,WRITE (conform reads answers from the first and "
                                   "writes calls to the second), e.g. --impl-fd 3,4",
                             true);
        try {
            s.proc.emplace(Process::attach(from, to, who));
        } catch (const std::exception& e) {
            throw StartError(who + ": " + e.what(), true);
        }
    } else {
        try {
            s.proc.emplace(Process::spawn(argv_for(spec), s.label.empty() ? who : s.label));
        } catch (const std::exception& e) {
            throw StartError(who + ": " + e.what(), false);
        }
    }
    const Deadline deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(spec.start_timeout_s));
    auto tail = [&] {
        const std::string t = s.proc->stderr_tail();
        return t.empty() ? std::string() : "; its stderr: " + last_lines(t, 6);
    };
    Hello hello;
    try {
        write_frame(s.proc->to_worker(), {{"type", "hello"}, {"protocol", kProtocol}}, {}, nullptr, deadline);
        Frame f = read_frame(s.proc->from_worker(), nullptr, deadline, 0);
        const std::string type = f.header["type"].get<std::string>();
        if (type == "error") {
            // A worker that knows it cannot serve (conform-worker: not a plugin).
            const bool bad = spec.kind == WorkerSpec::Kind::plugin && text_field(f.header, "kind") == "invalid_argument";
            const std::string m = text_field(f.header, "message");
            throw StartError(m.empty() ? who + ": refused to start" : m, bad);
        }
        if (type != "hello") throw ProtocolError("hello: type: expected hello, found " + clean_text(f.header["type"].dump(), 100));
        hello = parse_hello(f.header);
    } catch (const StartError&) {
        s.proc->kill();
        throw;
    } catch (const TimedOut&) {
        s.proc->kill();
        throw StartError(who + ": said no hello within " + std::to_string(static_cast<int>(spec.start_timeout_s)) +
                             " s" + tail(),
                         false);
    } catch (const Closed&) {
        s.proc->wait(2.0);
        // conform-worker is ours: dying before its hello, a plugin's loading (its
        // constructors, conform_plugin_get) killed it: a bad library (exit 2).
        throw StartError(who + ": " + s.proc->how_it_ended() + " before its hello" +
                             (spec.kind == WorkerSpec::Kind::plugin ? std::string(" (while loading the library)") : "") +
                             tail(),
                         spec.kind == WorkerSpec::Kind::plugin);
    } catch (const ProtocolError& e) {
        s.proc->kill();
        throw StartError(who + ": protocol violation: " + e.what() + tail(), false);
    }
    s.label = hello.name;
    s.proc->set_label(s.label);
    s.dead = false;
    return hello;
}

// ---- calls -----------------------------------------------------------------------------

namespace {


std::string shape_text(const std::vector<int64_t>& s) {
    std::string o = "[";
    for (size_t i = 0; i < s.size(); ++i) o += (i ? "," : "") + std::to_string(s[i]);
    return o + "]";
}

}  // namespace

// One round trip; returns the outputs received (validated against `want`).
// Throws ImplError with the reason; kills the worker (to be restarted) when
// it crashed, hung or broke the protocol.
std::vector<WireTensor> round_trip(const WorkerSpec& spec, const Hello& hello, DType dtype, WorkerImpl::Stats& stats,
                                   WorkerImpl::State& s, Op op, const BlockConfig& config,
                                   const std::vector<WireTensor>& inputs, const std::vector<Want>& want,
                                   const json& extra, uint32_t poison) {
    const char* opname = to_string(op);
    if (s.dead) {
        // The last call killed it: a fresh one for this call.
        try {
            const Hello again = launch(spec, s);
            if (again.name != hello.name)
                throw ImplError("the restarted worker calls itself '" + again.name + "', not '" + hello.name + "'");
            ++stats.restarts;
        } catch (const StartError& e) {
            throw ImplError(std::string("the worker could not be restarted: ") + e.what());
        }
    }
    auto tail = [&] {
        const std::string t = s.proc->stderr_tail();
        return t.empty() ? std::string() : "; its stderr: " + last_lines(t, 4);
    };
    // After a crash: the limits a worker dies of without saying so.
    auto limits_hint = [&]() -> std::string {
        const std::string how = s.proc->how_it_ended();
        if (how.find("signal") == std::string::npos || spec.limits.memory_bytes == 0) return "";
        char gb[32];
        std::snprintf(gb, sizeof gb, "%.3g", static_cast<double>(spec.limits.memory_bytes) / double(uint64_t(1) << 30));
        return std::string(" (its memory is limited to ") + gb + " GB, --worker-memory: an allocation it did not check may be why)";
    };
    auto died = [&](const std::string& why) -> ImplError {
        s.dead = true;
        s.proc->kill();
        if (spec.kind == WorkerSpec::Kind::attached) {
            // Nothing to restart: its later cases are declined (supports()).
            s.gone = why;
            return ImplError(why + " (an attached worker, --impl-fd, is not restarted: its later cases are not run)");
        }
        return ImplError(why + " (the worker is restarted for the next call)");
    };
    const int64_t id = s.next_id++;
    json h = {{"type", "call"},  {"id", id}, {"op", opname}, {"dtype", to_string(dtype)},
              {"config", config_to_json(config)}, {"poison", poison}};
    for (auto it = extra.begin(); it != extra.end(); ++it) h[it.key()] = it.value();
    json outs = json::array();
    for (const Want& w : want)
        outs.push_back({{"name", w.name}, {"dtype", to_string(wire_of(dtype))}, {"shape", {w.dst.rows, w.dst.cols}}});
    h["outputs"] = outs;
    uint64_t want_bytes = 0;  // the most a result may carry: every output asked for
    for (const Want& w : want) want_bytes += static_cast<uint64_t>(w.dst.size()) * itemsize(wire_of(dtype));
    ++stats.calls;
    Frame f;
    // One deadline for the whole round trip: sending the inputs (a worker
    // that stops reading must not stall the judge) and waiting for the answer.
    const Deadline deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(spec.call_timeout_s));
    try {
        write_frame(s.proc->to_worker(), h, inputs, "inputs", deadline);
        for (const auto& t : inputs) stats.bytes_sent += t.bytes.size();
        f = read_frame(s.proc->from_worker(), "outputs", deadline, want_bytes);
    } catch (const TimedOut& e) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", spec.call_timeout_s);
        const bool sending = std::string(e.what()).find("stopped reading") != std::string::npos;
        throw died(std::string("timed out after ") + buf + " s in " + opname +
                   (sending ? " (the worker stopped reading its input)" : "") +
                   " and was killed (--call-timeout raises the limit)");
    } catch (const Closed&) {
        s.proc->wait(1.0);
        throw died("the worker " + s.proc->how_it_ended() + " in " + opname + limits_hint() + tail());
    } catch (const ProtocolError& e) {
        throw died(std::string("protocol violation in ") + opname + ": " + clean_text(e.what()));
    }
    for (const auto& t : f.tensors) stats.bytes_received += t.bytes.size();
    const std::string type = f.header["type"].get<std::string>();
    if (f.header.value("id", int64_t(-1)) != id)
        throw died(std::string("protocol violation in ") + opname + ": id: expected " + std::to_string(id) +
                   ", found " + (f.header.contains("id") ? clean_text(f.header["id"].dump(), 100) : std::string("nothing")));
    if (type == "error") {
        const std::string kind = text_field(f.header, "kind", 40), message = text_field(f.header, "message");
        std::string msg = std::string(opname) + ": the worker reports " + (kind.empty() ? "an error" : kind) + ": " +
                          (message.empty() ? "(no message)" : message);
        if (f.header.contains("traceback") && f.header["traceback"].is_string())
            msg += " [traceback: " + clean_text(last_lines(f.header["traceback"].get<std::string>().substr(0, 100000), 3)) + "]";
        throw ImplError(msg);
    }
    if (type != "result")
        throw died(std::string("protocol violation in ") + opname + ": type: expected result or error, found " +
                   clean_text(nlohmann::json(type).dump(), 100));
    if (f.header.contains("seconds") && f.header["seconds"].is_number()) {
        stats.last_worker_seconds = f.header["seconds"].get<double>();
        stats.worker_seconds += stats.last_worker_seconds;
    }
    bool have_out = false;
    for (size_t i = 0; i < f.tensors.size(); ++i) {
        const WireTensor& t = f.tensors[i];
        const std::string where = "outputs[" + std::to_string(i) + "] (" + clean_text(nlohmann::json(t.name).dump(), 100) + ")";
        const Want* w = nullptr;
        for (const Want& x : want)
            if (x.name == t.name) w = &x;
        if (!w) throw ImplError(std::string(opname) + ": " + where + ": name: not an output that was asked for");
        for (size_t j = 0; j < i; ++j)
            if (f.tensors[j].name == t.name) throw ImplError(std::string(opname) + ": " + where + ": returned twice");
        if (t.dtype != wire_of(dtype))
            throw ImplError(std::string(opname) + ": " + where + ": dtype: expected " + to_string(wire_of(dtype)) +
                            " (the call's), found " + to_string(t.dtype));
        const std::vector<int64_t> expect = {w->dst.rows, w->dst.cols};
        if (t.shape != expect)
            throw ImplError(std::string(opname) + ": " + where + ": shape: expected " + shape_text(expect) + ", found " +
                            shape_text(t.shape));
        have_out = have_out || t.name == "out";
    }
    if (!have_out) throw ImplError(std::string(opname) + ": the result has no output 'out'");
    return f.tensors;
}

namespace {

// Into the judge's buffers; an element still at this call's poison stays as
// the harness poisoned it, so the harness reports it unwritten.
void deliver(const std::vector<WireTensor>& got, const std::vector<Want>& want, DType dtype, uint32_t poison) {
    for (const auto& t : got)
        for (const Want& w : want) {
            if (w.name != t.name) continue;
            if (dtype == DType::f32) {
                const size_t n = static_cast<size_t>(t.numel());
                for (size_t i = 0; i < n; ++i) {
                    uint32_t b;
                    std::memcpy(&b, t.bytes.data() + 4 * i, 4);
                    if (b != poison) std::memcpy(w.dst.data + i, &b, 4);
                }
            } else {
                const std::vector<float> v = widen(t);
                std::copy(v.begin(), v.end(), w.dst.data);
            }
        }
}

}  // namespace

// ---- the Implementation ------------------------------------------------------------------

namespace {


// One call's tensors as a typed method has them (a worker called through
// rmsnorm(), attention(), ... rather than whole): schema names to views.
using NamedCall = NamedTensors;

// The block's weights by schema name (a twist's only when the config has it on).
void add_weights(NamedCall& n, const BlockWeights& w) {
    const std::pair<const char*, View> named[] = {
        {"attn_norm", w.attn_norm}, {"wq", w.wq}, {"wk", w.wk}, {"wv", w.wv}, {"wo", w.wo}, {"ffn_norm", w.ffn_norm},
        {"w1", w.w1}, {"w3", w.w3}, {"w2", w.w2}, {"q_norm", w.q_norm}, {"k_norm", w.k_norm}, {"bq", w.bq},
        {"bk", w.bk}, {"bv", w.bv}, {"sinks", w.sinks}, {"attn_post_norm", w.attn_post_norm},
        {"ffn_post_norm", w.ffn_post_norm}, {"k_scale", w.k_scale}, {"v_scale", w.v_scale}};
    for (const auto& [name, v] : named) n.ins[name] = v;
}

}  // namespace

Support WorkerImpl::supports(Op op, const BlockConfig& config) const {
    if (std::find(hello_.ops.begin(), hello_.ops.end(), op) == hello_.ops.end())
        return Support::no(hello_.name + " does not implement " + to_string(op));
    State& s = *s_;
    if (s.dead && spec_.kind == WorkerSpec::Kind::attached)
        return Support::no("the attached worker (" + spec_.flag() + ") stopped serving earlier and cannot be restarted: " +
                           s.gone);
    if (!hello_.supports) return Support::yes();
    if (s.dead) return Support::yes();  // the call will restart it, and fail with the reason if it cannot
    try {
        const int64_t id = s.next_id++;
        const Deadline deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(spec_.call_timeout_s));
        write_frame(s.proc->to_worker(),
                    {{"type", "supports"}, {"id", id}, {"op", to_string(op)}, {"dtype", to_string(dtype_)},
                     {"config", config_to_json(config)}},
                    {}, nullptr, deadline);
        const Frame f = read_frame(s.proc->from_worker(), nullptr, deadline, 0);
        if (f.header["type"] != "supports" || f.header.value("id", int64_t(-1)) != id || !f.header.contains("ok"))
            throw ProtocolError("supports: expected {type: supports, id, ok}");
        if (f.header["ok"] == true) return Support::yes();
        const std::string reason = text_field(f.header, "reason", 300);
        return Support::no(reason.empty() ? hello_.name + " declines this case" : reason);
    } catch (const std::exception& e) {
        // Saying "no" would silently skip the case; running it instead fails
        // it, with the call's own report of what went wrong.
        s.dead = true;
        s.gone = std::string("its answer to a supports request: ") + clean_text(e.what());
        if (s.proc) s.proc->kill();
        return Support::yes();
    }
}

struct WorkerImpl::Call {
    Call(Op o, BlockConfig c, std::vector<WireTensor> in, std::vector<Want> w)
        : op(o), config(std::move(c)), inputs(std::move(in)), want(std::move(w)) {}
    Op op;
    BlockConfig config;
    std::vector<WireTensor> inputs;
    std::vector<Want> want;
    json extra = json::object();
    std::vector<std::string> returned;  // the names the worker answered with
};

namespace {

// Two answers to the same call, bit for bit (elements left at each call's poison count as equal).
void check_same(Op op, const std::vector<WireTensor>& a, const std::vector<WireTensor>& b, uint32_t pa, uint32_t pb,
                DType dtype) {
    const char* opname = to_string(op);
    for (const auto& x : a) {
        const WireTensor* y = nullptr;
        for (const auto& t : b)
            if (t.name == x.name) y = &t;
        if (!y) throw ImplError(std::string("nondeterministic: ") + opname + " was called twice with the same inputs and "
                                "returned output '" + x.name + "' only the first time");
        if (x.bytes == y->bytes) continue;
        const size_t w = itemsize(x.dtype), n = x.bytes.size() / w;
        for (size_t i = 0; i < n; ++i) {
            if (std::memcmp(x.bytes.data() + w * i, y->bytes.data() + w * i, w) == 0) continue;
            if (dtype == DType::f32) {
                uint32_t u, v;
                std::memcpy(&u, x.bytes.data() + 4 * i, 4);
                std::memcpy(&v, y->bytes.data() + 4 * i, 4);
                if (u == pa && v == pb) continue;
                throw ImplError(std::string("nondeterministic: ") + opname + " was called twice with the same inputs "
                                "(at fresh addresses) and output '" + x.name + "' differs at element " +
                                std::to_string(i) + ": " + std::to_string(bits_float(u)) + " then " +
                                std::to_string(bits_float(v)) + " (results must not depend on addresses, timing or "
                                "earlier calls)");
            }
            throw ImplError(std::string("nondeterministic: ") + opname + " was called twice with the same inputs and "
                            "output '" + x.name + "' differs at element " + std::to_string(i));
        }
    }
}

uint32_t draw_poison(std::mt19937_64& rng) {
    return 0x7FC00000u | (static_cast<uint32_t>(rng()) & 0x3FFFFFu) | 1u;  // a quiet NaN no arithmetic makes
}

}  // namespace

void WorkerImpl::invoke(Call& c) {
    const uint32_t poison = draw_poison(s_->rng);
    std::vector<WireTensor> got =
        round_trip(spec_, hello_, dtype_, stats_, *s_, c.op, c.config, c.inputs, c.want, c.extra, poison);
    std::uniform_real_distribution<double> u(0, 1);
    if (u(s_->rng) < spec_.repeat_fraction) {
        ++stats_.repeats;
        const uint32_t again = draw_poison(s_->rng);
        const auto second =
            round_trip(spec_, hello_, dtype_, stats_, *s_, c.op, c.config, c.inputs, c.want, c.extra, again);
        check_same(c.op, got, second, poison, again, dtype_);
    }
    deliver(got, c.want, dtype_, poison);
    for (const auto& t : got) c.returned.push_back(t.name);
}

bool WorkerImpl::call(Op op, const BlockConfig& c, CallTensors& t, TapSet& written) {
    const OpInfo& info = op_info(op);
    std::vector<WireTensor> in;
    for (const TensorSpec& spec : info.inputs) {
        if (!spec.present(c)) continue;
        const View v = t.in(spec.name);
        if (!v.data) throw ImplError(std::string(to_string(op)) + ": input '" + spec.name + "' missing from the call");
        // A [1, n] vector travels as [n] (a norm's weight, a bias, the sinks, the scales).
        in.push_back(spec.rows == Dim::one ? to_wire(spec.name, v.data, {v.size()}, wire_of(dtype_))
                                           : to_wire(spec.name, v.data, {v.rows, v.cols}, wire_of(dtype_)));
    }
    for (const PositionSpec& spec : info.positions) {
        const Positions p = t.pos(spec.name);
        in.push_back(to_wire(spec.name, p.data, p.n, spec.index ? hello_.index_dtype : Wire::i64));
    }
    std::vector<Want> want;
    for (const TensorSpec& spec : info.outputs)
        if (const MutView m = t.out(spec.name); m.data) want.push_back({spec.name, m});
    Call call{op, c, std::move(in), std::move(want)};
    if (info.uses(kKvCache)) call.extra["prefill"] = t.prefill();
    invoke(call);
    for (Tap tap : kAllTaps)
        if (tap != Tap::out && std::find(call.returned.begin(), call.returned.end(), to_string(tap)) != call.returned.end())
            written.add(tap);
    return true;
}

// The typed methods (a caller that does not go through call_op): the same
// call, its config the params' own (each params struct keeps the config it
// came from).
namespace {
const BlockConfig& config_of(const BlockConfig* c, const char* op) {
    if (!c) throw ImplError(std::string(op) + ": called without its config (make the params with " + op + "_params(config))");
    return *c;
}
}  // namespace

void WorkerImpl::rmsnorm(View x, View w, const RmsNormParams& p, MutView out) {
    NamedCall n;
    n.ins = {{"x", x}, {"weight", w}};
    n.outs = {{"out", out}};
    TapSet ts;
    call(Op::rmsnorm, config_of(p.config, "rmsnorm"), n, ts);
}

void WorkerImpl::rope(View x, Positions pos, const RopeParams& p, MutView out) {
    NamedCall n;
    n.ins = {{"x", x}};
    n.positions = {{"positions", pos}};
    n.outs = {{"out", out}};
    TapSet ts;
    call(Op::rope, config_of(p.config, "rope"), n, ts);
}

void WorkerImpl::qk_norm(View x, View w, const QkNormParams& p, MutView out) {
    NamedCall n;
    n.ins = {{"x", x}, {"weight", w}};
    n.outs = {{"out", out}};
    TapSet ts;
    call(Op::qk_norm, config_of(p.config, "qk_norm"), n, ts);
}

void WorkerImpl::attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                           MutView out) {
    NamedCall n;
    n.ins = {{"q", q}, {"k", k}, {"v", v}};
    if (p.sinks) n.ins["sinks"] = View{p.sinks, 1, p.n_heads};
    n.positions = {{"q_positions", q_pos}, {"k_positions", k_pos}};
    n.outs = {{"out", out}};
    TapSet ts;
    call(Op::attention, config_of(p.config, "attention"), n, ts);
}

void WorkerImpl::swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) {
    NamedCall n;
    n.ins = {{"x", x}, {"w1", w1}, {"w3", w3}, {"w2", w2}};
    n.outs = {{"out", out}};
    TapSet ts;
    call(Op::swiglu, config_of(p.config, "swiglu"), n, ts);
}

TapSet WorkerImpl::block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) {
    NamedCall n;
    add_weights(n, w);
    n.ins["x"] = x;
    n.positions = {{"positions", pos}};
    for (Tap t : kAllTaps) n.outs[to_string(t)] = out[t];
    TapSet ts;
    call(Op::block, c, n, ts);
    return ts;
}

void WorkerImpl::decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                        MutView out) {
    NamedCall n;
    add_weights(n, w);
    n.ins["x"] = x;
    n.positions = {{"positions", pos}};
    n.outs = {{"out", out}};
    n.pre = prefill;
    TapSet ts;
    call(Op::decode, c, n, ts);
}

void WorkerImpl::paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx,
                                 const PagedAttentionParams& p, MutView out, MutView lse) {
    NamedCall n;
    n.ins = {{"q", q}, {"k_cache", k_cache}, {"v_cache", v_cache}};
    if (p.sinks) n.ins["sinks"] = View{p.sinks, 1, p.n_heads};
    if (p.k_scale) n.ins["k_scale"] = View{p.k_scale, 1, p.n_kv_scales};
    if (p.v_scale) n.ins["v_scale"] = View{p.v_scale, 1, p.n_kv_scales};
    n.positions = {{"qo_indptr", idx.qo_indptr}, {"kv_indptr", idx.kv_indptr}, {"kv_indices", idx.kv_indices},
              {"kv_last_page_len", idx.kv_last_page_len}};
    n.outs = {{"out", out}, {"lse", lse}};
    TapSet ts;
    call(Op::paged_attention, config_of(p.config, "paged_attention"), n, ts);
}

void WorkerImpl::mla_attention(View q, View ckv_cache, View kpe_cache, View w_kv_b, const PagedIndex& idx,
                               const MlaParams& p, MutView out, MutView lse) {
    NamedCall n;
    n.ins = {{"q", q}, {"ckv_cache", ckv_cache}, {"kpe_cache", kpe_cache}, {"w_kv_b", w_kv_b}};
    n.positions = {{"qo_indptr", idx.qo_indptr}, {"kv_indptr", idx.kv_indptr}, {"kv_indices", idx.kv_indices},
              {"kv_last_page_len", idx.kv_last_page_len}};
    n.outs = {{"out", out}, {"lse", lse}};
    TapSet ts;
    call(Op::mla_attention, config_of(p.config, "mla_attention"), n, ts);
}

}  // namespace conform::worker

// conform bench: each op's wall time per implementation, against LibTorch
// float32 measured in the same process, interleaved, with the machine's
// ceilings measured the same run.
//
// Every implementation gets the op with its inputs already where it keeps
// them (simd: weights packed, bf16 converted; torch: tensors, cos/sin and the
// mask built), so a run is what a model pays per call. Runs are interleaved
// round by round (and the order rotated) so that drift in the machine's state
// (another process, frequency) lands on every implementation alike.
//
// A benchmark measures work, so what is timed is checked: an implementation
// run through the interface (scalar, a plugin, a command worker) rotates its
// repetitions among kSets input sets, its output buffer re-poisoned (NaN)
// before each run; every repetition's output is scanned for NaN/Inf and a
// random quarter of them (and one of each set at the end) compared with
// torch's output for that set — all outside the timed region, so a plugin
// that computes once and answers from memory, or NaN on a repeat, fails the
// benchmark. A worker's row also says what the worker itself reported (its
// kernel's time, without the adapter's checks) and the round trip's own cost.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <limits>
#include <random>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/gate.h"
#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "config/presets.h"
#include "core/case.h"
#include "cli/flags.h"
#include "run/plan.h"
#include "reference/bench_torch.h"
#include "reference/ceilings.h"
#include "registry.h"

namespace conform::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) out.push_back(item);
    return out;
}

// ---- what an op costs --------------------------------------------------------------

// One cost model: the anatomy's table (config/anatomy.h), priced as the call
// bench times — each op's lanes of one layer run as one call, so bytes are
// the weights and what crosses the call (a fused SwiGLU's T x F activations
// are not counted; a block's new K and V rows are).
struct Cost {
    double flops = 0;         // counted: 2 per multiply-add of a product, a few per element elsewhere
    double bytes = 0;         // the minimum the call must move: inputs, weights, outputs, once
    double weight_bytes = 0;  // the matmuls' weights alone (decode's bandwidth target)
};

Cost cost(Op op, const config::ModelConfig& model, int64_t T, int64_t context, double es) {
    config::ModelConfig m = model;
    // The inputs make_inputs() gives each op: rmsnorm and swiglu on [T, D];
    // qk_norm and rope on the queries [T, H*hd] alone; attention over T
    // queries after `context` keys at T = 1, causal over T keys otherwise; a
    // block from empty; a decode step after `context` cached tokens.
    std::vector<std::string> parts;
    int64_t C = 0;
    switch (op) {
        case Op::rmsnorm: parts = {"attn_norm"}; break;
        case Op::qk_norm:
            m.block.qk_norm = true;  // bench times the op whether the model has it or not
            parts = {"qk_norm:q"};
            break;
        case Op::rope: parts = {"rope:q"}; break;
        case Op::attention:
            parts = {"attention"};
            C = T == 1 ? context : 0;
            break;
        case Op::swiglu: parts = {"gate_proj (w1)", "up_proj (w3)", "silu_mul", "down_proj (w2)"}; break;
        case Op::block: parts = {"layer"}; break;
        case Op::decode:
            parts = {"layer"};
            C = context;
            break;
    }
    const config::CallCost k = config::call_cost(m, T, C, es, parts);
    return {k.flops, k.bytes, k.weight_bytes};
}

// ---- inputs ------------------------------------------------------------------------

struct Inputs {
    Case c;                            // the op's inputs by schema name
    Tensor context_x;                  // decode: the tokens already in the cache
    std::vector<int64_t> context_pos;
    int64_t keys = 0;                  // attention / decode: keys attended over
};

Tensor random(std::mt19937& rng, int64_t rows, int64_t cols, double scale, double mean = 0) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    Tensor t(rows, cols);
    for (float& v : t.data) v = static_cast<float>(mean + scale * n(rng));
    return t;
}

std::vector<int64_t> range(int64_t start, int64_t n) {
    std::vector<int64_t> p(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = start + i;
    return p;
}

// Weights N(0, 1/in) keep activations O(1) through the block; norm weights
// 1 + N(0, 0.1) are not uniform, so a wrong norm weight would show.
Inputs make_inputs(Op op, const BlockConfig& cfg, int64_t T, int64_t context) {
    std::mt19937 rng(1234);
    Inputs in;
    Case& c = in.c;
    c.op = op;
    c.config = cfg;
    const int64_t D = cfg.d_model, F = cfg.ffn_dim, Q = cfg.q_width(), KVW = cfg.kv_width();
    auto w = [&](int64_t r, int64_t k) { return random(rng, r, k, 1.0 / std::sqrt(static_cast<double>(r))); };
    switch (op) {
        case Op::rmsnorm:
            c.inputs["x"] = random(rng, T, D, 1.0);
            c.inputs["weight"] = random(rng, 1, D, 0.1, 1.0);
            break;
        case Op::qk_norm:
            c.inputs["x"] = random(rng, T, Q, 1.0);
            c.inputs["weight"] = random(rng, 1, cfg.head_dim, 0.1, 1.0);
            break;
        case Op::rope:
            c.inputs["x"] = random(rng, T, Q, 1.0);
            c.positions["positions"] = range(0, T);
            break;
        case Op::attention: {
            const int64_t S = T == 1 ? context + 1 : T;
            c.inputs["q"] = random(rng, T, Q, 1.0);
            c.inputs["k"] = random(rng, S, KVW, 1.0);
            c.inputs["v"] = random(rng, S, KVW, 1.0);
            c.positions["q_positions"] = range(S - T, T);
            c.positions["k_positions"] = range(0, S);
            in.keys = S;
            break;
        }
        case Op::swiglu:
            c.inputs["x"] = random(rng, T, D, 1.0);
            c.inputs["w1"] = w(D, F);
            c.inputs["w3"] = w(D, F);
            c.inputs["w2"] = w(F, D);
            break;
        case Op::block:
        case Op::decode:
            c.inputs["attn_norm"] = random(rng, 1, D, 0.1, 1.0);
            c.inputs["wq"] = w(D, Q);
            c.inputs["wk"] = w(D, KVW);
            c.inputs["wv"] = w(D, KVW);
            c.inputs["wo"] = w(Q, D);
            c.inputs["ffn_norm"] = random(rng, 1, D, 0.1, 1.0);
            c.inputs["w1"] = w(D, F);
            c.inputs["w3"] = w(D, F);
            c.inputs["w2"] = w(F, D);
            if (cfg.qk_norm) {
                c.inputs["q_norm"] = random(rng, 1, cfg.head_dim, 0.1, 1.0);
                c.inputs["k_norm"] = random(rng, 1, cfg.head_dim, 0.1, 1.0);
            }
            if (op == Op::block) {
                c.inputs["x"] = random(rng, T, D, 1.0);
                c.positions["positions"] = range(0, T);
                in.keys = T;
            } else {
                in.context_x = random(rng, context, D, 1.0);
                in.context_pos = range(0, context);
                c.inputs["x"] = random(rng, 1, D, 1.0);
                c.positions["positions"] = {context};
                c.prefill = 0;
                in.keys = context + 1;
            }
            break;
    }
    return in;
}

// Input set k of the same op and sizes: the activations (x, q, k, v, the
// decode context) drawn again, RoPE's positions moved; weights shared (they
// cross a worker's pipe on every call anyway).
Inputs input_set(const Inputs& base, int k) {
    if (k == 0) return base;
    Inputs in = base;
    std::mt19937 rng(1234u + 7919u * static_cast<unsigned>(k));
    for (const char* name : {"x", "q", "k", "v"})
        if (auto it = in.c.inputs.find(name); it != in.c.inputs.end())
            it->second = random(rng, it->second.rows(), it->second.cols(), 1.0);
    if (!in.context_x.data.empty()) in.context_x = random(rng, in.context_x.rows(), in.context_x.cols(), 1.0);
    if (in.c.op == Op::rope)
        for (int64_t& p : in.c.positions["positions"]) p += 101 * k;
    return in;
}

View view_of(const Case& c, const char* name) {
    auto it = c.inputs.find(name);
    return it == c.inputs.end() ? View{} : it->second.view();
}
Positions positions_of(const Case& c, const char* name) {
    auto it = c.positions.find(name);
    return it == c.positions.end() ? Positions{} : Positions{it->second.data(), static_cast<int64_t>(it->second.size())};
}

BenchInputs bench_inputs(const Inputs& in) {
    const Case& c = in.c;
    BenchInputs b;
    b.op = c.op;
    b.config = c.config;
    b.x = view_of(c, "x");
    b.weight = view_of(c, "weight");
    b.q = view_of(c, "q");
    b.k = view_of(c, "k");
    b.v = view_of(c, "v");
    b.w1 = view_of(c, "w1");
    b.w3 = view_of(c, "w3");
    b.w2 = view_of(c, "w2");
    b.pos = positions_of(c, "positions");
    b.q_pos = positions_of(c, "q_positions");
    b.k_pos = positions_of(c, "k_positions");
    if (c.op == Op::block || c.op == Op::decode) {
        BlockWeights& w = b.weights;
        w.attn_norm = view_of(c, "attn_norm");
        w.wq = view_of(c, "wq");
        w.wk = view_of(c, "wk");
        w.wv = view_of(c, "wv");
        w.wo = view_of(c, "wo");
        w.ffn_norm = view_of(c, "ffn_norm");
        w.w1 = view_of(c, "w1");
        w.w3 = view_of(c, "w3");
        w.w2 = view_of(c, "w2");
        w.q_norm = view_of(c, "q_norm");
        w.k_norm = view_of(c, "k_norm");
    }
    if (c.op == Op::decode) {
        b.context_x = in.context_x.view();
        b.context_pos = Positions{in.context_pos.data(), static_cast<int64_t>(in.context_pos.size())};
    }
    return b;
}

// ---- runners -----------------------------------------------------------------------

constexpr int kSets = 4;  // input sets an interface runner rotates among

struct Runner {
    std::string impl;    // "simd", "torch", "scalar"
    std::string dtype;   // what it stores
    std::string detail;  // simd: the target
    std::function<void()> run;
    std::function<std::vector<float>()> output;
    std::vector<double> times;
    std::function<double()> device_seconds = {};  // cuda: the run between device events, not host wall time
    // Interface runners: choose the input set of the next run, perturb a few
    // of its elements and re-poison the output buffer (untimed); sets > 1 then.
    std::function<void(int)> prepare = {};
    // Interface runners: torch's answer for the inputs of the last run as
    // they were perturbed (untimed), to check it against.
    std::function<std::vector<float>()> truth = {};
    int sets = 1;
    worker::WorkerImpl* worker = nullptr;  // a worker: its own seconds and bytes per call
    std::vector<double> worker_times = {};
    uint64_t bytes_per_call = 0;
    // What the checks found: the largest rel diff vs torch over the compared
    // runs, how many were compared, and the first bad one.
    double check = NAN;
    int compared = 0;
    std::string bad = {};
};

// scalar, a plugin or a command worker (--impl-lib, --impl-cmd), through the
// Implementation interface: no persistent cache, so no decode. A worker's
// time is the round trip conform sees: the inputs down the pipe, the kernel,
// the worker's checks, the outputs back.
Runner interface_runner(const std::string& name, std::shared_ptr<Implementation> impl,
                        std::shared_ptr<std::vector<Inputs>> sets) {
    const Case& c = sets->front().c;
    const int64_t rows = c.in(c.op == Op::attention ? "q" : "x").rows();
    const int64_t cols = c.op == Op::attention ? c.config.q_width() : c.in("x").cols();
    auto out = std::make_shared<Tensor>(rows, cols);
    auto current = std::make_shared<size_t>(0);
    auto b = std::make_shared<std::vector<BenchInputs>>();
    for (const Inputs& in : *sets) b->push_back(bench_inputs(in));
    Runner r{name, to_string(impl->dtype()), "", {}, {}, {}};
    r.run = [impl, out, b, current, sets] {
        const BenchInputs& in = (*b)[*current];
        switch (in.op) {
            case Op::rmsnorm: impl->rmsnorm(in.x, in.weight, rmsnorm_params(in.config), out->mut()); break;
            case Op::qk_norm: impl->qk_norm(in.x, in.weight, qk_norm_params(in.config), out->mut()); break;
            case Op::rope: impl->rope(in.x, in.pos, rope_params(in.config), out->mut()); break;
            case Op::attention:
                impl->attention(in.q, in.k, in.v, in.q_pos, in.k_pos, attention_params(in.config), out->mut());
                break;
            case Op::swiglu: impl->swiglu(in.x, in.w1, in.w3, in.w2, out->mut()); break;
            case Op::block: {
                BlockOutputs bo;
                bo[Tap::out] = out->mut();
                impl->block(in.x, in.weights, in.pos, in.config, bo);
                break;
            }
            case Op::decode: throw std::logic_error("no decode bench through the interface");
        }
    };
    // NaN in every element: what an implementation leaves unwritten stays NaN,
    // not the last run's answer. And no two runs with the same inputs: a few
    // elements of the activations (x; attention's q) are scaled by a factor
    // drawn per run, so an implementation that remembers the input sets (or
    // any input it has seen) has nothing to look up and must compute; the
    // checks compare with torch on the inputs as they were (truth).
    auto draw = std::make_shared<std::mt19937_64>(std::random_device{}());
    r.prepare = [out, current, b, sets, draw](int set) {
        *current = static_cast<size_t>(set) % b->size();
        Case& c = (*sets)[*current].c;
        Tensor& t = c.inputs.at(c.op == Op::attention ? "q" : "x");
        std::uniform_int_distribution<size_t> at(0, t.data.size() - 1);
        std::uniform_real_distribution<float> by(1.0f / 512, 1.0f / 256);
        for (int i = 0; i < 8; ++i) t.data[at(*draw)] *= 1.0f + by(*draw);
        std::fill(out->data.begin(), out->data.end(), std::numeric_limits<float>::quiet_NaN());
    };
    r.truth = [current, sets] {
        const Inputs& in = (*sets)[*current];
        auto t = ref::make_torch_bench_op(in.c, &in.context_x, &in.context_pos);
        t->run();
        return t->output();
    };
    r.sets = static_cast<int>(sets->size());
    r.output = [out] { return out->data; };
    return r;
}

// max |a - b| / max |b|: a benchmark that computes something else is not a
// benchmark. A non-finite element of a where b's is finite is infinitely far
// (std::max(num, NaN) would quietly keep num: an all-NaN output compared as 0).
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || b.empty()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!std::isfinite(b[i])) continue;
        if (!std::isfinite(a[i])) return INFINITY;
        num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
        den = std::max(den, std::abs(static_cast<double>(b[i])));
    }
    return den > 0 ? num / den : num;
}

// The first non-finite element where the expected one is finite, or -1.
int64_t first_nonfinite(const std::vector<float>& a, const std::vector<float>* expected) {
    for (size_t i = 0; i < a.size(); ++i)
        if (!std::isfinite(a[i]) && (!expected || i >= expected->size() || std::isfinite((*expected)[i])))
            return static_cast<int64_t>(i);
    return -1;
}

// Between timed runs: the previous implementation's idle threads (simd's pool,
// LibTorch's OpenMP team) spin for a while after a job before they sleep; a
// pause keeps that spin out of the next implementation's time.
void settle(double ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

struct Options {
    std::string impls;  // default simd,torch (torch and the plugins with --impl-lib)
    std::string ops = "rmsnorm,rope,qk_norm,attention,swiglu,block,decode";
    config::ConfigOptions config;  // default: the tinyllama-1.1b preset
    std::string tokens = "1,64,512";
    std::string dtypes = "f32,bf16";
    int64_t context = 512;
    double min_time = 1.0;
    int min_reps = 5;
    int max_reps = 200;
    int threads = 0;
    WorkerFlags workers;
    double settle_ms = 2;
    std::string simd_target;
    bool json = false;
};

std::string fmt_time(double s) {
    if (s >= 1) return fmt::format("{:.3f} s", s);
    if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.1f} us", s * 1e6);
}

int run_bench(const Options& o) {
    using nlohmann::json;
    std::ostream& log = o.json ? std::cerr : std::cout;
    config::ModelConfig model;
    try {
        model = config::resolve_config(o.config, config::find_preset("tinyllama-1.1b")->model());
    } catch (const config::ConfigError& e) {
        std::cerr << "conform bench: " << e.what() << "\n";
        return kUsage;
    }
    std::vector<Op> ops;
    for (const auto& name : split(o.ops == "all" ? "rmsnorm,rope,qk_norm,attention,swiglu,block,decode" : o.ops)) {
        auto op = parse_op(name);
        if (!op) {
            std::cerr << "conform bench: --op: unknown op '" << name << "'\n";
            return kUsage;
        }
        ops.push_back(*op);
    }
    std::vector<int64_t> tokens;
    for (const auto& t : split(o.tokens)) {
        try {
            tokens.push_back(std::stoll(t));
        } catch (const std::exception&) {
            tokens.push_back(0);
        }
        if (tokens.back() <= 0) {
            std::cerr << "conform bench: --tokens: expected positive counts, found '" << t << "'\n";
            return kUsage;
        }
    }
    std::vector<DType> dtypes;
    for (const auto& d : split(o.dtypes)) {
        auto dt = parse_dtype(d);
        if (!dt || *dt == DType::f16) {
            std::cerr << "conform bench: --dtype: expected f32 or bf16, found '" << d << "'\n";
            return kUsage;
        }
        dtypes.push_back(*dt);
    }
    // Workers (--impl-lib, --impl-cmd, --impl-fd): each a process, timed per round trip.
    run::ImplRequest wr;
    apply_worker_flags(o.workers, wr);
    wr.names = {"-"};  // only the workers: no in-repo implementation is made here
    wr.repeat_fraction = 0;  // bench checks every output itself; a repeated call would be timed
    std::vector<std::shared_ptr<worker::WorkerImpl>> workers;
    {
        run::ImplRequest only = wr;
        only.names.clear();
        if (only.has_workers()) {
            run::ImplSet set = run::choose_implementations(only);
            for (auto& c : set.impls)
                if (c.worker) {
                    c.impl.release();
                    workers.emplace_back(c.worker);
                }
        }
    }
    auto find_worker = [&](const std::string& n) -> std::shared_ptr<worker::WorkerImpl> {
        for (const auto& w : workers)
            if (w->hello().name == n) return w;
        return nullptr;
    };
    // Given only workers, the workers against torch.
    std::string impl_list = o.impls;
    if (impl_list.empty()) {
        impl_list = "simd,torch";
        if (!workers.empty()) {
            impl_list = "torch";
            for (const auto& w : workers) impl_list += "," + w->hello().name;
        }
    }
    const std::vector<std::string> impls = split(impl_list == "all" ? "simd,torch,scalar" : impl_list);
    // torch, scalar (through the interface), plugins, and every implementation with a bench op.
    std::string benched = "torch, scalar";
    for (const auto& e : implementations())
        if (e.bench) benched += ", " + e.name;
    for (const auto& i : impls) {
        const ImplEntry* e = find_implementation(i);
        if (i != "torch" && i != "scalar" && !(e && e->bench) && !find_worker(i)) {
            std::cerr << "conform bench: --impl: '" << i << "' is not benchmarked (" << benched
                      << (workers.empty() ? "" : ", or a worker of --impl-lib / --impl-cmd / --impl-fd") << ")\n";
            return kUsage;
        }
    }
    const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    ref::set_torch_threads(threads);
    const BlockConfig& cfg = model.block;

    // ---- ceilings, measured now ----------------------------------------------
    log << "conform bench: " << model.name << " (" << config::describe(cfg) << "), " << threads << " threads\n";
    for (const auto& d : model.defaults) log << "  default taken: " << d << "\n";
    for (const auto& d : model.overrides) log << "  override: " << d << "\n";
    log << "  torch: " << ref::torch_describe() << "\n";
    const ref::Ceilings ceilings = ref::measure_ceilings(threads);
    const double bw = ceilings.copy_bytes_per_s, peak = ceilings.matmul_flops_per_s;
    const int64_t mm_n = ceilings.matmul_n;
    log << fmt::format("  ceilings: copy {:.1f} GB/s (256 MiB, read + write), LibTorch f32 matmul {:.1f} GFLOP/s "
                       "({}^3); ridge {:.1f} FLOP/byte\n",
                       bw / 1e9, peak / 1e9, mm_n, peak / bw);

    // ---- what a worker call costs by itself --------------------------------------
    // A call with next to nothing in it (8 floats): the round trip whatever the
    // kernel, beside the worker's own time for it.
    json trivial_json = json::array();
    for (const auto& w : workers) {
        BlockConfig c;
        c.d_model = 8;
        c.head_dim = 8;
        c.n_heads = c.n_kv_heads = 1;
        Tensor x(1, 8), weight(1, 8), out(1, 8);
        for (size_t i = 0; i < 8; ++i) {
            x.data[i] = 0.125f * static_cast<float>(i + 1);
            weight.data[i] = 1.0f;
        }
        const int64_t pos0 = 3;
        const Positions pos{&pos0, 1};
        std::function<void()> call;
        std::string what;
        if (w->supports(Op::rmsnorm, c).ok) {
            what = "rmsnorm [1,8]";
            call = [&] { w->rmsnorm(x.view(), weight.view(), rmsnorm_params(c), out.mut()); };
        } else if (w->supports(Op::rope, c).ok) {
            what = "rope [1,8]";
            call = [&] { w->rope(x.view(), pos, rope_params(c), out.mut()); };
        } else {
            continue;
        }
        std::vector<double> rt, ws;
        try {
            // Each call's first input element its own (untimed): a worker that
            // remembers inputs has nothing to remember this price by.
            for (int i = 0; i < 20; ++i) {
                x.data[0] = 0.001f * static_cast<float>(i + 1);
                call();
            }
            for (int i = 0; i < 300; ++i) {
                x.data[0] = 0.001f * static_cast<float>(i + 21);
                const auto s0 = Clock::now();
                call();
                rt.push_back(seconds_since(s0));
                if (w->stats().last_worker_seconds >= 0) ws.push_back(w->stats().last_worker_seconds);
            }
        } catch (const std::exception& e) {
            log << "  worker " << w->hello().name << ": a trivial call failed: " << e.what() << "\n";
            continue;
        }
        const double rt_med = quantile(rt, 0.5), ws_med = ws.empty() ? NAN : quantile(ws, 0.5);
        log << fmt::format("  worker {}: a trivial call ({}) costs {} round trip{}: the price of a call itself\n",
                           w->hello().name, what, fmt_time(rt_med),
                           ws.empty() ? std::string() : fmt::format(", {} of it in the kernel as the worker claims", fmt_time(ws_med)));
        json tj = {{"impl", w->hello().name}, {"call", what}, {"round_trip_median_s", rt_med},
                   {"round_trip_p25_s", quantile(rt, 0.25)}, {"round_trip_p75_s", quantile(rt, 0.75)}};
        if (!ws.empty()) tj["worker_seconds_median_claimed"] = ws_med;  // the worker's word, not a measurement
        trivial_json.push_back(tj);
    }

    json results = json::array();
    struct Row {
        std::string op, impl, dtype, detail;
        int64_t T;
        double median, p25, p75, min;
        int reps;
        Cost k;
        double ratio, check;
        int sets = 1, compared = 0;
        std::string bad;                     // the first NaN/Inf or disagreement found
        double worker_median = NAN;          // a worker: its own time per call (the kernel)
        uint64_t bytes_per_call = 0;         // a worker: bytes through its pipes per call
    };
    std::vector<Row> rows;
    // Which repetitions are compared with torch: a random quarter, drawn here
    // (a plugin cannot tell a compared call from another).
    std::mt19937_64 pick(std::random_device{}());

    for (Op op : ops) {
        for (int64_t T : tokens) {
            if (op == Op::decode && T != 1) continue;  // a decode step is one token
            const Inputs in = make_inputs(op, cfg, T, o.context);
            std::shared_ptr<std::vector<Inputs>> sets;  // the interface runners' input sets, made on first need
            auto input_sets = [&] {
                if (!sets) {
                    sets = std::make_shared<std::vector<Inputs>>();
                    for (int k = 0; k < kSets; ++k) sets->push_back(input_set(in, k));
                }
                return sets;
            };
            std::vector<Runner> runners;
            std::unique_ptr<ref::TorchBenchOp> torch_op;
            for (const auto& impl : impls) {
                if (impl == "torch") {
                    torch_op = ref::make_torch_bench_op(in.c, &in.context_x, &in.context_pos);
                    ref::TorchBenchOp* t = torch_op.get();
                    runners.push_back({"torch", "f32", "", [t] { t->run(); }, [t] { return t->output(); }, {}});
                } else if (impl == "scalar") {
                    if (op == Op::decode || T > 64) continue;  // no cache in the interface; too slow past 64
                    runners.push_back(interface_runner(
                        "scalar", std::shared_ptr<Implementation>(find_implementation("scalar")->create({})),
                        input_sets()));
                } else if (auto w = find_worker(impl)) {
                    if (op == Op::decode) continue;  // no cache in the interface
                    if (!w->supports(op, in.c.config).ok) continue;  // e.g. a rope-only plugin
                    Runner r = interface_runner(impl, w, input_sets());
                    r.worker = w.get();
                    runners.push_back(std::move(r));
                } else {
                    // An implementation with its own bench op (its registry
                    // entry's factory, conform/bench.h): simd, cuda.
                    const ImplEntry* e = find_implementation(impl);
                    for (DType d : dtypes) {
                        ImplOptions io;
                        io.dtype = d;
                        io.threads = threads;
                        io.simd_target = o.simd_target;
                        std::shared_ptr<BenchOp> b;
                        try {
                            if (const Availability a = e->available(); !a.available) throw ImplError(a.reason);
                            b = e->bench(io, bench_inputs(in));
                        } catch (const std::exception& ex) {
                            std::cerr << "conform bench: " << impl << ": " << ex.what() << "\n";
                            return kUnavailable;
                        }
                        Runner r{impl, to_string(d), b->where(), [b] { b->run(); }, [b] { return b->output(); }, {}};
                        if (b->device_seconds() >= 0) r.device_seconds = [b] { return b->device_seconds(); };
                        runners.push_back(std::move(r));
                    }
                }
            }
            if (runners.empty()) continue;

            // Warm up (caches, page faults, the pool's threads), then interleave.
            for (auto& r : runners)
                for (int i = 0; i < 2; ++i) {
                    if (r.prepare) r.prepare(i);
                    r.run();
                }
            Runner* torch_r = nullptr;
            for (auto& r : runners)
                if (r.impl == "torch") torch_r = &r;
            // torch's answer for the one input set of the runners with their
            // own bench op; the interface runners, which rotate and perturb
            // their sets, ask torch about each compared run (Runner::truth).
            std::vector<float> expected;
            if (torch_r) expected = torch_r->output();
            // Outside the timed region: NaN/Inf in any run fails; `compare`
            // runs are measured against torch's answer for their input set.
            auto inspect = [&](Runner& r, int set, int rep, bool compare) {
                if (&r == torch_r || !r.bad.empty()) return;
                const std::vector<float> got = r.output();
                // A perturbing runner: torch on the inputs it was given, when compared.
                std::vector<float> perturbed;
                if (r.truth && torch_r && compare) perturbed = r.truth();
                const std::vector<float>* want = r.truth ? (compare && torch_r ? &perturbed : nullptr)
                                                 : !expected.empty()           ? &expected
                                                                               : nullptr;
                if (const int64_t i = first_nonfinite(got, want); i >= 0) {
                    r.bad = fmt::format("{} at element {} in repetition {} (input set {})", std::isnan(got[i]) ? "NaN" : "Inf",
                                        i, rep, set);
                    r.check = INFINITY;
                    return;
                }
                if (!compare || !want) return;
                const double d = rel_diff(got, *want);
                r.check = r.compared++ ? std::max(r.check, d) : d;
                const double limit = r.dtype == "bf16" ? 1e-1 : 1e-3;  // bf16 against f32: its rounding shows
                if (!(d <= limit))
                    r.bad = fmt::format("max rel diff {:.2e} in repetition {} (input set {})", d, rep, set);
            };
            const auto t0 = Clock::now();
            for (int round = 0; round < o.max_reps; ++round) {
                if (round >= o.min_reps && seconds_since(t0) >= o.min_time) break;
                for (size_t j = 0; j < runners.size(); ++j) {
                    Runner& r = runners[(j + static_cast<size_t>(round)) % runners.size()];
                    const int set = round % r.sets;
                    settle(o.settle_ms);
                    // The pause lets the cores idle down: a sub-millisecond op timed
                    // right after it measures the wake-up (rmsnorm at T=512 read 2.3x
                    // slower). One untimed call brings the clocks and this
                    // implementation's threads back up; the next one is timed.
                    if (o.settle_ms > 0) {
                        if (r.prepare) r.prepare(set);
                        r.run();
                    }
                    if (r.prepare) r.prepare(set);
                    uint64_t bytes0 = 0;
                    if (r.worker) bytes0 = r.worker->stats().bytes_sent + r.worker->stats().bytes_received;
                    const auto s = Clock::now();
                    r.run();
                    r.times.push_back(r.device_seconds ? r.device_seconds() : seconds_since(s));
                    if (r.worker) {
                        if (r.worker->stats().last_worker_seconds >= 0)
                            r.worker_times.push_back(r.worker->stats().last_worker_seconds);
                        r.bytes_per_call = r.worker->stats().bytes_sent + r.worker->stats().bytes_received - bytes0;
                    }
                    inspect(r, set, round, pick() % 4 == 0 || round == 0);
                }
            }
            // One more run of every set, each compared: no set goes unchecked.
            for (auto& r : runners)
                for (int k = 0; r.prepare && k < r.sets; ++k) {
                    r.prepare(k);
                    r.run();
                    inspect(r, k, -1, true);
                }

            const double torch_median = torch_r ? quantile(torch_r->times, 0.5) : 0;
            for (const auto& r : runners) {
                Row row;
                row.op = to_string(op);
                row.impl = r.impl;
                row.dtype = r.dtype;
                row.detail = r.detail;
                row.T = T;
                row.median = quantile(r.times, 0.5);
                row.p25 = quantile(r.times, 0.25);
                row.p75 = quantile(r.times, 0.75);
                row.min = *std::min_element(r.times.begin(), r.times.end());
                row.reps = static_cast<int>(r.times.size());
                row.k = cost(op, model, T, o.context, r.dtype == "bf16" ? 2.0 : 4.0);
                row.ratio = torch_r ? row.median / torch_median : NAN;
                row.check = torch_r && &r != torch_r ? r.check : NAN;
                row.sets = r.sets;
                row.compared = r.compared;
                row.bad = r.bad;
                if (!r.worker_times.empty()) row.worker_median = quantile(r.worker_times, 0.5);
                row.bytes_per_call = r.bytes_per_call;
                rows.push_back(row);
            }
        }
    }

    // ---- report ----------------------------------------------------------------
    const double ridge = ceilings.ridge();
    size_t iw = 6;  // impl column: plugin names may be longer than ours
    for (const Row& r : rows) iw = std::max(iw, r.impl.size() + 1);
    if (!o.json) {
        std::cout << fmt::format("\n{:<10}{:>5}  {:<{}}{:<6}{:>11}{:>7}{:>9}{:>8}{:>7}{:>9}{:>8}{:>9}\n", "op", "T", "impl",
                                 iw, "dtype", "median", "+-", "GFLOP/s", "GB/s", "AI", "roof", "/torch", "check");
    }
    for (const Row& r : rows) {
        const double gflops = r.k.flops / r.median / 1e9, gbs = r.k.bytes / r.median / 1e9;
        const double ai = r.k.flops / r.k.bytes;
        const bool compute_bound = ai >= ridge;
        const double roof = compute_bound ? r.k.flops / r.median / peak : r.k.bytes / r.median / bw;
        const double spread = (r.p75 - r.p25) / 2 / r.median;
        json j = {{"op", r.op},
                  {"T", r.T},
                  {"impl", r.impl},
                  {"dtype", r.dtype},
                  {"target", r.detail},
                  {"reps", r.reps},
                  {"median_s", r.median},
                  {"p25_s", r.p25},
                  {"p75_s", r.p75},
                  {"min_s", r.min},
                  {"flops", r.k.flops},
                  {"bytes", r.k.bytes},
                  {"weight_bytes", r.k.weight_bytes},
                  {"gflops", gflops},
                  {"gbytes_per_s", gbs},
                  {"intensity", ai},
                  {"bound", compute_bound ? "compute" : "memory"},
                  {"fraction_of_ceiling", roof}};
        if (!std::isnan(r.ratio)) j["time_vs_torch"] = r.ratio;
        if (!std::isnan(r.check)) j["max_rel_diff_vs_torch"] = r.check;
        j["input_sets"] = r.sets;
        j["compared_runs"] = r.compared;
        if (!r.bad.empty()) j["bad"] = r.bad;
        if (!std::isnan(r.worker_median)) {
            j["worker_seconds_median_claimed"] = r.worker_median;  // the worker's word, not a measurement
            j["round_trip_overhead_s"] = r.median - r.worker_median;
        }
        if (r.bytes_per_call) j["bytes_per_call"] = r.bytes_per_call;
        if (r.k.weight_bytes > 0) {
            j["weight_gbytes_per_s"] = r.k.weight_bytes / r.median / 1e9;
            j["weight_fraction_of_copy"] = r.k.weight_bytes / r.median / bw;
        }
        results.push_back(j);
        if (o.json) continue;
        std::cout << fmt::format("{:<10}{:>5}  {:<{}}{:<6}{:>11}{:>6.1f}%{:>9.1f}{:>8.1f}{:>7.1f}{:>6.0f}% {}{:>8}{:>9}\n",
                                 r.op, r.T, r.impl, iw, r.dtype, fmt_time(r.median), 100 * spread, gflops, gbs, ai,
                                 100 * roof, compute_bound ? "F" : "B",
                                 std::isnan(r.ratio) ? "-" : fmt::format("{:.2f}", r.ratio),
                                 std::isnan(r.check) ? "" : fmt::format("{:.0e}", r.check));
    }
    if (o.json) {
        json out = {{"schema", "conform-bench/1"},
                    {"preset", model.name},
                    {"model", config::config_json(model)},
                    {"config", config::describe(cfg)},
                    {"threads", threads},
                    {"context", o.context},
                    {"torch", ref::torch_describe()},
                    {"simd", find_implementation("simd")->details()},
                    {"ceilings",
                     {{"copy_bytes_per_s", bw}, {"matmul_flops_per_s", peak}, {"matmul_n", mm_n}, {"ridge", ridge}}},
                    {"worker_round_trips", trivial_json},
                    {"results", results}};
        std::cout << out.dump(2) << "\n";
    } else {
        std::cout << "\nmedian of interleaved runs after warm-up; +- half the interquartile range; roof: fraction of\n"
                     "the copy bandwidth (B) or the LibTorch matmul rate (F), whichever bounds the op's intensity;\n"
                     "/torch: time over LibTorch f32's; check: max |out - torch| / max |torch|.\n";
        for (const Row& r : rows)
            if (r.k.weight_bytes > 0 && r.op == "decode")
                std::cout << fmt::format("decode {} {}: weights streamed at {:.1f} GB/s = {:.0f}% of copy bandwidth\n",
                                         r.impl, r.dtype, r.k.weight_bytes / r.median / 1e9,
                                         100 * r.k.weight_bytes / r.median / bw);
    }
    if (!o.json) {
        bool any = false;
        for (const Row& r : rows) {
            if (std::isnan(r.worker_median)) continue;
            if (!any) std::cout << "\nworkers: the round trip conform timed; the time in the kernel the worker "
                                   "claims (its own report, not measured by conform), and the rest, per call:\n";
            any = true;
            std::cout << fmt::format("  {} {} T={}: {} round trip (measured), {} in the kernel (claimed), {} the rest; "
                                     "{:.3g} MB through the pipes\n",
                                     r.impl, r.op, r.T, fmt_time(r.median), fmt_time(r.worker_median),
                                     fmt_time(r.median - r.worker_median), static_cast<double>(r.bytes_per_call) / 1e6);
        }
    }
    int rc = kConform;
    for (const Row& r : rows) {
        if (r.bad.empty()) continue;
        if (r.bad.rfind("max rel diff", 0) == 0)
            std::cerr << fmt::format("conform bench: {} {} T={} disagrees with torch: {}\n", r.impl, r.op, r.T, r.bad);
        else
            std::cerr << fmt::format("conform bench: {} {} T={} returned {}: a benchmark of output that is not finite "
                                     "is no benchmark\n",
                                     r.impl, r.op, r.T, r.bad);
        rc = kNonconformance;
    }
    return rc;
}

}  // namespace

Command add_bench(CLI::App& app) {
    auto o = std::make_shared<Options>();
    CLI::App* sub = app.add_subcommand(
        "bench", "time each op per implementation against LibTorch f32, with the machine's ceilings measured alongside");
    sub->add_option("--impl", o->impls,
                    "simd, torch, scalar, cuda, a plugin's name, comma-separated, or all (default simd,torch; with "
                    "--impl-lib: torch and the plugins)");
    add_worker_flags(*sub, o->workers, false);
    sub->add_option("--op", o->ops, "ops, comma-separated, or all (default all; decode is one token after --context)");
    // --preset, --config, --d-model, ... (config/options.h); default the tinyllama-1.1b preset
    config::add_config_options(*sub, o->config);
    sub->add_option("--tokens", o->tokens, "token counts T, comma-separated (default 1,64,512)");
    sub->add_option("--dtype", o->dtypes, "simd storage dtypes, comma-separated (default f32,bf16; torch is f32)");
    sub->add_option("--context", o->context, "decode, and attention at T=1: tokens already cached (default 512)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--min-time", o->min_time, "seconds of timed rounds per op and T, at least (default 1)");
    sub->add_option("--min-reps", o->min_reps, "timed rounds per op and T, at least (default 5)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--max-reps", o->max_reps, "timed rounds per op and T, at most (default 200)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--threads", o->threads, "threads for every implementation (default: every core)")
        ->check(CLI::NonNegativeNumber);
    sub->add_option("--simd-target", o->simd_target, "simd: this compiled Highway target instead of the best");
    sub->add_option("--settle-ms", o->settle_ms, "pause before each timed run, in ms (default 2)")
        ->check(CLI::NonNegativeNumber);
    sub->add_flag("--json", o->json, "print the results as JSON (schema conform-bench/1) instead of the table");
    return {sub, [o] { return run_bench(*o); }};
}

}  // namespace conform::cli

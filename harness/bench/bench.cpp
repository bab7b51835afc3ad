#include "bench/bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <thread>

#include "bench/inputs.h"
#include "config/anatomy.h"
#include "reference/bench_torch.h"
#include "reference/blas.h"
#include "registry.h"
#include "worker/client.h"

namespace conform::bench {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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
    bool on_device = false;                       // cuda, torch-cuda: priced against the device's ceilings
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
    const std::vector<int64_t> shape = output_shape(c, "out");
    auto out = std::make_shared<Tensor>(shape[0], shape[1]);
    // paged_attention's second output, which every call must be given.
    const std::vector<int64_t> lse_shape = op_info(c.op).output("lse") ? output_shape(c, "lse") : std::vector<int64_t>{0, 0};
    auto lse = std::make_shared<Tensor>(lse_shape[0], lse_shape[1]);
    auto current = std::make_shared<size_t>(0);
    Runner r{name, to_string(impl->dtype()), "", {}, {}, {}};
    // Each set's call made here, so the timed run only invokes it.
    auto calls = std::make_shared<std::vector<CaseCall>>();
    for (const Inputs& in : *sets) {
        calls->emplace_back(in.c);
        calls->back().outputs["out"] = out->mut();
        if (lse->numel()) calls->back().outputs["lse"] = lse->mut();
    }
    r.run = [impl, current, sets, calls] {
        CaseCall& call = (*calls)[*current];
        call_op(*impl, call.c.op, call.c.config, call);
    };
    // NaN in every element: what an implementation leaves unwritten stays NaN,
    // not the last run's answer. And no two runs with the same inputs: a few
    // elements of the activations (x; attention's q) are scaled by a factor
    // drawn per run, so an implementation that remembers the input sets (or
    // any input it has seen) has nothing to look up and must compute; the
    // checks compare with torch on the inputs as they were (truth).
    auto draw = std::make_shared<std::mt19937_64>(std::random_device{}());
    r.prepare = [out, current, sets, draw](int set) {
        *current = static_cast<size_t>(set) % sets->size();
        Case& c = (*sets)[*current].c;
        Tensor& t = c.inputs.at(op_info(c.op).inputs.front().name);  // the activations: x, or q
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

}  // namespace

Result run(const Request& o, std::ostream& log) {
    const BlockConfig& cfg = o.model.block;
    auto find_worker = [&](const std::string& n) -> std::shared_ptr<worker::WorkerImpl> {
        for (const auto& w : o.workers)
            if (w->hello().name == n) return w;
        return nullptr;
    };
    Result res;
    ref::set_torch_threads(o.threads);

    // ---- ceilings, measured now ----------------------------------------------
    log << "conform bench: " << o.model.name << " (" << config::describe(cfg) << "), " << o.threads << " threads\n";
    for (const auto& d : o.model.defaults) log << "  default taken: " << d << "\n";
    for (const auto& d : o.model.overrides) log << "  override: " << d << "\n";
    log << "  torch: " << ref::torch_describe() << "\n";
    if (!ref::blas::chosen().line.empty()) log << "  BLAS: " << ref::blas::chosen().line << "\n";
    res.ceilings = ref::measure_ceilings(o.threads);
    res.peak = measure_peak(o.threads);
    const Peak& a = res.peak;
    log << fmt::format(
        "  ceilings: copy {:.1f} GB/s (256 MiB, read + write), read {:.1f} GB/s (256 MiB), LibTorch f32 matmul "
        "{:.1f} GFLOP/s ({}^3)\n",
        res.ceilings.copy_bytes_per_s / 1e9, a.read_bytes_per_s / 1e9, res.ceilings.matmul_flops_per_s / 1e9,
        res.ceilings.matmul_n);
    log << fmt::format("  arithmetic ({} threads, Highway {}, {} f32 lanes): f32 FMA loop {:.1f} GFLOP/s", a.threads,
                       a.target, a.f32_lanes, a.f32_fma / 1e9);
    if (a.ghz > 0)
        log << fmt::format(" (nominal {:.1f}: {} lanes x 2 x {} FMA/cycle x {:.2f} GHz x {})", a.f32_nominal / 1e9,
                           a.f32_lanes, a.fma_pipes, a.ghz, a.threads);
    log << fmt::format("; bf16 dot {}Highway's {:.1f} GFLOP/s{}\n",
                       a.bf16_native > 0 ? fmt::format("vdpbf16ps {:.1f}, ", a.bf16_native / 1e9) : "",
                       a.bf16_highway / 1e9,
                       a.bf16_native > 0 ? " (Highway 1.0.3 has no target that uses vdpbf16ps)" : "");
    log << fmt::format("  ridge {:.1f} FLOP/byte in f32; a row's roof is the best ceiling measured for its dtype\n",
                       flops_ceiling(res, "f32").rate / bytes_ceiling(res).rate);
    // A GPU's ceilings, through LibTorch on it, where something runs there.
    const bool device_asked = std::any_of(o.impls.begin(), o.impls.end(), [](const std::string& i) {
        const ImplEntry* e = find_implementation(i);
        return i == "torch-cuda" || (e && e->bench && e->on_device);
    });
    if (device_asked && ref::torch_cuda_available()) {
        const ref::TorchCudaCeilings d = ref::torch_cuda_ceilings();
        res.device = d;
        log << fmt::format(
            "  device ceilings ({}): copy {:.1f} GB/s (1 GiB device to device, read + write), matmul ({}^3) "
            "{:.1f} TFLOP/s f32, {:.1f} TFLOP/s bf16\n",
            ref::torch_cuda_describe(), d.copy_bytes_per_s / 1e9, d.matmul_n, d.f32_flops_per_s / 1e12,
            d.bf16_flops_per_s / 1e12);
    } else if (device_asked) {
        std::string why;
        ref::torch_cuda_available(&why);
        log << "  device ceilings: not measured (" << why << "); device rows have no roof\n";
    }

    // ---- what a worker call costs by itself --------------------------------------
    // A call with next to nothing in it (8 floats): the round trip whatever the
    // kernel, beside the worker's own time for it.
    for (const auto& w : o.workers) {
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
                           ws.empty() ? std::string()
                                      : fmt::format(", {} of it in the kernel as the worker claims", fmt_time(ws_med)));
        json tj = {{"impl", w->hello().name},
                   {"call", what},
                   {"round_trip_median_s", rt_med},
                   {"round_trip_p25_s", quantile(rt, 0.25)},
                   {"round_trip_p75_s", quantile(rt, 0.75)}};
        if (!ws.empty()) tj["worker_seconds_median_claimed"] = ws_med;  // the worker's word, not a measurement
        res.worker_round_trips.push_back(tj);
    }

    // Which repetitions are compared with torch: a random quarter, drawn here
    // (a plugin cannot tell a compared call from another).
    std::mt19937_64 pick(std::random_device{}());

    std::set<std::string> untimed;  // "impl dtype op" said not timed
    for (Op op : o.ops) {
        for (int64_t T : o.tokens) {
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
            for (const auto& impl : o.impls) {
                if (impl == "torch") {
                    torch_op = ref::make_torch_bench_op(in.c, &in.context_x, &in.context_pos);
                    ref::TorchBenchOp* t = torch_op.get();
                    runners.push_back({"torch", "f32", "", [t] { t->run(); }, [t] { return t->output(); }, {}});
                } else if (impl == "torch-cuda") {
                    for (DType d : o.dtypes) {
                        std::shared_ptr<ref::TorchBenchOp> t;
                        try {
                            t = ref::make_torch_bench_op(in.c, &in.context_x, &in.context_pos,
                                                         {true, d == DType::bf16});
                        } catch (const std::exception& ex) {
                            throw Unavailable(ex.what());
                        }
                        Runner r{"torch-cuda", to_string(d), ref::torch_cuda_describe(), [t] { t->run(); },
                                 [t] { return t->output(); }, {}};
                        r.on_device = true;
                        runners.push_back(std::move(r));
                    }
                } else if (impl == "scalar") {
                    if (op == Op::decode || T > 64) continue;  // no cache in the interface; too slow past 64
                    runners.push_back(interface_runner(
                        "scalar", std::shared_ptr<Implementation>(find_implementation("scalar")->create({})),
                        input_sets()));
                } else if (auto w = find_worker(impl)) {
                    if (op == Op::decode) continue;                  // no cache in the interface
                    if (!w->supports(op, in.c.config).ok) continue;  // e.g. a rope-only plugin
                    Runner r = interface_runner(impl, w, input_sets());
                    r.worker = w.get();
                    runners.push_back(std::move(r));
                } else {
                    // An implementation with its own bench op (its registry
                    // entry's factory, conform/bench.h): simd, cuda.
                    const ImplEntry* e = find_implementation(impl);
                    for (DType d : o.dtypes) {
                        ImplOptions io;
                        io.dtype = d;
                        io.threads = o.threads;
                        io.simd_target = o.simd_target;
                        std::shared_ptr<BenchOp> b;
                        try {
                            if (const Availability a = e->available(); !a.available) throw ImplError(a.reason);
                            // An op it has not in this dtype (simd's mixture of experts in bf16): said once, not timed.
                            if (!std::unique_ptr<Implementation>(e->create(io))->implements(op)) {
                                if (untimed.insert(impl + " " + to_string(d) + " " + to_string(op)).second)
                                    log << "  " << impl << " " << to_string(d) << " " << to_string(op)
                                        << ": not timed (" << impl << " does not implement it in " << to_string(d) << ")\n";
                                continue;
                            }
                            b = e->bench(io, bench_inputs(in));
                        } catch (const std::exception& ex) {
                            throw Unavailable(impl + ": " + ex.what());
                        }
                        Runner r{impl, to_string(d), b->where(), [b] { b->run(); }, [b] { return b->output(); }, {}};
                        if (b->device_seconds() >= 0) r.device_seconds = [b] { return b->device_seconds(); };
                        r.on_device = e->on_device;
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
            // The answer every other runner is checked against: LibTorch
            // float32 on the host, else on the device.
            Runner* torch_r = nullptr;
            for (auto& r : runners)
                if (r.impl == "torch" || (!torch_r && r.impl == "torch-cuda" && r.dtype == "f32")) torch_r = &r;
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
                const std::vector<float>* want = r.truth             ? (compare && torch_r ? &perturbed : nullptr)
                                                 : !expected.empty() ? &expected
                                                                     : nullptr;
                if (const int64_t i = first_nonfinite(got, want); i >= 0) {
                    r.bad = fmt::format("{} at element {} in repetition {} (input set {})",
                                        std::isnan(got[i]) ? "NaN" : "Inf", i, rep, set);
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

            // Time is compared like with like: a GPU row with torch-cuda in its
            // own dtype where that ran, anything else with torch_r.
            auto baseline = [&](const Runner& r) -> const Runner* {
                for (const auto& b : runners)
                    if (r.on_device && b.impl == "torch-cuda" && b.dtype == r.dtype) return &b;
                return torch_r;
            };
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
                row.k = cost(op, o.model, T, o.context, r.dtype == "bf16" ? 2.0 : 4.0);
                row.on_device = r.on_device;
                if (const Runner* b = baseline(r)) {
                    row.ratio = row.median / quantile(b->times, 0.5);
                    row.vs = b->impl + " " + b->dtype;
                    // Every runner ran once per round, in the same rounds: pair them.
                    if (b != &r && b->times.size() == r.times.size()) {
                        std::vector<double> q;
                        for (size_t i = 0; i < r.times.size(); ++i) q.push_back(r.times[i] / b->times[i]);
                        row.ratio_p25 = quantile(q, 0.25);
                        row.ratio_p75 = quantile(q, 0.75);
                    }
                } else {
                    row.ratio = NAN;
                }
                row.check = torch_r && &r != torch_r ? r.check : NAN;
                row.sets = r.sets;
                row.compared = r.compared;
                row.bad = r.bad;
                if (!r.worker_times.empty()) row.worker_median = quantile(r.worker_times, 0.5);
                row.bytes_per_call = r.bytes_per_call;
                res.rows.push_back(row);
            }
        }
    }
    return res;
}

}  // namespace conform::bench

// harness/bench — `conform bench`: each op's wall time per implementation,
// against LibTorch float32 measured in the same process, interleaved, with the
// machine's ceilings measured the same run. The command (cli/bench.cpp) parses
// its flags, resolve() makes them a Request, run() measures, and it prints
// what table() or to_json() makes of the Result.
//
// Every implementation gets the op with its inputs already where it keeps
// them (simd: weights packed, bf16 converted; torch: tensors, cos/sin and the
// mask built), so a run is what a model pays per call. Runs are interleaved
// round by round (and the order rotated) so that drift in the machine's state
// (another process, frequency) lands on every implementation alike.
//
// A benchmark measures work, so what is timed is checked: an implementation
// run through the interface (scalar, a plugin, a command worker) rotates its
// repetitions among input sets, its output buffer re-poisoned (NaN) and a few
// input elements perturbed before each run; every repetition's output is
// scanned for NaN/Inf and a random quarter of them (and one of each set at the
// end) compared with torch's output for the inputs as they were — all outside
// the timed region, so a plugin that computes once and answers from memory, or
// NaN on a repeat, fails the benchmark. A worker's row also says what the
// worker itself reported (its kernel's time, without the adapter's checks) and
// the round trip's own cost.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/options.h"
#include "bench/peak.h"
#include "config/presets.h"
#include "conform/impl.h"
#include "reference/bench_torch.h"
#include "reference/ceilings.h"
#include "run/resolve.h"

namespace conform::worker {
class WorkerImpl;
}

namespace conform::bench {

struct Request {
    config::ModelConfig model;       // what is benchmarked: its block's sizes and conventions
    std::vector<Op> ops;
    std::vector<int64_t> tokens;     // T per op (decode: 1 only)
    std::vector<DType> dtypes;       // storage dtypes of the implementations with a bench op
    std::vector<std::string> impls;  // torch, scalar, a registry entry with a bench op, a worker's name
    // --impl-lib / --impl-cmd / --impl-fd, started.
    std::vector<std::shared_ptr<worker::WorkerImpl>> workers;
    int64_t context = 512;             // decode, and attention at T = 1: tokens already cached
    double min_time = 1.0;             // seconds of timed rounds per op and T, at least
    int min_reps = 5, max_reps = 200;  // timed rounds per op and T
    int threads = 1;                   // every implementation's (and torch's)
    double settle_ms = 2;              // pause before each timed run
    std::string simd_target;           // simd: this compiled Highway target instead of the best
};

// What an op's call costs (config/anatomy.h's table, priced as bench calls it).
struct Cost {
    double flops = 0;         // counted: 2 per multiply-add of a product, a few per element elsewhere
    double bytes = 0;         // the minimum the call must move: inputs, weights, outputs, once
    double weight_bytes = 0;  // the matmuls' weights alone (decode's bandwidth target)
};

// One implementation on one op and T.
struct Row {
    std::string op, impl, dtype, detail;
    int64_t T = 0;
    double median = 0, p25 = 0, p75 = 0, min = 0;
    int reps = 0;
    Cost k;
    double ratio = 0, check = 0;  // time over `vs`'s; max rel diff vs torch (NaN: none)
    // The ratio's spread: quartiles of this row's run over `vs`'s run of the
    // same round (NaN: no baseline, or rounds not paired).
    double ratio_p25 = std::numeric_limits<double>::quiet_NaN(), ratio_p75 = ratio_p25;
    std::string vs;               // what ratio divides by: "torch f32", or "torch-cuda bf16" for a row in bf16
    bool on_device = false;       // cuda, torch-cuda: priced against Result::device
    int sets = 1, compared = 0;   // input sets rotated among; runs compared with torch
    std::string bad;              // the first NaN/Inf or disagreement found
    // A worker: its own time per call, as it claims (NaN: not a worker), and the bytes through its pipes.
    double worker_median = std::numeric_limits<double>::quiet_NaN();
    uint64_t bytes_per_call = 0;
};

struct Result {
    ref::Ceilings ceilings;                            // the host's
    Peak peak;                                         // the host's arithmetic, measured (peak.h)
    std::optional<ref::TorchCudaCeilings> device;      // the GPU's, where a device row ran and torch sees it
    nlohmann::json worker_round_trips = nlohmann::json::array();  // a trivial call per worker
    std::vector<Row> rows;
};

// The compute ceiling a host row of `dtype` is priced against: the fastest
// rate measured this run that such a row could reach — f32: the FMA loop or
// LibTorch's matmul; bf16: those or a bf16 dot loop (native or Highway's) —
// and which one it was (its letter in the table's roof column).
struct Ceiling {
    double rate = 0;
    char letter = ' ';  // F: f32 FMA loop, M: LibTorch matmul, D: native bf16 dot, H: Highway's bf16 dot,
                        // B: copy, R: read stream
    std::string name;
};
Ceiling flops_ceiling(const Result& res, const std::string& dtype);
// The memory ceiling of a host row: the faster of the copy (read + written)
// and the read stream (R) measured this run.
Ceiling bytes_ceiling(const Result& res);

// `conform bench`'s flags as typed (cli/bench.cpp declares them).
struct Flags {
    std::string impls;  // default simd,torch (torch and the plugins with --impl-lib)
    std::string ops = "all";
    config::ConfigOptions config;  // default: the tinyllama-1.1b preset
    std::string tokens = "1,64,512";
    std::string dtypes = "f32,bf16";
    int64_t context = 512;
    double min_time = 1.0;
    int min_reps = 5;
    int max_reps = 200;
    int threads = 0;  // 0: every core
    run::WorkerFlags workers;
    double settle_ms = 2;
    std::string simd_target;
};

// The flags resolved into a Request: the model (the tinyllama-1.1b preset
// unless --preset / --config / the flags), the ops, T, the dtypes, the
// workers started (each a process, timed per round trip), and each
// implementation asked for checked to be one bench times (given only
// workers: the workers against torch). A bad flag: said on `err`
// ("conform bench: ..."), and nullopt (exit 2); what starting a worker
// throws is thrown (run::choose_implementations).
std::optional<Request> resolve(const Flags& f, std::ostream& err);

// An implementation asked for cannot run here (conform exits 3).
struct Unavailable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Measures; the header lines (config, torch, ceilings, workers' trivial
// calls) go to `log` as they are known.
Result run(const Request& r, std::ostream& log);

// The table, its legend and the decode / worker notes, for a terminal.
std::string table(const Request& r, const Result& res);
// conform-bench/1 (docs/bench.md).
nlohmann::json to_json(const Request& r, const Result& res);
// "1.234 ms": a time as the table and the log print it.
std::string fmt_time(double seconds);
// A line per row whose output was not finite or disagreed with torch; none: the benchmark stands.
std::vector<std::string> problems(const Result& res);

}  // namespace conform::bench

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/bench.h"
#include "config/anatomy.h"
#include "config/options.h"
#include "reference/bench_torch.h"
#include "reference/blas.h"
#include "registry.h"

namespace conform::bench {

namespace {

using nlohmann::json;

// Half the interquartile range over the median above which a row is marked
// noisy: its median then moves by more than 5 % between like runs, more than
// most differences the table is read for.
constexpr double kNoisy = 0.05;

// The ceilings a row is priced against: the host's (the faster of its copy
// and read streams, and the best compute rate measured for the row's dtype),
// or, for a row that ran on the GPU, the device's in the row's dtype. Zero:
// unknown.
struct Roofline {
    Ceiling bytes, flops;
};
Roofline roofline(const Row& r, const Result& res) {
    if (!r.on_device) return {bytes_ceiling(res), flops_ceiling(res, r.dtype)};
    if (!res.device) return {};
    return {{res.device->copy_bytes_per_s, 'B', "device copy"},
            {r.dtype == "f32" ? res.device->f32_flops_per_s : res.device->bf16_flops_per_s, 'M', "device matmul"}};
}

// Where a row sits against the machine: its rates, its intensity, and the
// fraction of whichever ceiling bounds that intensity (NaN: no ceiling
// known). A row faster than its ceiling (its data in cache, reads the memory
// served faster than the stream's, or a ceiling measured slow) is shown at
// 100 % and marked `over`: never a roof above the roof.
struct Place {
    double gflops, gbs, ai, roof, bw;
    bool compute_bound, over;
    char letter;
    std::string ceiling;
};

Place place(const Row& r, const Result& res) {
    const Roofline c = roofline(r, res);
    Place p;
    p.gflops = r.k.flops / r.median / 1e9;
    p.gbs = r.k.bytes / r.median / 1e9;
    p.ai = r.k.flops / r.k.bytes;
    p.bw = c.bytes.rate > 0 ? c.bytes.rate : NAN;
    const double ridge = c.bytes.rate > 0 ? c.flops.rate / c.bytes.rate : NAN;
    p.compute_bound = p.ai >= ridge;
    const double raw = c.bytes.rate <= 0 || c.flops.rate <= 0 ? NAN
                       : p.compute_bound ? r.k.flops / r.median / c.flops.rate
                                         : r.k.bytes / r.median / c.bytes.rate;
    p.over = raw > 1;
    p.roof = p.over ? 1.0 : raw;
    const Ceiling& bound = p.compute_bound ? c.flops : c.bytes;
    p.letter = bound.letter;
    p.ceiling = bound.name;
    return p;
}

json row_json(const Row& r, const Result& res) {
    const Place p = place(r, res);
    const double gflops = p.gflops, gbs = p.gbs, ai = p.ai, roof = p.roof, bw = p.bw;
    const bool compute_bound = p.compute_bound;
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
              {"on_device", r.on_device}};
    if (!std::isnan(roof)) {
        j["bound"] = compute_bound ? "compute" : "memory";
        j["ceiling"] = p.ceiling;
        j["fraction_of_ceiling"] = roof;
        if (p.over) j["faster_than_ceiling"] = true;  // the ceiling measured low this run
    }
    const double spread = (r.p75 - r.p25) / 2 / r.median;
    if (spread > kNoisy) j["noisy"] = true;
    if (!std::isnan(r.ratio)) {
        j["time_vs_torch"] = r.ratio;
        j["time_vs"] = r.vs;
    }
    if (!std::isnan(r.ratio_p25)) {  // of the same rounds' runs, paired
        j["time_vs_torch_p25"] = r.ratio_p25;
        j["time_vs_torch_p75"] = r.ratio_p75;
    }
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
        if (r.on_device && !std::isnan(bw)) j["weight_fraction_of_copy"] = r.k.weight_bytes / r.median / bw;
        if (!r.on_device) {
            j["weight_fraction_of_copy"] = r.k.weight_bytes / r.median / res.ceilings.copy_bytes_per_s;
            j["weight_fraction_of_read"] = r.k.weight_bytes / r.median / res.peak.read_bytes_per_s;
        }
    }
    return j;
}

}  // namespace

Ceiling bytes_ceiling(const Result& res) {
    if (res.peak.read_bytes_per_s > res.ceilings.copy_bytes_per_s)
        return {res.peak.read_bytes_per_s, 'R', "read stream"};
    return {res.ceilings.copy_bytes_per_s, 'B', "copy bandwidth"};
}

Ceiling flops_ceiling(const Result& res, const std::string& dtype) {
    std::vector<Ceiling> cs = {{res.peak.f32_fma, 'F', "f32 FMA loop"},
                               {res.ceilings.matmul_flops_per_s, 'M', "LibTorch f32 matmul"}};
    if (dtype == "bf16") {
        cs.push_back({res.peak.bf16_native, 'D', "bf16 dot loop (vdpbf16ps)"});
        cs.push_back({res.peak.bf16_highway, 'H', "bf16 dot loop (Highway)"});
    }
    Ceiling best;
    for (const Ceiling& c : cs)
        if (c.rate > best.rate) best = c;
    return best;
}

std::string fmt_time(double s) {
    if (s >= 1) return fmt::format("{:.3f} s", s);
    if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
    return fmt::format("{:.1f} us", s * 1e6);
}

json to_json(const Request& o, const Result& res) {
    const ref::Ceilings& c = res.ceilings;
    json results = json::array();
    for (const Row& r : res.rows) results.push_back(row_json(r, res));
    json out = {{"schema", "conform-bench/1"},
            {"preset", o.model.name},
            {"model", config::config_json(o.model)},
            {"config", config::describe(o.model.block)},
            {"threads", o.threads},
            {"context", o.context},
            {"torch", ref::torch_describe()},
            {"simd", find_implementation("simd")->details()},
            {"blas", {{"core", ref::blas::chosen().core}, {"how", ref::blas::chosen().line},
                      {"changed", ref::blas::chosen().changed}}},
            {"ceilings",
             {{"copy_bytes_per_s", c.copy_bytes_per_s},
              {"matmul_flops_per_s", c.matmul_flops_per_s},
              {"matmul_n", c.matmul_n},
              {"f32_fma_flops_per_s", res.peak.f32_fma},
              {"f32_nominal_flops_per_s", res.peak.f32_nominal},
              {"ghz", res.peak.ghz},
              {"fma_pipes_assumed", res.peak.fma_pipes},
              {"bf16_dot_highway_flops_per_s", res.peak.bf16_highway},
              {"bf16_dot_native_flops_per_s", res.peak.bf16_native},
              {"arithmetic_target", res.peak.target},
              {"read_bytes_per_s", res.peak.read_bytes_per_s},
              {"ridge", flops_ceiling(res, "f32").rate / bytes_ceiling(res).rate}}},
            {"worker_round_trips", res.worker_round_trips},
            {"results", results}};
    if (res.device)
        out["device_ceilings"] = {{"device", ref::torch_cuda_describe()},
                                  {"copy_bytes_per_s", res.device->copy_bytes_per_s},
                                  {"matmul_n", res.device->matmul_n},
                                  {"f32_matmul_flops_per_s", res.device->f32_flops_per_s},
                                  {"bf16_matmul_flops_per_s", res.device->bf16_flops_per_s}};
    return out;
}

std::string table(const Request&, const Result& res) {
    std::string s;
    size_t iw = 6, ow = 10;  // impl column: plugin names may be longer than ours; op: paged_attention
    for (const Row& r : res.rows) iw = std::max(iw, r.impl.size() + 1), ow = std::max(ow, r.op.size() + 1);
    s += fmt::format("\n{:<{}}{:>5}  {:<{}}{:<6}{:>11}{:>8}{:>9}{:>8}{:>7}{:>9}{:>11}{:>9}\n", "op", ow, "T", "impl", iw,
                     "dtype", "median", "+-  ", "GFLOP/s", "GB/s", "AI", "roof", "/torch", "check");
    bool noisy = false, over = false;
    for (const Row& r : res.rows) {
        const Place p = place(r, res);
        const double spread = (r.p75 - r.p25) / 2 / r.median;
        noisy |= spread > kNoisy;
        over |= p.over;
        const std::string ratio =
            std::isnan(r.ratio) ? "-"
            : std::isnan(r.ratio_p25) ? fmt::format("{:.2f}", r.ratio)
                                      : fmt::format("{:.2f}+-{:.2f}", r.ratio, (r.ratio_p75 - r.ratio_p25) / 2);
        s += fmt::format("{:<{}}{:>5}  {:<{}}{:<6}{:>11}{:>6.1f}%{}{:>9.1f}{:>8.1f}{:>7.1f}{:>7}{}{}{:>11}{:>9}\n", r.op,
                         ow, r.T, r.impl, iw, r.dtype, fmt_time(r.median), 100 * spread, spread > kNoisy ? "~" : " ",
                         p.gflops, p.gbs, p.ai, std::isnan(p.roof) ? "-" : fmt::format("{:.0f}%", 100 * p.roof),
                         std::isnan(p.roof) ? ' ' : p.over ? '!' : ' ', std::isnan(p.roof) ? ' ' : p.letter, ratio,
                         std::isnan(r.check) ? "" : fmt::format("{:.0e}", r.check));
    }
    s += "\nmedian of interleaved runs after warm-up; +- half the interquartile range";
    if (noisy) s += fmt::format(" (~: above {:.0f}% of the median: too noisy to compare rows closer than that)", 100 * kNoisy);
    s += ";\nroof: fraction of the ceiling that bounds the op's intensity: the faster memory stream measured\n"
         "(B copy, R read), or the fastest arithmetic measured for the row's dtype (F f32 FMA loop, M LibTorch\n"
         "matmul, D native bf16 dot loop, H Highway's bf16 dot loop); the device's in the row's dtype for a row\n"
         "that ran on the GPU";
    if (over)
        s += ";\n!: faster than its ceiling, shown at 100%: a B/R row whose data stays in cache from run to run\n"
             "(the streams are of 256 MiB, from memory) or whose reads the memory served faster than the stream's,\n"
             "or an F/D/H/M row whose ceiling's measurement ran slow";
    s += ";\n/torch: time over LibTorch f32's on the host, or torch-cuda's in the row's dtype where it ran,\n"
         "+- half the interquartile range of the ratios of the same rounds;\n"
         "check: max |out - torch| / max |torch|.\n";
    for (const Row& r : res.rows)
        if (r.k.weight_bytes > 0 && r.op == "decode") {
            const Place p = place(r, res);
            s += fmt::format("decode {} {}: weights streamed at {:.1f} GB/s", r.impl, r.dtype,
                             r.k.weight_bytes / r.median / 1e9);
            if (r.on_device)
                s += std::isnan(p.bw) ? "\n"
                                      : fmt::format(" = {:.0f}% of the device's copy bandwidth\n",
                                                    100 * r.k.weight_bytes / r.median / p.bw);
            else
                s += fmt::format(" = {:.0f}% of the host's read stream, {:.0f}% of its copy\n",
                                 100 * r.k.weight_bytes / r.median / res.peak.read_bytes_per_s,
                                 100 * r.k.weight_bytes / r.median / res.ceilings.copy_bytes_per_s);
        }
    bool any = false;
    for (const Row& r : res.rows) {
        if (std::isnan(r.worker_median)) continue;
        if (!any)
            s += "\nworkers: the round trip conform timed; the time in the kernel the worker "
                 "claims (its own report, not measured by conform), and the rest, per call:\n";
        any = true;
        s += fmt::format(
            "  {} {} T={}: {} round trip (measured), {} in the kernel (claimed), {} the rest; "
            "{:.3g} MB through the pipes\n",
            r.impl, r.op, r.T, fmt_time(r.median), fmt_time(r.worker_median), fmt_time(r.median - r.worker_median),
            static_cast<double>(r.bytes_per_call) / 1e6);
    }
    return s;
}

std::vector<std::string> problems(const Result& res) {
    std::vector<std::string> out;
    for (const Row& r : res.rows) {
        if (r.bad.empty()) continue;
        if (r.bad.rfind("max rel diff", 0) == 0)
            out.push_back(fmt::format("{} {} T={} disagrees with torch: {}", r.impl, r.op, r.T, r.bad));
        else
            out.push_back(
                fmt::format("{} {} T={} returned {}: a benchmark of output that is not finite "
                            "is no benchmark",
                            r.impl, r.op, r.T, r.bad));
    }
    return out;
}

}  // namespace conform::bench

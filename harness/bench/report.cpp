#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/bench.h"
#include "config/anatomy.h"
#include "config/options.h"
#include "reference/bench_torch.h"
#include "registry.h"

namespace conform::bench {

namespace {

using nlohmann::json;

// The ceilings a row is priced against: the host's (LibTorch f32's matmul
// rate whatever the row's dtype, as before there was a device), or, for a row
// that ran on the GPU, the device's in the row's dtype. Zero: unknown.
struct Roofline {
    double copy_bytes_per_s = 0, matmul_flops_per_s = 0;
};
Roofline roofline(const Row& r, const Result& res) {
    if (!r.on_device) return {res.ceilings.copy_bytes_per_s, res.ceilings.matmul_flops_per_s};
    if (!res.device) return {};
    return {res.device->copy_bytes_per_s, r.dtype == "f32" ? res.device->f32_flops_per_s : res.device->bf16_flops_per_s};
}

// Where a row sits against the machine: its rates, its intensity, and the
// fraction of whichever ceiling bounds that intensity (NaN: no ceiling known).
struct Place {
    double gflops, gbs, ai, roof, bw;
    bool compute_bound;
};

Place place(const Row& r, const Result& res) {
    const Roofline c = roofline(r, res);
    Place p;
    p.gflops = r.k.flops / r.median / 1e9;
    p.gbs = r.k.bytes / r.median / 1e9;
    p.ai = r.k.flops / r.k.bytes;
    p.bw = c.copy_bytes_per_s > 0 ? c.copy_bytes_per_s : NAN;
    const double ridge = c.copy_bytes_per_s > 0 ? c.matmul_flops_per_s / c.copy_bytes_per_s : NAN;
    p.compute_bound = p.ai >= ridge;
    p.roof = c.copy_bytes_per_s <= 0  ? NAN
             : p.compute_bound ? r.k.flops / r.median / c.matmul_flops_per_s
                               : r.k.bytes / r.median / c.copy_bytes_per_s;
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
        j["fraction_of_ceiling"] = roof;
    }
    if (!std::isnan(r.ratio)) {
        j["time_vs_torch"] = r.ratio;
        j["time_vs"] = r.vs;
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
        if (!std::isnan(bw)) j["weight_fraction_of_copy"] = r.k.weight_bytes / r.median / bw;
    }
    return j;
}

}  // namespace

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
            {"ceilings",
             {{"copy_bytes_per_s", c.copy_bytes_per_s},
              {"matmul_flops_per_s", c.matmul_flops_per_s},
              {"matmul_n", c.matmul_n},
              {"ridge", c.ridge()}}},
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
    s += fmt::format("\n{:<{}}{:>5}  {:<{}}{:<6}{:>11}{:>7}{:>9}{:>8}{:>7}{:>9}{:>8}{:>9}\n", "op", ow, "T", "impl", iw,
                     "dtype", "median", "+-", "GFLOP/s", "GB/s", "AI", "roof", "/torch", "check");
    for (const Row& r : res.rows) {
        const Place p = place(r, res);
        const double spread = (r.p75 - r.p25) / 2 / r.median;
        s +=
            fmt::format("{:<{}}{:>5}  {:<{}}{:<6}{:>11}{:>6.1f}%{:>9.1f}{:>8.1f}{:>7.1f}{:>7} {}{:>8}{:>9}\n", r.op,
                        ow, r.T, r.impl, iw, r.dtype, fmt_time(r.median), 100 * spread, p.gflops, p.gbs, p.ai,
                        std::isnan(p.roof) ? "-" : fmt::format("{:.0f}%", 100 * p.roof),
                        std::isnan(p.roof) ? " " : p.compute_bound ? "F" : "B", std::isnan(r.ratio) ? "-" : fmt::format("{:.2f}", r.ratio),
                        std::isnan(r.check) ? "" : fmt::format("{:.0e}", r.check));
    }
    s += "\nmedian of interleaved runs after warm-up; +- half the interquartile range; roof: fraction of\n"
         "the copy bandwidth (B) or the LibTorch matmul rate (F), whichever bounds the op's intensity,\n"
         "the device's in the row's dtype for a row that ran on the GPU (cuda, torch-cuda);\n"
         "/torch: time over LibTorch f32's on the host, or torch-cuda's in the row's dtype where it ran;\n"
         "check: max |out - torch| / max |torch|.\n";
    for (const Row& r : res.rows)
        if (r.k.weight_bytes > 0 && r.op == "decode") {
            const Place p = place(r, res);
            s += fmt::format("decode {} {}: weights streamed at {:.1f} GB/s", r.impl, r.dtype,
                             r.k.weight_bytes / r.median / 1e9);
            s += std::isnan(p.bw) ? "\n"
                                  : fmt::format(" = {:.0f}% of {} copy bandwidth\n", 100 * r.k.weight_bytes / r.median / p.bw,
                                                r.on_device ? "the device's" : "the host's");
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

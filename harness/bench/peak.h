// harness/bench/peak.h — the arithmetic this CPU can do at most, and the
// rate it reads memory, measured. Arithmetic:
// a loop of independent fused multiply-adds (nothing but arithmetic, no
// loads) per thread, all threads at once, in float32 and in bf16 dot
// products — Highway's (ReorderWidenMulAccumulate) and, where the CPU has
// them, the native ones (vdpbf16ps) — and the clock, from a chain of
// dependent adds. A matmul cannot run faster than these loops; bench prices
// a compute-bound row against the best of them for its dtype. Memory: a
// read-only stream of 256 MiB — an op that mostly reads (decode's weights)
// is bounded by it, not by the copy (whose writes cost more than reads).
#pragma once

#include <string>

namespace conform::bench {

struct Peak {
    std::string target;   // the Highway target the loops ran (the best compiled)
    size_t f32_lanes = 0; // float32 lanes of its vectors
    int threads = 1;
    double ghz = 0;          // cycles per second of one core, measured (0: not on x86)
    double fma_pipes = 0;    // assumed full-width FMAs issued per cycle (nominal only)
    double f32_nominal = 0;  // lanes x 2 x fma_pipes x ghz x threads, FLOP/s
    double f32_fma = 0;      // measured, FLOP/s (2 per multiply-add)
    double bf16_highway = 0; // ReorderWidenMulAccumulate bf16 -> f32, FLOP/s (2 per product)
    double bf16_native = 0;  // vdpbf16ps, FLOP/s; 0: the CPU has none
    double read_bytes_per_s = 0;  // 256 MiB summed, every thread its slice, as 4 streams
};

// Each loop runs ~`seconds` per repetition on `threads` threads at once,
// best of five.
Peak measure_peak(int threads, double seconds = 0.02);

}  // namespace conform::bench

// harness/reference/ceilings.h — what this machine can do at most, measured
// now: the copy bandwidth and LibTorch's float32 matmul rate, and their
// ratio, the ridge point (FLOP per byte above which an op is bound by
// arithmetic rather than memory). `conform bench` prices each op against
// them; `conform anatomy --with-ceilings` draws its ridge from them.
// Torch-free, like reference.h.
#pragma once

#include <cstdint>

namespace conform::ref {

struct Ceilings {
    double copy_bytes_per_s = 0;    // read + written, every thread copying its slice of 256 MiB
    double matmul_flops_per_s = 0;  // LibTorch f32, n x n @ n x n, best of 5
    int64_t matmul_n = 2048;
    int threads = 1;
    double ridge() const { return copy_bytes_per_s > 0 ? matmul_flops_per_s / copy_bytes_per_s : 0; }
};

// Copy bandwidth: a 256 MiB buffer copied by `threads` threads at once (each
// its own slice), best of five after one run that faults the pages in.
double copy_bandwidth(int threads);

// Both, with LibTorch's intra-op threads set to `threads` first.
Ceilings measure_ceilings(int threads, int64_t matmul_n = 2048);

}  // namespace conform::ref

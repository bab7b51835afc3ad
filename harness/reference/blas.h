// harness/reference/blas.h — which OpenBLAS core this process runs, and
// choosing a better one where DYNAMIC_ARCH fell back to a generic core.
//
// LibTorch's matmul (the float64 reference's products, bench's torch rows and
// its matmul ceiling) runs on whatever kernels OpenBLAS picked when it loaded.
// Debian's OpenBLAS 0.3.21 is built DYNAMIC_ARCH: it reads the CPU's id and
// picks a core; a CPU newer than the library (a Sapphire Rapids Xeon for
// 0.3.21) gets a generic one — Prescott's SSE3 kernels, 4–5x slower than the
// AVX-512 ones the CPU runs. The core is fixed when the library initialises,
// before main(), so the only way to change it is to run the process again
// with OPENBLAS_CORETYPE set. select_core() does that, after a probe in a
// child process has shown the better core loads, runs, agrees with float64
// on a small GEMM as well as the generic core does, and is faster.
//
// Torch-free: OpenBLAS answers through its own C API, looked up with dlsym.
#pragma once

#include <optional>
#include <string>

namespace conform::ref::blas {

// What the CPU can run, from cpuid and xgetbv (the state the OS saves), not
// /proc/cpuinfo: a VM may hide flags there that the CPU executes.
struct CpuFeatures {
    std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
    bool sse3 = false, avx = false, avx2 = false, fma = false;
    bool avx512 = false;       // F, CD, BW, DQ, VL: what OpenBLAS's SkylakeX kernels use
    bool avx512_bf16 = false;  // vdpbf16ps (Cooper Lake, Sapphire Rapids, Zen 4)
    bool amx = false;          // AMX tiles with bf16 (Sapphire Rapids)
    std::string describe() const;  // "AVX-512 BF16 (AuthenticAMD)"
};
CpuFeatures cpu_features();

// The OpenBLAS this process linked (nullopt: LibTorch's BLAS is not OpenBLAS).
struct Library {
    std::string config;  // openblas_get_config()
    std::string core;    // openblas_get_corename(), e.g. "Prescott", "Haswell", "SkylakeX"
    std::string path;    // the shared object
    bool dynamic_arch = false;
};
std::optional<Library> library();

// The widest instruction set a core's kernels use: 0 SSE/SSE3 (the generic
// cores), 1 AVX, 2 AVX2 + FMA, 3 AVX-512, 4 AVX-512 with bf16; -1 a name this
// table does not know (never replaced).
int core_level(const std::string& core);
// The best core these features run (OPENBLAS_CORETYPE's spelling).
std::string best_core(const CpuFeatures& f);

// A small single-threaded sgemm through OpenBLAS's cblas: its rate and its
// largest relative difference from the float64 product of the same inputs.
struct Probe {
    std::string core;
    double gflops = 0, max_rel_diff = 0;
};
Probe probe(int n = 384);

// What happened to the core at start: kept, forced, or selected (and why).
struct Choice {
    std::string core;     // in use now
    std::string line;     // one line for a report: the core, and how it came to be
    bool changed = false; // this process runs a core other than DYNAMIC_ARCH's own pick
};

// --blas-core: "" (the default: as auto, but OPENBLAS_CORETYPE, where the
// environment sets it, is kept), "auto" (replace a core DYNAMIC_ARCH fell
// back to — or OPENBLAS_CORETYPE named — by the best the CPU runs), "keep"
// (whatever OpenBLAS picked), or a core's name (forced). Where a change is
// due and verified, the process is executed again (argv as given, the
// environment with OPENBLAS_CORETYPE) and this call does not return; the new
// process's call returns the Choice saying what was chosen and why, and
// chosen() keeps it. A name this table does not know, one the CPU cannot run,
// or a forced core that fails its probe: std::invalid_argument
// ("--blas-core: ...", exit 2).
const Choice& select_core(const std::string& mode, char** argv);
// What select_core() decided (empty before it ran).
const Choice& chosen();

// In the probe child (main() calls this first): where the environment asks
// for a probe, run it, print it on stdout and exit.
void serve_probe_if_asked();

}  // namespace conform::ref::blas

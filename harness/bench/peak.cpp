// The loops of peak.h, compiled per Highway target and dispatched to the best.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/peak.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace conform::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// `iters` rounds of 12 independent multiply-adds on full vectors: enough
// chains to cover an FMA's latency (4 cycles) on two pipes. Each chain starts
// from its own value — chains alike would be computed once by the compiler —
// and the sum is returned so that none of it can be dropped. FLOP: 2 x 12 x
// lanes x iters.
double FmaLoop(int64_t iters, double* flop) {
    const hn::ScalableTag<float> d;
    const auto m = hn::Set(d, 0.9999999f), c = hn::Set(d, 1e-7f);
    auto a0 = hn::Set(d, 1.00f), a1 = hn::Set(d, 1.01f), a2 = hn::Set(d, 1.02f), a3 = hn::Set(d, 1.03f);
    auto a4 = hn::Set(d, 1.04f), a5 = hn::Set(d, 1.05f), a6 = hn::Set(d, 1.06f), a7 = hn::Set(d, 1.07f);
    auto a8 = hn::Set(d, 1.08f), a9 = hn::Set(d, 1.09f), a10 = hn::Set(d, 1.10f), a11 = hn::Set(d, 1.11f);
    for (int64_t i = 0; i < iters; ++i) {
        a0 = hn::MulAdd(a0, m, c), a1 = hn::MulAdd(a1, m, c), a2 = hn::MulAdd(a2, m, c);
        a3 = hn::MulAdd(a3, m, c), a4 = hn::MulAdd(a4, m, c), a5 = hn::MulAdd(a5, m, c);
        a6 = hn::MulAdd(a6, m, c), a7 = hn::MulAdd(a7, m, c), a8 = hn::MulAdd(a8, m, c);
        a9 = hn::MulAdd(a9, m, c), a10 = hn::MulAdd(a10, m, c), a11 = hn::MulAdd(a11, m, c);
    }
    *flop = 2.0 * 12 * static_cast<double>(hn::Lanes(d)) * static_cast<double>(iters);
    const auto s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + ((a8 + a9) + (a10 + a11));
    return hn::GetLane(hn::SumOfLanes(d, s));
}

// bf16 pairs widened and accumulated in float32, 6 independent pairs of
// sums, each from its own start. FLOP: 2 per bf16 product, 2 x lanes(f32) products per call.
double Bf16Loop(int64_t iters, double* flop) {
#if HWY_TARGET == HWY_SCALAR
    (void)iters;
    *flop = 0;  // no bf16 vectors on the scalar target: no rate
    return 0;
#else
    const hn::ScalableTag<float> df;
    const hn::Repartition<hwy::bfloat16_t, decltype(df)> db;
    const hn::RebindToUnsigned<decltype(db)> du;
    const auto a = hn::BitCast(db, hn::Set(du, hwy::BF16FromF32(1e-3f).bits));
    const auto b = a;
    auto s0 = hn::Set(df, 0.f), s1 = hn::Set(df, 1.f), s2 = hn::Set(df, 2.f), s3 = hn::Set(df, 3.f);
    auto s4 = hn::Set(df, 4.f), s5 = hn::Set(df, 5.f);
    auto t0 = hn::Set(df, 6.f), t1 = hn::Set(df, 7.f), t2 = hn::Set(df, 8.f), t3 = hn::Set(df, 9.f);
    auto t4 = hn::Set(df, 10.f), t5 = hn::Set(df, 11.f);
    for (int64_t i = 0; i < iters; ++i) {
        s0 = hn::ReorderWidenMulAccumulate(df, a, b, s0, t0);
        s1 = hn::ReorderWidenMulAccumulate(df, a, b, s1, t1);
        s2 = hn::ReorderWidenMulAccumulate(df, a, b, s2, t2);
        s3 = hn::ReorderWidenMulAccumulate(df, a, b, s3, t3);
        s4 = hn::ReorderWidenMulAccumulate(df, a, b, s4, t4);
        s5 = hn::ReorderWidenMulAccumulate(df, a, b, s5, t5);
    }
    *flop = 2.0 * 6 * 2 * static_cast<double>(hn::Lanes(df)) * static_cast<double>(iters);
    const auto s = (s0 + s1) + (s2 + s3) + (s4 + s5) + ((t0 + t1) + (t2 + t3) + (t4 + t5));
    return hn::GetLane(hn::SumOfLanes(df, s));
#endif
}

// The sum of n floats from p, read as 4 streams at once (the quarters of
// p, each its own vector sum): one stream per core leaves the memory system
// idle between the prefetcher's requests, and a kernel that streams weights
// (decode's panels, a mixture's experts) keeps several in flight.
float ReadSum(const float* HWY_RESTRICT p, size_t n) {
    const hn::ScalableTag<float> d;
    const size_t N = hn::Lanes(d);
    const size_t q = n / 4 / N * N;  // each quarter a whole number of vectors
    const float* HWY_RESTRICT p0 = p;
    const float* HWY_RESTRICT p1 = p + q;
    const float* HWY_RESTRICT p2 = p + 2 * q;
    const float* HWY_RESTRICT p3 = p + 3 * q;
    auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < q; i += N) {
        s0 = hn::Add(s0, hn::LoadU(d, p0 + i));
        s1 = hn::Add(s1, hn::LoadU(d, p1 + i));
        s2 = hn::Add(s2, hn::LoadU(d, p2 + i));
        s3 = hn::Add(s3, hn::LoadU(d, p3 + i));
    }
    float tail = 0;
    for (size_t i = 4 * q; i < n; ++i) tail += p[i];
    return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3)))) + tail;
}

size_t F32Lanes() { return hn::Lanes(hn::ScalableTag<float>()); }

}  // namespace HWY_NAMESPACE
}  // namespace conform::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "bench/peak.h"
#include "reference/blas.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace conform::bench {

HWY_EXPORT(FmaLoop);
HWY_EXPORT(Bf16Loop);
HWY_EXPORT(F32Lanes);
HWY_EXPORT(ReadSum);

namespace {

using Clock = std::chrono::steady_clock;
using Loop = std::function<double(int64_t, double*)>;

#if defined(__x86_64__)
// Debian's Highway 1.0.3 has no target with AVX512-BF16 (its bf16 dot is
// shifts and float32 FMAs), so the native instruction is reached directly,
// here only, to measure what the CPU could do. 8 independent chains (each
// from its own start); FLOP:
// 2 x 32 products per instruction.
__attribute__((target("avx512f,avx512bf16"))) double NativeBf16Loop(int64_t iters, double* flop) {
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    __m512 s0 = _mm512_set1_ps(0.f), s1 = _mm512_set1_ps(1.f), s2 = _mm512_set1_ps(2.f), s3 = _mm512_set1_ps(3.f);
    __m512 s4 = _mm512_set1_ps(4.f), s5 = _mm512_set1_ps(5.f), s6 = _mm512_set1_ps(6.f), s7 = _mm512_set1_ps(7.f);
    for (int64_t i = 0; i < iters; ++i) {
        s0 = _mm512_dpbf16_ps(s0, a, a), s1 = _mm512_dpbf16_ps(s1, a, a);
        s2 = _mm512_dpbf16_ps(s2, a, a), s3 = _mm512_dpbf16_ps(s3, a, a);
        s4 = _mm512_dpbf16_ps(s4, a, a), s5 = _mm512_dpbf16_ps(s5, a, a);
        s6 = _mm512_dpbf16_ps(s6, a, a), s7 = _mm512_dpbf16_ps(s7, a, a);
    }
    *flop = 2.0 * 8 * 32 * static_cast<double>(iters);
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                                   _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7)));
    return _mm512_reduce_add_ps(s);
}

// One core's clock: a chain of dependent integer adds retires one per cycle.
double measure_ghz() {
    constexpr int64_t kIters = 20'000'000;  // x 10 adds
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        int64_t x = 0, n = kIters;
        const auto t0 = Clock::now();
        __asm__ volatile(
            "1:\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "dec %1\n\tjnz 1b\n"
            : "+r"(x), "+r"(n));
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        best = std::max(best, 10.0 * kIters / s / 1e9);
    }
    return best;
}
#endif

// `loop` on every thread at once, each for about `seconds`; FLOP/s of all of
// them together, best of five.
double rate(const Loop& loop, int threads, double seconds) {
    // Size the repetition on one thread first.
    int64_t iters = 1 << 14;
    for (;;) {
        double flop = 0;
        const auto t0 = Clock::now();
        volatile double sink = loop(iters, &flop);
        (void)sink;
        if (std::chrono::duration<double>(Clock::now() - t0).count() > seconds / 4 || iters > (int64_t{1} << 40)) break;
        iters *= 2;
    }
    iters *= 4;
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
        std::vector<double> flop(threads), secs(threads);
        std::atomic<int> ready{0};
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                ready.fetch_add(1);
                while (ready.load() < threads) {
                }  // start together: the rate is of every core at once
                const auto t0 = Clock::now();
                volatile double sink = loop(iters, &flop[t]);
                (void)sink;
                secs[t] = std::chrono::duration<double>(Clock::now() - t0).count();
            });
        for (auto& t : ts) t.join();
        double total = 0;
        for (int t = 0; t < threads; ++t) total += flop[t] / secs[t];
        best = std::max(best, total);
    }
    return best;
}

// 256 MiB read by `threads` threads at once (each its slice), bytes read per
// second, best of five after one run that faults the pages in.
double read_bandwidth(int threads) {
    const size_t n = (size_t{256} << 20) / sizeof(float);
    std::vector<float> buf(n, 1.0f);
    double best = 0;
    for (int rep = 0; rep < 6; ++rep) {
        std::vector<std::thread> ts;
        std::vector<float> sums(threads);
        const auto t0 = Clock::now();
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                const size_t b = n * t / threads, e = n * (t + 1) / threads;
                sums[t] = HWY_DYNAMIC_DISPATCH(ReadSum)(buf.data() + b, e - b);
            });
        for (auto& t : ts) t.join();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        volatile float sink = sums[0];
        (void)sink;
        if (rep > 0) best = std::max(best, static_cast<double>(n * sizeof(float)) / s);
    }
    return best;
}

}  // namespace

Peak measure_peak(int threads, double seconds) {
    Peak p;
    p.threads = std::max(1, threads);
    // The best target compiled here that the CPU supports (the lowest bit
    // is the best); the dispatch below picks the same.
    const int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
    p.target = usable ? hwy::TargetName(usable & -usable) : "none";
    p.f32_lanes = HWY_DYNAMIC_DISPATCH(F32Lanes)();
    p.f32_fma = rate([](int64_t n, double* f) { return HWY_DYNAMIC_DISPATCH(FmaLoop)(n, f); }, p.threads, seconds);
    p.read_bytes_per_s = read_bandwidth(p.threads);
    p.bf16_highway = rate([](int64_t n, double* f) { return HWY_DYNAMIC_DISPATCH(Bf16Loop)(n, f); }, p.threads, seconds);
#if defined(__x86_64__)
    const ref::blas::CpuFeatures cpu = ref::blas::cpu_features();
    if (cpu.avx512_bf16) p.bf16_native = rate(NativeBf16Loop, p.threads, seconds);
    p.ghz = measure_ghz();
    // Two full-width FMA pipes (Haswell on; Intel's AVX-512 server cores);
    // Zen 4 (family 19h) executes a 512-bit FMA on its two 256-bit pipes: one
    // per cycle. Zen 5 (family 1Ah) has the 512-bit datapath: two again. (A
    // CI machine's Zen 5 EPYC measured the FMA loop at 2.04x the one-pipe
    // rate, which the bench's own check — no loop past twice its nominal —
    // then refused.)
    unsigned a = 0, b = 0, c = 0, d = 0;
    const unsigned family = __get_cpuid(1, &a, &b, &c, &d) ? ((a >> 8) & 0xf) + ((a >> 20) & 0xff) : 0;
    p.fma_pipes = cpu.vendor == "AuthenticAMD" && p.f32_lanes == 16 && family < 0x1a ? 1 : 2;
    p.f32_nominal = static_cast<double>(p.f32_lanes) * 2 * p.fma_pipes * p.ghz * 1e9 * p.threads;
#endif
    return p;
}

}  // namespace conform::bench
#endif  // HWY_ONCE

#include "reference/ceilings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "reference/bench_torch.h"

namespace conform::ref {

double copy_bandwidth(int threads) {
    using Clock = std::chrono::steady_clock;
    threads = std::max(1, threads);
    const size_t bytes = size_t{256} << 20;
    std::vector<char> src(bytes, 1), dst(bytes, 0);
    double best = 0;
    for (int rep = 0; rep < 6; ++rep) {
        const auto t0 = Clock::now();
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
            ts.emplace_back([&, t] {
                const size_t b = bytes * t / threads, e = bytes * (t + 1) / threads;
                std::memcpy(dst.data() + b, src.data() + b, e - b);
            });
        for (auto& t : ts) t.join();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (rep > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / s);  // first run faults the pages in
    }
    return best;
}

Ceilings measure_ceilings(int threads, int64_t matmul_n) {
    Ceilings c;
    c.threads = std::max(1, threads);
    c.matmul_n = matmul_n;
    set_torch_threads(c.threads);
    c.copy_bytes_per_s = copy_bandwidth(c.threads);
    c.matmul_flops_per_s = 2.0 * std::pow(static_cast<double>(matmul_n), 3) / torch_matmul_seconds(matmul_n, 5);
    return c;
}

}  // namespace conform::ref

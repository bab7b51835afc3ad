#include "simd/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CONFORM_PAUSE() _mm_pause()
#else
#define CONFORM_PAUSE() std::this_thread::yield()
#endif

namespace conform::simd {

namespace {
// How long a worker polls for the next job before it sleeps: longer than the
// gaps between a forward's jobs (microseconds), short enough that an idle
// pool does not hold a core from whatever runs next.
constexpr auto kSpin = std::chrono::microseconds(50);
}  // namespace

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    workers_.reserve(static_cast<size_t>(threads - 1));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_.store(true, std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::RunShare(int thread) {
    const size_t stride = static_cast<size_t>(size());
    for (size_t i = static_cast<size_t>(thread); i < n_; i += stride) fn_(ctx_, i, thread);
}

void ThreadPool::Dispatch(size_t n, Fn fn, const void* ctx) {
    {
        // The lock orders the job's fields before the generation a sleeping
        // worker re-reads under the same lock; spinning workers acquire it
        // through generation_ itself.
        std::lock_guard<std::mutex> lock(mu_);
        fn_ = fn;
        ctx_ = ctx;
        n_ = n;
        pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
        generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    RunShare(0);
    while (pending_.load(std::memory_order_acquire) != 0) CONFORM_PAUSE();
}

void ThreadPool::WorkerLoop(int index) {
    uint64_t seen = 0;
    for (;;) {
        // Poll first: the next job usually follows within microseconds.
        const auto until = std::chrono::steady_clock::now() + kSpin;
        uint64_t gen = generation_.load(std::memory_order_acquire);
        for (int i = 0; gen == seen; ++i) {
            CONFORM_PAUSE();
            gen = generation_.load(std::memory_order_acquire);
            if ((i & 255) == 255 && std::chrono::steady_clock::now() > until) break;
        }
        if (gen == seen) {
            std::unique_lock<std::mutex> lock(mu_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            gen = generation_.load(std::memory_order_acquire);
        }
        seen = gen;
        if (stop_.load(std::memory_order_relaxed)) return;
        RunShare(index);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
}

}  // namespace conform::simd

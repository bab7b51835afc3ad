// impls/simd/thread_pool.h — a small fixed pool for the SIMD implementation.
//
// Determinism is by construction, not by luck: Run(n, f) hands task i to
// thread i % size(), always, and every kernel that runs on the pool splits
// its work so that each output element belongs to exactly one task and its
// arithmetic does not depend on which thread runs it or on how many threads
// there are. Same inputs, same bits — for any thread count.
//
// Workers spin briefly after a job (a decode step issues ~10 jobs a few
// hundred microseconds apart, and a futex wake costs tens of microseconds),
// then sleep, so an idle pool leaves the cores to whoever else is running
// (LibTorch's OpenBLAS threads, in `conform bench`).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace conform::simd {

class ThreadPool {
   public:
    // threads <= 0: one per hardware thread. The calling thread is one of them.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Calls f(task, thread) for every task in [0, n); task i on thread i % size().
    // Returns when all are done. Not reentrant: f must not call Run.
    template <class F>
    void Run(size_t n, const F& f) {
        if (n == 0) return;
        if (workers_.empty() || n == 1) {
            for (size_t i = 0; i < n; ++i) f(i, 0);
            return;
        }
        Dispatch(n, &Call<F>, &f);
    }

    // Splits [0, n) into size() contiguous ranges of nearly equal length and
    // calls f(begin, end, thread) for each non-empty one.
    template <class F>
    void RunRanges(size_t n, const F& f) {
        if (n == 0) return;
        if (n == 1 || size() == 1) return f(size_t{0}, n, 0);
        const size_t parts = static_cast<size_t>(size());
        Run(parts, [&](size_t p, int thread) {
            const size_t begin = n * p / parts, end = n * (p + 1) / parts;
            if (begin < end) f(begin, end, thread);
        });
    }

   private:
    using Fn = void (*)(const void* ctx, size_t task, int thread);
    template <class F>
    static void Call(const void* ctx, size_t task, int thread) {
        (*static_cast<const F*>(ctx))(task, thread);
    }

    void Dispatch(size_t n, Fn fn, const void* ctx);
    void WorkerLoop(int index);
    void RunShare(int thread);

    std::vector<std::thread> workers_;

    // The current job, published by bumping generation_.
    Fn fn_ = nullptr;
    const void* ctx_ = nullptr;
    size_t n_ = 0;
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};  // workers still running the current job
    std::atomic<bool> stop_{false};

    std::mutex mu_;
    std::condition_variable wake_;
};

}  // namespace conform::simd

// impls/cuda/bench.h — internal to impls/cuda: the base of the ops `conform
// bench` times (bench.cu; block and decode in block.cu).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda.h"
#include "cuda/device.h"

namespace conform::cuda {

// run() = events around launch(), then a wait for the second event.
class TimedBench : public BenchOp {
   public:
    explicit TimedBench(DType dtype) : ctx_(dtype, Faults{}) {
        CUDA_CHECK(cudaEventCreate(&start_));
        CUDA_CHECK(cudaEventCreate(&stop_));
    }
    ~TimedBench() override {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    void run() final {
        CUDA_CHECK(cudaEventRecord(start_, ctx_.stream));
        launch();
        CUDA_CHECK(cudaEventRecord(stop_, ctx_.stream));
        CUDA_CHECK(cudaEventSynchronize(stop_));  // a fault inside a kernel surfaces here
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        seconds_ = ms / 1e3;
    }
    double device_seconds() const final { return seconds_; }
    std::string where() const final { return cuda_details(); }

   protected:
    virtual void launch() = 0;  // queue the op on ctx_.stream; no waiting

    template <typename S>
    std::vector<float> widened(const DeviceBuffer<S>& b) const {
        std::vector<float> out(b.size());
        download(ctx_, b, MutView{out.data(), 1, static_cast<int64_t>(out.size())});
        return out;
    }

    Context ctx_;

   private:
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    double seconds_ = 0;
};

// block.cu: block (one forward over x from an empty cache) and decode.
std::unique_ptr<BenchOp> make_block_bench(const ImplOptions& options, const BenchInputs& in);

}  // namespace conform::cuda

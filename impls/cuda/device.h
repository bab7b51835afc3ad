// impls/cuda/device.h — the implementation's device state (stream, cuBLAS
// handle, properties) and device buffers that police themselves: every
// buffer is allocated with a guard region behind it, its elements poisoned
// with a NaN no arithmetic produces and its guard filled with a sentinel, so
// reading it back tells which elements a kernel never wrote and whether one
// wrote past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "conform/config.h"
#include "conform/tensor.h"
#include "cuda/check.h"

namespace conform::cuda {

// Deliberate bugs, for the CUDA mutants only (registry: cuda_*); all false in
// the implementation the gate runs.
struct Faults {
    bool rope_layout_swapped = false;  // RoPE pairs NeoX as interleaved and vice versa
    bool gqa_tiled = false;            // query head h reads kv head h % n_kv (not h / group)
    bool router_bf16 = false;          // the router's logits and scores rounded to bf16 (vllm#54048)
};

// One implementation instance's hold on the GPU.
class Context {
   public:
    Context(DType dtype, Faults faults);  // throws ImplError when there is no usable device
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    // Waits for everything queued; a fault inside a kernel surfaces here.
    void sync(const char* what) const;

    DType dtype;
    Faults faults;
    cudaStream_t stream = nullptr;
    cublasHandle_t blas = nullptr;
    int sm_count = 1;
    size_t smem_optin = 48 * 1024;  // the most dynamic shared memory a block may opt in to
};

// The bit patterns, per storage type: poison (never written) and sentinel
// (guard region). Both NaNs with payloads no arithmetic produces (the GPU's
// NaN is canonical, 0x7FFFFFFF / 0x7FFF).
template <typename T>
struct Marks;
template <>
struct Marks<float> {
    using Bits = uint32_t;
    static constexpr Bits poison = 0x7FC0DEADu, sentinel = 0x7FA5A5A5u;
};
template <>
struct Marks<__nv_bfloat16> {
    using Bits = uint16_t;
    static constexpr Bits poison = 0x7FDEu, sentinel = 0x7FA5u;
};
template <>
struct Marks<__half> {
    using Bits = uint16_t;
    static constexpr Bits poison = 0x7EADu, sentinel = 0x7DA5u;
};
template <>
struct Marks<uint8_t> {  // FP8 codes: poison is e4m3's NaN, 0x7F
    using Bits = uint8_t;
    static constexpr Bits poison = 0x7Fu, sentinel = 0xA5u;
};
template <>
struct Marks<int64_t> {
    using Bits = uint64_t;
    static constexpr Bits poison = 0x7FF0DEAD0000DEADull, sentinel = 0x7FF0A5A5A5A5A5A5ull;
};

template <>
struct Marks<double> {
    using Bits = uint64_t;
    static constexpr Bits poison = 0x7FF8DEAD0000DEADull, sentinel = 0x7FF0A5A5A5A5A5A5ull;
};

constexpr size_t kGuard = 64;  // sentinel elements after every buffer

// Fills n elements of `width` bytes at p with `bits` (device memory). device.cu
void fill_bits(void* p, size_t n, int width, uint64_t bits, cudaStream_t s);
// dst[i] = T(src[i]) on the device, round to nearest even. device.cu
template <typename T>
void convert_from_f32(const float* src, T* dst, size_t n, cudaStream_t s);
// Host-side widening of a stored element.
float widen(float x);
float widen(__nv_bfloat16 x);
float widen(__half x);
__half from_f32_host_half(float x);  // round to nearest even

// n elements of T on the device, then kGuard sentinels. Move-only.
template <typename T>
class DeviceBuffer {
   public:
    using Bits = typename Marks<T>::Bits;
    static_assert(sizeof(Bits) == sizeof(T), "marks must match the storage width");

    DeviceBuffer() = default;
    DeviceBuffer(std::string name, size_t n, cudaStream_t s) : name_(std::move(name)), n_(n) {
        CUDA_CHECK(cudaMalloc(&data_, (n_ + kGuard) * sizeof(T)));
        fill_bits(data_, n_, sizeof(T), Marks<T>::poison, s);
        fill_bits(data_ + n_, kGuard, sizeof(T), Marks<T>::sentinel, s);
    }
    ~DeviceBuffer() {
        if (data_) cudaFree(data_);  // no check: a destructor may run while an error unwinds
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(name_, o.name_);
        std::swap(n_, o.n_);
        std::swap(data_, o.data_);
        return *this;
    }

    T* data() const { return data_; }
    size_t size() const { return n_; }
    const std::string& name() const { return name_; }

    // The whole buffer back on the host after `s` finished. Throws ImplError
    // if the guard was overwritten, or if an element of [first, first + count)
    // still holds the poison (never written).
    std::vector<T> fetch_checked(cudaStream_t s, size_t first, size_t count) const {
        if (!data_) return {};  // never allocated (default-constructed)
        std::vector<T> host(n_ + kGuard);
        CUDA_CHECK(cudaMemcpyAsync(host.data(), data_, host.size() * sizeof(T), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (size_t i = n_; i < n_ + kGuard; ++i)
            if (bits(host[i]) != Marks<T>::sentinel)
                throw ImplError("cuda: a kernel wrote past the end of device buffer '" + name_ + "' (sentinel " +
                                std::to_string(i - n_) + " after its " + std::to_string(n_) +
                                " elements was overwritten)");
        for (size_t i = first; i < first + count; ++i)
            if (bits(host[i]) == Marks<T>::poison)
                throw ImplError("cuda: element " + std::to_string(i - first) + " of device buffer '" + name_ +
                                "' was never written (still poisoned)");
        host.resize(n_);
        return host;
    }
    std::vector<T> fetch_checked(cudaStream_t s) const { return fetch_checked(s, 0, n_); }

    // Only the guard: for buffers the op writes but does not return.
    void check_guard(cudaStream_t s) const {
        if (!data_) return;
        std::vector<T> guard(kGuard);
        CUDA_CHECK(cudaMemcpyAsync(guard.data(), data_ + n_, kGuard * sizeof(T), cudaMemcpyDeviceToHost, s));
        CUDA_CHECK(cudaStreamSynchronize(s));
        for (size_t i = 0; i < kGuard; ++i)
            if (bits(guard[i]) != Marks<T>::sentinel)
                throw ImplError("cuda: a kernel wrote past the end of device buffer '" + name_ + "' (sentinel " +
                                std::to_string(i) + " was overwritten)");
    }

   private:
    static Bits bits(const T& v) {
        Bits b;
        std::memcpy(&b, &v, sizeof b);
        return b;
    }

    std::string name_;
    size_t n_ = 0;
    T* data_ = nullptr;
};

// A float32 host tensor on the device in storage type T (exact: the harness
// rounded the inputs to the dtype already).
template <typename T>
DeviceBuffer<T> upload(const Context& ctx, const char* name, const float* src, size_t n) {
    DeviceBuffer<T> d(name, n, ctx.stream);
    if constexpr (std::is_same_v<T, float>) {
        CUDA_CHECK(cudaMemcpyAsync(d.data(), src, n * sizeof(float), cudaMemcpyHostToDevice, ctx.stream));
    } else {
        DeviceBuffer<float> staging(std::string(name) + " (f32 staging)", n, ctx.stream);
        CUDA_CHECK(cudaMemcpyAsync(staging.data(), src, n * sizeof(float), cudaMemcpyHostToDevice, ctx.stream));
        convert_from_f32(staging.data(), d.data(), n, ctx.stream);
        ctx.sync(name);  // staging is freed on return
    }
    return d;
}
template <typename T>
DeviceBuffer<T> upload(const Context& ctx, const char* name, View v) {
    return upload<T>(ctx, name, v.data, static_cast<size_t>(v.size()));
}

inline DeviceBuffer<int64_t> upload_positions(const Context& ctx, const char* name, const int64_t* p, size_t n) {
    DeviceBuffer<int64_t> d(name, n, ctx.stream);
    CUDA_CHECK(cudaMemcpyAsync(d.data(), p, n * sizeof(int64_t), cudaMemcpyHostToDevice, ctx.stream));
    return d;
}

// Rows [row0, row0 + out.rows) and columns [col0, col0 + out.cols) of a
// device matrix with `cols` columns, checked (see fetch_checked), widened
// into the caller's float32 buffer.
template <typename T>
void download(const Context& ctx, const DeviceBuffer<T>& src, size_t cols, size_t row0, size_t col0, MutView out) {
    const size_t rows = static_cast<size_t>(out.rows), w = static_cast<size_t>(out.cols);
    if ((row0 + rows) * cols > src.size() || col0 + w > cols)
        throw ImplError("cuda: download of " + std::to_string(rows) + "x" + std::to_string(w) + " from '" +
                        src.name() + "' is out of its bounds");
    const std::vector<T> host = src.fetch_checked(ctx.stream, row0 * cols, rows * cols);
    for (size_t r = 0; r < rows; ++r)
        for (size_t c = 0; c < w; ++c) out.data[r * w + c] = widen(host[(row0 + r) * cols + col0 + c]);
}
template <typename T>
void download(const Context& ctx, const DeviceBuffer<T>& src, MutView out) {
    download(ctx, src, static_cast<size_t>(out.cols), 0, 0, out);
}

// The storage type the intermediates of a multi-stage op (swiglu, block,
// decode) are kept in. f16 keeps them in float32: the f16 baseline of the
// tolerance model is the reference computed in float32 and rounded to f16
// only at the op's edges (CPU LibTorch has no f16 GEMM), so intermediates
// rounded to f16 — q before its QK-norm, h before the FFN norm — would be
// judged against a bound that never rounded them, and fail on small heads.
// bf16's baseline rounds every intermediate, as bf16 storage does.
inline DType intermediate_dtype(DType d) { return d == DType::f16 ? DType::f32 : d; }

// An output computed in float32 for an f16 run, rounded to f16 at the edge.
inline void round_output(DType d, MutView out) {
    if (d != DType::f16) return;
    for (int64_t i = 0; i < out.size(); ++i) out.data[i] = widen(from_f32_host_half(out.data[i]));
}

// Calls f(T{}) with T the storage type of `dtype`.
template <typename F>
decltype(auto) with_storage(DType dtype, F&& f) {
    switch (dtype) {
        case DType::bf16: return f(__nv_bfloat16{});
        case DType::f16: return f(__half{});
        case DType::f32: break;
    }
    return f(float{});
}

}  // namespace conform::cuda

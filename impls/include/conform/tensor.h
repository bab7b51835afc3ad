// conform/tensor.h — the only tensor types that cross the implementation
// boundary. Deliberately tiny and dependency-free: any engine can build
// against this header set without torch, HDF5 or Highway.
//
// Everything is row-major and contiguous. A 2-D tensor [rows, cols] is enough
// for every op in the decoder block: activations are [T, width], weights are
// [in, out], vectors are [1, n] or a plain pointer + length.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace conform {

// Read-only view of a row-major [rows, cols] float32 matrix.
struct View {
    const float* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;

    int64_t size() const { return rows * cols; }
    const float* row(int64_t r) const { return data + r * cols; }
    float at(int64_t r, int64_t c) const { return data[r * cols + c]; }
};

// Writable view of a caller-owned row-major [rows, cols] float32 buffer.
// Implementations write outputs into buffers the harness allocated, so the
// harness can poison them beforehand and guard them with sentinels after.
struct MutView {
    float* data = nullptr;
    int64_t rows = 0;
    int64_t cols = 0;

    int64_t size() const { return rows * cols; }
    float* row(int64_t r) const { return data + r * cols; }
    operator View() const { return View{data, rows, cols}; }
};

// Read-only view of token positions (int64, one per row of an activation).
struct Positions {
    const int64_t* data = nullptr;
    int64_t n = 0;

    int64_t operator[](int64_t i) const { return data[i]; }
};

// An owning row-major float32 tensor, used by the harness and by
// implementations for scratch space. Not required by the interface itself.
struct Tensor {
    std::vector<int64_t> shape;
    std::vector<float> data;

    Tensor() = default;
    Tensor(int64_t rows, int64_t cols) : shape{rows, cols}, data(static_cast<size_t>(rows * cols), 0.0f) {}

    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? (shape.empty() ? 0 : 1) : shape[1]; }
    int64_t numel() const { return static_cast<int64_t>(data.size()); }
    View view() const { return View{data.data(), rows(), cols()}; }
    MutView mut() { return MutView{data.data(), rows(), cols()}; }
};

}  // namespace conform

// impls/simd/buffer.h — aligned f32 / bf16 storage, and conversions at the
// implementation's boundary (the contract speaks float32).
#pragma once

#include <cstddef>

#include <hwy/aligned_allocator.h>

#include "conform/tensor.h"
#include "simd/kernels.h"

namespace conform::simd {

// A row-major [rows, cols] matrix of elem, 64-byte aligned. Grows, never
// shrinks, so a buffer reused across decode steps allocates once.
class Buffer {
   public:
    Buffer() = default;
    Buffer(Elem e, size_t rows, size_t cols) { resize(e, rows, cols); }

    void resize(Elem e, size_t rows, size_t cols);

    Elem elem() const { return elem_; }
    size_t rows() const { return rows_; }
    size_t cols() const { return cols_; }
    void* data() { return bytes_.get(); }
    const void* data() const { return bytes_.get(); }
    size_t bytes() const { return rows_ * cols_ * elem_bytes(elem_); }

    MRows m() { return {data(), cols_, elem_}; }
    CRows c() const { return {data(), cols_, elem_}; }
    // Rows from `row` on, as a view of the same storage.
    MRows m_at(size_t row) { return {static_cast<char*>(data()) + row * cols_ * elem_bytes(elem_), cols_, elem_}; }

   private:
    Elem elem_ = Elem::f32;
    size_t rows_ = 0, cols_ = 0, capacity_ = 0;  // capacity in bytes
    hwy::AlignedFreeUniquePtr<char[]> bytes_;
};

// dst (rows x cols, any Elem) = src, rounded to nearest even for bf16.
void store(View src, MRows dst);
// dst = columns [col0, col0 + dst.cols) of rows [0, dst.rows) of src, widened to float.
void load(CRows src, size_t col0, MutView dst);

}  // namespace conform::simd

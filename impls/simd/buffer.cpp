#include "simd/buffer.h"

#include <cstring>
#include <new>

namespace conform::simd {

void Buffer::resize(Elem e, size_t rows, size_t cols) {
    const size_t need = rows * cols * elem_bytes(e);
    if (need > capacity_ || !bytes_) {
        bytes_ = hwy::AllocateAligned<char>(need > 0 ? need : 1);
        if (!bytes_) throw std::bad_alloc();
        capacity_ = need;
    }
    elem_ = e;
    rows_ = rows;
    cols_ = cols;
}

void store(View src, MRows dst) {
    for (int64_t r = 0; r < src.rows; ++r) {
        const float* s = src.row(r);
        if (dst.elem == Elem::f32) {
            std::memcpy(static_cast<float*>(dst.data) + r * dst.ld, s, static_cast<size_t>(src.cols) * sizeof(float));
        } else {
            bf16* d = static_cast<bf16*>(dst.data) + r * dst.ld;
            for (int64_t i = 0; i < src.cols; ++i) d[i] = to_bf16(s[i]);
        }
    }
}

void load(CRows src, size_t col0, MutView dst) {
    for (int64_t r = 0; r < dst.rows; ++r) {
        float* d = dst.row(r);
        if (src.elem == Elem::f32) {
            std::memcpy(d, static_cast<const float*>(src.data) + r * src.ld + col0,
                        static_cast<size_t>(dst.cols) * sizeof(float));
        } else {
            const bf16* s = static_cast<const bf16*>(src.data) + r * src.ld + col0;
            for (int64_t i = 0; i < dst.cols; ++i) d[i] = to_f32(s[i]);
        }
    }
}

}  // namespace conform::simd

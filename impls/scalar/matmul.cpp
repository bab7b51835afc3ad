// matmul — y = x @ W with W stored [in, out]: the naive order on purpose.
//
// Every output element is one float accumulator summed over k = 0, 1, ..., K-1.
// That is the worst-conditioned legitimate order (no partial sums), so it is
// the order the tolerance model must admit; see context/tolerance-notes.md.
#include "scalar.h"

namespace conform::scalar {

void matmul(View x, View w, MutView out) {
    const int64_t T = x.rows;  // tokens
    const int64_t K = x.cols;  // reduction (in)
    const int64_t N = w.cols;  // out
    detail::expect_shape("matmul", "x", x, T, K);
    detail::expect_shape("matmul", "w", w, K, N);
    detail::expect_shape("matmul", "out", out, T, N);

    // out = x @ w
    // Loop order t, k, n: out's row t holds the N running sums and W is read
    // row by row (contiguously). Each out[t, n] still starts at 0 and adds
    // x[t, k] * w[k, n] for k ascending, so every element is bitwise the
    // textbook `acc = 0; for k: acc += x[t, k] * w[k, n]` dot product.
    for (int64_t t = 0; t < T; t++) {
        const float* xt = x.row(t);  // (K,)
        float* yt = out.row(t);      // (N,)
        for (int64_t n = 0; n < N; n++) yt[n] = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            const float xk = xt[k];
            const float* wk = w.row(k);  // (N,)
            for (int64_t n = 0; n < N; n++) yt[n] += xk * wk[n];
        }
    }
}

}  // namespace conform::scalar

// moe_experts — a mixture of experts' experts and their combine, given the
// route, the way an engine's grouped kernel runs them: the tokens sorted by
// expert, each expert's rows gathered into one block and multiplied by its
// weights once (two products over the pool), the outputs scattered back
// with their weights; the shared expert over every token.
//
//   h   = x_e @ w13_e (+ b13_e)          [n_e, 2F]   (x_e: the rows routed to e, times r for Llama 4)
//   a   = act(gate, up)                   [n_e, F]    silu(gate) * up, or gpt-oss's clamped form
//   y   = a @ w2_e (+ b2_e)               [n_e, D]    the bias before the weight, as GptOssExperts adds it
//   out[t] += r * y, or y (the weight on the input)
#include <algorithm>
#include <cmath>
#include <vector>

#include "conform/dtype.h"
#include "simd/ops.h"

namespace conform::simd {

namespace {

float sigmoid(float z) { return 1.0f / (1.0f + std::exp(-z)); }

// A value stored by a bf16 engine: rounded to bf16 (float32: as it is).
void stored(Elem e, float* p, size_t n) {
    if (e == Elem::f32) return;
    for (size_t i = 0; i < n; ++i) p[i] = round_bf16(p[i]);
}

// a[n, F] from h[n, 2F]: HF's act over [gate | up] or gate, up interleaved.
void activate(ThreadPool& pool, const float* h, size_t n, size_t F, bool interleaved, float limit, float* a) {
    pool.Run(n, [&](size_t r, int) {
        const float* hr = h + r * 2 * F;
        float* ar = a + r * F;
        for (size_t i = 0; i < F; ++i) {
            float gate = interleaved ? hr[2 * i] : hr[i];
            float up = interleaved ? hr[2 * i + 1] : hr[F + i];
            if (limit > 0) {
                // gate.clamp(max=limit); up.clamp(-limit, limit); (up + 1) * gate * sigmoid(1.702 gate)
                gate = std::min(gate, limit);
                up = std::max(-limit, std::min(up, limit));
                ar[i] = gate * sigmoid(1.702f * gate) * (up + 1.0f);
            } else {
                ar[i] = gate * sigmoid(gate) * up;  // silu(gate) * up
            }
        }
    });
}

// y[n, D] = act(x[n, D] @ w13 (+ b13)) @ w2 (+ b2): one expert over its rows.
void expert(ThreadPool& pool, Target t, Elem storage, CRows x, size_t n, const PackedWeight& p13, const float* b13,
            const PackedWeight& p2, const float* b2, bool interleaved, float limit, Buffer& h, Buffer& a, MRows y,
            GemmScratch& scratch) {
    const size_t F = p2.K;
    h.resize(Elem::f32, n, 2 * F);
    a.resize(Elem::f32, n, F);
    matmul(pool, t, x, n, p13, {b13 ? Epilogue::bias : Epilogue::store, h.m(), {}, {}, b13}, scratch);
    stored(storage, static_cast<float*>(h.data()), n * 2 * F);
    activate(pool, static_cast<const float*>(h.data()), n, F, interleaved, limit, static_cast<float*>(a.data()));
    stored(storage, static_cast<float*>(a.data()), n * F);
    matmul(pool, t, a.c(), n, p2, {b2 ? Epilogue::bias : Epilogue::store, y, {}, {}, b2}, scratch);
    stored(storage, static_cast<float*>(y.data), n * y.ld);
}

}  // namespace

MoePacked pack_moe(ThreadPool& pool, const MoeWeights& w, const BlockConfig& c, const View* route, Elem storage) {
    const int64_t D = c.d_model, E = c.n_experts, F = c.moe_ffn_dim;
    MoePacked p;
    p.storage = storage;
    if (w.w_router.data) p.router = pack_columns(pool, storage, {w.w_router});
    auto chosen = [&](int64_t e) {
        if (!route) return true;
        for (int64_t i = 0; i < route->rows; ++i)
            if (route->at(i, e) != 0.0f) return true;
        return false;
    };
    if (w.w13.data) {
        p.w13.resize(static_cast<size_t>(E));
        p.w2.resize(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e)
            if (chosen(e)) {
                p.w13[e] = pack_columns(pool, storage, {View{w.w13.data + e * D * 2 * F, D, 2 * F}});
                p.w2[e] = pack_columns(pool, storage, {View{w.w2.data + e * F * D, F, D}});
            }
    }
    if (c.moe_shared_ffn_dim > 0 && w.ws13.data) {
        p.ws13 = pack_columns(pool, storage, {w.ws13});
        p.ws2 = pack_columns(pool, storage, {w.ws2});
    }
    return p;
}

void moe_experts(ThreadPool& pool, Target t, View x, View route, const MoePacked& p, const MoeWeights& w,
                 const BlockConfig& c, MutView out) {
    const size_t T = static_cast<size_t>(x.rows), D = static_cast<size_t>(c.d_model);
    const size_t E = static_cast<size_t>(c.n_experts), F = static_cast<size_t>(c.moe_ffn_dim);
    const size_t Fs = static_cast<size_t>(c.moe_shared_ffn_dim);
    const float limit = static_cast<float>(c.moe_swiglu_limit);
    std::fill(out.data, out.data + T * D, 0.0f);

    // The tokens sorted by expert (moe_align's order, without its padding).
    std::vector<std::vector<size_t>> rows(E);
    for (size_t i = 0; i < T; ++i)
        for (size_t e = 0; e < E; ++e)
            if (route.data[i * E + e] != 0.0f) rows[e].push_back(i);

    Buffer xe, h, a, y;
    GemmScratch scratch;
    for (size_t e = 0; e < E; ++e) {
        const size_t n = rows[e].size();
        if (n == 0) continue;  // an idle expert costs nothing
        // x_e: the rows routed to e (Llama 4: r * x, the weight on the input)
        xe.resize(Elem::f32, n, D);
        float* xp = static_cast<float*>(xe.data());
        for (size_t j = 0; j < n; ++j) {
            const float r = route.data[rows[e][j] * E + e];
            const float* src = x.data + rows[e][j] * D;
            for (size_t d = 0; d < D; ++d) xp[j * D + d] = c.moe_weight_on_input ? r * src[d] : src[d];
        }
        const float* b13 = c.moe_expert_bias ? w.b13.data + e * 2 * F : nullptr;
        const float* b2 = c.moe_expert_bias ? w.b2.data + e * D : nullptr;
        y.resize(Elem::f32, n, D);
        stored(p.storage, xp, n * D);  // Llama 4's r * x, as the engine stores it
        expert(pool, t, p.storage, xe.c(), n, p.w13[e], b13, p.w2[e], b2, c.moe_gate_up_interleaved, limit, h, a, y.m(), scratch);
        // out[t] += r * y, or y
        const float* yp = static_cast<const float*>(y.data());
        for (size_t j = 0; j < n; ++j) {
            const size_t i = rows[e][j];
            const float r = route.data[i * E + e];
            float* o = out.data + i * D;
            for (size_t d = 0; d < D; ++d)
                o[d] += c.moe_weight_on_input ? yp[j * D + d] : r * yp[j * D + d];
        }
    }
    if (Fs == 0) return stored(p.storage, out.data, T * D);
    // shared_experts(x), Qwen2-MoE: * sigmoid(shared_expert_gate(x))
    y.resize(Elem::f32, T, D);
    expert(pool, t, p.storage, {x.data, D, Elem::f32}, T, p.ws13, nullptr, p.ws2, nullptr, false, 0.0f, h, a, y.m(), scratch);
    const float* yp = static_cast<const float*>(y.data());
    for (size_t i = 0; i < T; ++i) {
        float gate = 1.0f;
        if (c.moe_shared_gate) {
            float z = 0.0f;
            for (size_t d = 0; d < D; ++d) z += x.data[i * D + d] * w.ws_gate.data[d];
            gate = sigmoid(z);
        }
        for (size_t d = 0; d < D; ++d) out.data[i * D + d] += gate * yp[i * D + d];
    }
    stored(p.storage, out.data, T * D);
}

}  // namespace conform::simd

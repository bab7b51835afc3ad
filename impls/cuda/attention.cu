// attention — causal-by-position softmax attention with grouped-query heads,
// FlashAttention-style: tiles of keys and values in shared memory, an online
// softmax, never the [T, S] score matrix, never repeated kv heads.
//
// Work decomposition. A block owns one kv head and Br "rows", a row being a
// (query token, query head of that kv head's group) pair: the group's query
// heads share every Kj, Vj tile the block loads (GQA without repeat_kv). A
// warp owns kRowsPerWarp rows. For scores a lane owns one key of the tile
// (Bc = 32 keys); for the output a lane owns head dims lane, lane + 32, ...
//
// Split-K. With few blocks (decode: T = 1) the keys are split over
// gridDim.z; each split writes its unnormalised O with its (m, l), and
// combine_kernel merges them. With enough blocks there is one split and the
// kernel writes O / l itself.
//
// Masking: key j is visible to the row's query iff k_pos[j] <= q_pos[t]
// (causal by position, bottom-right aligned when the queries are the tail of
// the keys) and, with a sliding window W, k_pos[j] > q_pos[t] - W, with
// attention chunks of C, same_chunk(k_pos[j], q_pos[t], C). The tile skip
// below stays causal only: a tile wholly before every row's window or chunk
// is still loaded, and each of its keys masked. A row that sees no key at all gets zeros (scalar/attention.cpp).
// T and S need not be multiples of the tiles: rows past T*group and keys past
// S are explicitly invalid, never read from global memory.
#include <cmath>
#include <cstdint>

#include "cuda/common.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

constexpr int kWarps = 4;                   // warps per block
constexpr int kRowsPerWarp = 4;             // query rows each warp owns
constexpr int Br = kWarps * kRowsPerWarp;   // query rows per block
constexpr int Bc = kWarp;                   // keys per tile: one per lane
constexpr int kThreads = kWarps * kWarp;

template <typename T>
struct FlashParams {
    AttentionArgs<T> a;
    float scale = 0;              // attn_scale, or 1 / sqrt(hd)
    int64_t group = 1;            // H / KV
    int64_t keys_per_split = 0;   // a multiple of Bc
    int64_t n_splits = 1;
    float* part_o = nullptr;      // [n_splits, T, H, hd]   unnormalised O of each split
    float* part_ml = nullptr;     // [n_splits, T, H, 2]    its (m, l)
};

// Shared memory of one block, carved from the dynamic allocation:
//   kpos_j[Bc], qpos_i[Br]  int64   (first: 8-byte aligned)
//   Qi[Br][hd]              float
//   Kj[Bc][ld]              float   ld = hd | 1: lane c reads row c, an odd stride spreads the rows over the banks
//   Vj[Bc][hd]              float
__host__ __device__ inline int64_t kj_stride(int64_t hd) { return hd | 1; }
size_t shared_bytes(int64_t hd) {
    return (Bc + Br) * sizeof(int64_t) + static_cast<size_t>(Br * hd + Bc * kj_stride(hd) + Bc * hd) * sizeof(float);
}

// Query head of row r of a block: the g-th head of kv head kvh's group.
__device__ __forceinline__ int64_t head_of(int64_t g, int64_t kvh, int64_t group, int64_t n_kv, bool tiled) {
    return tiled ? g * n_kv + kvh  // the bug (Faults::gqa_tiled): h % KV == kvh
                 : kvh * group + g;  // repeat_kv / repeat_interleave: h / group == kvh
}

// ---- kernels --------------------------------------------------------------------------------

template <typename T, int HD_MAX>
__global__ void __launch_bounds__(kThreads) flash_attention_kernel(FlashParams<T> p) {
    CONFORM_DYNAMIC_SHARED(smem);
    const AttentionArgs<T>& a = p.a;
    const int64_t hd = a.hd, ld = kj_stride(hd);
    int64_t* kpos_j = reinterpret_cast<int64_t*>(smem);
    int64_t* qpos_i = kpos_j + Bc;
    float* Qi = reinterpret_cast<float*>(qpos_i + Br);
    float* Kj = Qi + Br * hd;
    float* Vj = Kj + Bc * ld;

    const int tid = threadIdx.x, lane = tid % kWarp, warp = tid / kWarp;
    const int64_t kvh = blockIdx.y, split = blockIdx.z;
    const int64_t rows = a.tokens * p.group;                  // (token, group head) pairs of this kv head
    const int64_t row0 = static_cast<int64_t>(blockIdx.x) * Br;
    const int64_t k_begin = split * p.keys_per_split;
    const int64_t k_end = a.keys < k_begin + p.keys_per_split ? a.keys : k_begin + p.keys_per_split;

    // ---- Qi: this block's query rows, and their positions --------------------------------
    for (int64_t e = tid; e < Br * hd; e += kThreads) {
        const int64_t r = e / hd, d = e % hd, row = row0 + r;
        float q = 0.0f;
        if (row < rows) {
            const int64_t t = row / p.group, h = head_of(row % p.group, kvh, p.group, a.n_kv_heads, a.gqa_tiled);
            q = to_f32(a.q[t * a.q_stride + h * hd + d]);
        }
        Qi[r * hd + d] = q;
    }
    if (tid < Br && row0 + tid < rows) qpos_i[tid] = a.q_pos[(row0 + tid) / p.group];
    __syncthreads();  // Qi and qpos_i are complete before any warp reads them

    int64_t q_max = INT64_MIN;  // the latest query position of the block
    for (int r = 0; r < Br && row0 + r < rows; ++r) q_max = qpos_i[r] > q_max ? qpos_i[r] : q_max;

    float row_m[kRowsPerWarp], row_l[kRowsPerWarp];
    float o[kRowsPerWarp][HD_MAX / kWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        row_m[i] = -INFINITY;
        row_l[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < HD_MAX / kWarp; ++k) o[i][k] = 0.0f;
    }

    for (int64_t j0 = k_begin; j0 < k_end; j0 += Bc) {
        // Skip a tile no row of the block can see (causal prefill: every tile
        // past the block's last query). Also the barrier that keeps this tile's
        // load from overwriting Kj, Vj, kpos_j while a warp still reads the last.
        const int64_t j = j0 + tid;
        if (!__syncthreads_or(tid < Bc && j < k_end && a.k_pos[j] <= q_max)) continue;

        // ---- Kj, Vj: keys j0 .. j0 + Bc of kv head kvh; past k_end, zeros ----------------
        for (int64_t e = tid; e < Bc * hd; e += kThreads) {
            const int64_t c = e / hd, d = e % hd;
            const bool in = j0 + c < k_end;
            const int64_t at = (j0 + c) * a.kv_stride + kvh * hd + d;
            Kj[c * ld + d] = in ? to_f32(a.k[at]) : 0.0f;
            Vj[c * hd + d] = in ? to_f32(a.v[at]) : 0.0f;
        }
        if (tid < Bc && j < k_end) kpos_j[tid] = a.k_pos[j];
        __syncthreads();  // the tile is in shared memory before any warp reads it

        const bool key_in = j0 + lane < k_end;
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
            const int r = warp * kRowsPerWarp + i;
            const bool row_in = row0 + r < rows;

            // S_ij = Qi Kj^T * scale for row r, lane = key; -inf where invisible
            // (k_pos > q_pos, k_pos <= q_pos - window, or k_pos in another chunk than q_pos)
            float s = -INFINITY;
            if (row_in && key_in && a.visible(kpos_j[lane], qpos_i[r])) {  // the variant's mask
                const float* q = Qi + r * hd;
                const float* k = Kj + lane * ld;
                float dot = 0.0f;
                for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[d];
                s = dot * p.scale;
                // Gemma 2's soft-cap on the visible scores: cap * tanh(s / cap), never on the -inf mask
                const float cap = static_cast<float>(a.softcap);
                if (cap > 0.0f) s = cap * tanhf(s / cap);
            }

            // m_ij = rowmax(S_ij). No visible key in this tile: the row is unchanged.
            const float m_tile = warp_max(s);
            if (m_tile == -INFINITY) continue;  // the same on every lane: the shuffles below stay full

            // m_new = max(m_i, m_ij);  P_ij = exp(S_ij - m_new);  l_i = exp(m_i - m_new) l_i + rowsum(P_ij)
            // m_new is finite here, so neither exp sees -inf - -inf; at the row's
            // first visible tile m_i = -inf and alpha = 0.
            const float m_new = fmaxf(row_m[i], m_tile);
            const float p_lane = expf(s - m_new);  // 0 for invisible keys
            const float alpha = expf(row_m[i] - m_new);
            row_l[i] = alpha * row_l[i] + warp_sum(p_lane);
            row_m[i] = m_new;

            // O_i = alpha O_i + P_ij Vj      (lane: dims lane, lane + 32, ...)
#pragma unroll
            for (int k = 0; k < HD_MAX / kWarp; ++k) o[i][k] *= alpha;
            for (int c = 0; c < Bc; ++c) {
                const float pc = __shfl_sync(kFullMask, p_lane, c);
#pragma unroll
                for (int k = 0; k < HD_MAX / kWarp; ++k) {
                    const int64_t d = lane + k * kWarp;
                    if (d < hd) o[i][k] += pc * Vj[c * hd + d];
                }
            }
        }
    }

    // ---- write: O_i / l_i (one split), or the split's unnormalised O_i, m_i, l_i --------------
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
        const int64_t row = row0 + warp * kRowsPerWarp + i;
        if (row >= rows) continue;
        const int64_t t = row / p.group, h = head_of(row % p.group, kvh, p.group, a.n_kv_heads, a.gqa_tiled);
        if (p.n_splits == 1) {
            // A sink (gpt-oss) joins l_i once, with no value:
            //   m' = max(m_i, sink);  l' = exp(m_i - m') l_i + exp(sink - m');  O_i' = exp(m_i - m') O_i
            float l = row_l[i], c = 1.0f;
            if (a.sinks) {
                const float sink = a.sinks[h], m = fmaxf(row_m[i], sink);
                c = row_m[i] == -INFINITY ? 0.0f : expf(row_m[i] - m);
                l = c * l + expf(sink - m);
            }
            // A row that saw no key (l = 0) gets zeros, not 0/0.
#pragma unroll
            for (int k = 0; k < HD_MAX / kWarp; ++k) {
                const int64_t d = lane + k * kWarp;
                if (d < hd) a.out[t * a.out_stride + h * hd + d] = from_f32<T>(l > 0.0f ? c * o[i][k] / l : 0.0f);
            }
        } else {
            const int64_t slot = (split * a.tokens + t) * a.n_heads + h;
#pragma unroll
            for (int k = 0; k < HD_MAX / kWarp; ++k) {
                const int64_t d = lane + k * kWarp;
                if (d < hd) p.part_o[slot * hd + d] = o[i][k];
            }
            if (lane == 0) {
                p.part_ml[slot * 2] = row_m[i];
                p.part_ml[slot * 2 + 1] = row_l[i];
            }
        }
    }
}

// Merges the splits of one (token, head) per warp:
//   M = max_s m_s;   L = sum_s exp(m_s - M) l_s;   O = sum_s exp(m_s - M) O_s / L
// Splits that saw no key (m_s = -inf) are skipped; if none saw one, zeros.
// A sink enters here, once: M = max(M, sink), L += exp(sink - M).
template <typename T>
__global__ void __launch_bounds__(kThreads) combine_kernel(FlashParams<T> p) {
    const AttentionArgs<T>& a = p.a;
    const int64_t job = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarp;
    if (job >= a.tokens * a.n_heads) return;
    const int64_t t = job / a.n_heads, h = job % a.n_heads, hd = a.hd;
    auto slot = [&](int64_t s) { return (s * a.tokens + t) * a.n_heads + h; };

    float M = -INFINITY;
    for (int64_t s = 0; s < p.n_splits; ++s) M = fmaxf(M, p.part_ml[slot(s) * 2]);
    const bool any = M != -INFINITY;
    if (any && a.sinks) M = fmaxf(M, a.sinks[h]);
    for (int64_t d = threadIdx.x % kWarp; d < hd; d += kWarp) {
        float L = any && a.sinks ? expf(a.sinks[h] - M) : 0.0f, acc = 0.0f;
        if (any) {
            for (int64_t s = 0; s < p.n_splits; ++s) {
                const float m = p.part_ml[slot(s) * 2];
                if (m == -INFINITY) continue;
                const float w = expf(m - M);
                L += w * p.part_ml[slot(s) * 2 + 1];
                acc += w * p.part_o[slot(s) * hd + d];
            }
        }
        a.out[t * a.out_stride + h * hd + d] = from_f32<T>(L > 0.0f ? acc / L : 0.0f);
    }
}

template <typename T, int HD_MAX>
void launch_flash(const FlashParams<T>& p, dim3 grid, const Context& ctx) {
    const size_t smem = shared_bytes(p.a.hd);
    if (smem > 48 * 1024) {
        if (smem > ctx.smem_optin)
            throw ImplError("cuda attention: head_dim " + std::to_string(p.a.hd) + " needs " + std::to_string(smem) +
                            " bytes of shared memory, the device allows " + std::to_string(ctx.smem_optin));
        CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<T, HD_MAX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    }
    CUDA_LAUNCH((flash_attention_kernel<T, HD_MAX>), grid, kThreads, smem, ctx.stream, p);
}

}  // namespace

// ---- launcher ---------------------------------------------------------------------------------

AttentionPlan plan_attention(int64_t T, int64_t S, int64_t n_heads, int64_t n_kv_heads, int64_t hd, int sm_count) {
    AttentionPlan plan;
    const int64_t tiles = ceil_div(S, Bc);
    if (tiles == 0) return plan;  // no keys: one split, every row zeros
    const int64_t blocks = ceil_div(T * (n_heads / n_kv_heads), Br) * n_kv_heads;
    // Split the keys only when the blocks are too few to fill the GPU (two per
    // multiprocessor): decode, short prompts. Splits are whole tiles.
    const int64_t target = 2 * static_cast<int64_t>(std::max(sm_count, 1));
    const int64_t want = blocks >= target ? 1 : std::min(tiles, ceil_div(target, blocks));
    plan.keys_per_split = ceil_div(tiles, want) * Bc;
    plan.n_splits = ceil_div(S, plan.keys_per_split);
    if (plan.n_splits > 1) plan.scratch_floats = static_cast<size_t>(plan.n_splits * T * n_heads * (hd + 2));
    return plan;
}

template <typename T>
void launch_attention(const AttentionArgs<T>& a, const AttentionPlan& plan, float* scratch, const Context& ctx) {
    if (a.tokens == 0) return;
    if (a.hd > kMaxAttentionHeadDim)
        throw ImplError("cuda attention: head_dim " + std::to_string(a.hd) + " is over " +
                        std::to_string(kMaxAttentionHeadDim));
    FlashParams<T> p;
    p.a = a;
    p.scale = static_cast<float>(score_scale(a.scale, a.hd));  // attn_scale, or 1 / sqrt(hd)
    p.group = a.n_heads / a.n_kv_heads;
    p.keys_per_split = plan.keys_per_split;
    p.n_splits = plan.n_splits;
    if (plan.n_splits > 1) {
        p.part_o = scratch;
        p.part_ml = scratch + plan.n_splits * a.tokens * a.n_heads * a.hd;
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(a.tokens * p.group, Br)), static_cast<unsigned>(a.n_kv_heads),
                    static_cast<unsigned>(plan.n_splits));
    if (a.hd <= 32)
        launch_flash<T, 32>(p, grid, ctx);
    else if (a.hd <= 64)
        launch_flash<T, 64>(p, grid, ctx);
    else if (a.hd <= 128)
        launch_flash<T, 128>(p, grid, ctx);
    else
        launch_flash<T, 256>(p, grid, ctx);
    if (plan.n_splits > 1)
        CUDA_LAUNCH(combine_kernel<T>, static_cast<unsigned>(ceil_div(a.tokens * a.n_heads, kWarps)), kThreads, 0,
                    ctx.stream, p);
}

template void launch_attention<float>(const AttentionArgs<float>&, const AttentionPlan&, float*, const Context&);
template void launch_attention<__nv_bfloat16>(const AttentionArgs<__nv_bfloat16>&, const AttentionPlan&, float*,
                                              const Context&);
template void launch_attention<__half>(const AttentionArgs<__half>&, const AttentionPlan&, float*, const Context&);

// ---- op entry ------------------------------------------------------------------------------------

void op_attention(const Context& ctx, View q, View k, View v, Positions q_pos, Positions k_pos,
                  const AttentionParams& p, MutView out) {
    namespace chk = scalar::detail;
    const int64_t H = p.n_heads, KV = p.n_kv_heads, hd = p.head_dim;
    chk::expect(H > 0 && KV > 0 && hd > 0, "attention", "n_heads, n_kv_heads and head_dim must be positive");
    chk::expect(H % KV == 0, "attention",
                "n_heads = " + std::to_string(H) + " must be a multiple of n_kv_heads = " + std::to_string(KV));
    chk::expect(hd <= kMaxAttentionHeadDim, "attention",
                "head_dim " + std::to_string(hd) + " is over " + std::to_string(kMaxAttentionHeadDim));
    const int64_t T = q.rows, S = k.rows;
    chk::expect_shape("attention", "q", q, T, H * hd);
    chk::expect_shape("attention", "k", k, S, KV * hd);
    chk::expect_shape("attention", "v", v, S, KV * hd);
    chk::expect_positions("attention", "q_pos", q_pos, T);
    chk::expect_positions("attention", "k_pos", k_pos, S);
    chk::expect_shape("attention", "out", out, T, H * hd);
    with_storage(ctx.dtype, [&](auto tag) {
        using St = decltype(tag);
        const DeviceBuffer<St> dq = upload<St>(ctx, "q", q), dk = upload<St>(ctx, "k", k), dv = upload<St>(ctx, "v", v);
        const DeviceBuffer<int64_t> dqp = upload_positions(ctx, "q_pos", q_pos.data, static_cast<size_t>(T));
        const DeviceBuffer<int64_t> dkp = upload_positions(ctx, "k_pos", k_pos.data, static_cast<size_t>(S));
        DeviceBuffer<float> dsinks;  // float32: a sink is an input of the case's dtype, held exactly
        if (p.sinks) dsinks = upload<float>(ctx, "sinks", p.sinks, static_cast<size_t>(H));
        DeviceBuffer<St> dout("out", static_cast<size_t>(out.size()), ctx.stream);
        const AttentionPlan plan = plan_attention(T, S, H, KV, hd, ctx.sm_count);
        DeviceBuffer<float> scratch("attention split scratch", plan.scratch_floats, ctx.stream);
        AttentionArgs<St> a;
        a.q = dq.data();
        a.k = dk.data();
        a.v = dv.data();
        a.out = dout.data();
        a.q_pos = dqp.data();
        a.k_pos = dkp.data();
        a.tokens = T;
        a.keys = S;
        a.q_stride = H * hd;
        a.kv_stride = KV * hd;
        a.out_stride = H * hd;
        a.n_heads = H;
        a.n_kv_heads = KV;
        a.hd = hd;
        static_cast<AttentionVariant&>(a) = p;
        a.sinks = p.sinks ? dsinks.data() : nullptr;  // the device's copy
        a.gqa_tiled = ctx.faults.gqa_tiled;
        launch_attention<St>(a, plan, scratch.data(), ctx);
        ctx.sync("attention");
        download(ctx, dout, out);
        scratch.check_guard(ctx.stream);
    });
}

}  // namespace conform::cuda

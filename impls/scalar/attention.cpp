// attention — causal-by-position softmax attention with grouped-query heads.
//
// Key j is visible to query t iff k_pos[j] <= q_pos[t] and, with a sliding
// window W, k_pos[j] > q_pos[t] - W (the query sees W keys, its own
// included: HF's sliding_window, llama.cpp's n_swa). Invisible keys are
// skipped outright rather than given a -inf score, so no exp(-inf - -inf)
// can appear. A row that sees no key at all (possible only when the caller's
// positions put every key after the query; a causal block always sees its own
// diagonal) has an empty softmax: we define its output as zeros, where a
// masked torch softmax would give NaN (pytorch #103749). With a soft-cap
// (Gemma 2) each visible score is cap * tanh(score / cap) before the softmax.
#include <algorithm>
#include <cmath>
#include <vector>

#include "scalar.h"

namespace conform::scalar {

int64_t kv_head_grouped(int64_t h, int64_t n_heads, int64_t n_kv_heads) { return h / (n_heads / n_kv_heads); }
bool causal(int64_t k_pos, int64_t q_pos) { return k_pos <= q_pos; }
int64_t own_sink(int64_t h, int64_t, int64_t) { return h; }
double config_scale(const AttentionParams& p) { return p.score_scale(); }
bool config_window(const AttentionParams& p, int64_t k_pos, int64_t q_pos, const WindowAt&) {
    return p.in_window(k_pos, q_pos);
}

void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p, MutView out,
               const AttentionRules& rules) {
    const int64_t H = p.n_heads;
    const int64_t KV = p.n_kv_heads;
    const int64_t hd = p.head_dim;
    detail::expect(H > 0 && KV > 0 && hd > 0, "attention",
                   "n_heads, n_kv_heads and head_dim must be positive, found " + std::to_string(H) + ", " +
                       std::to_string(KV) + ", " + std::to_string(hd));
    detail::expect(H % KV == 0, "attention",
                   "n_heads = " + std::to_string(H) + " must be a multiple of n_kv_heads = " + std::to_string(KV));
    const int64_t T = q.rows;  // queries
    const int64_t S = k.rows;  // keys
    detail::expect_shape("attention", "q", q, T, H * hd);
    detail::expect_shape("attention", "k", k, S, KV * hd);
    detail::expect_shape("attention", "v", v, S, KV * hd);
    detail::expect_positions("attention", "q_pos", q_pos, T);
    detail::expect_positions("attention", "k_pos", k_pos, S);
    detail::expect_shape("attention", "out", out, T, H * hd);

    const float scale = static_cast<float>(rules.scale(p));  // attn_scale, or 1 / sqrt(hd)
    std::vector<float> att(static_cast<size_t>(S));  // (S,) one row of scores, then of probabilities
    const int64_t sd = rules.score_dims > 0 ? std::min(rules.score_dims, hd) : hd;  // dims the scores sum over

    const float cap = static_cast<float>(p.softcap);
    // The bug a rule can ask for: the cap taken after the mask, so a masked key
    // is read with logit cap * tanh(-inf) = -cap.
    const bool masked_read = rules.softcap_after_mask && cap > 0;
    const WindowAt at{T > 0 ? q_pos[0] : 0, T, rules.page};

    for (int64_t t = 0; t < T; t++) {
        auto visible = [&](int64_t j) {
            const bool causal_ok =
                rules.visible_index ? rules.visible_index(j, t, S, T) : rules.visible(k_pos[j], q_pos[t]);
            // if sliding_window: mask |= k_pos <= q_pos - sliding_window
            // if attention_chunk_size: mask |= k_pos // chunk != q_pos // chunk   (Llama 4)
            return causal_ok && rules.in_window(p, k_pos[j], q_pos[t], at);
        };
        auto seen = [&](int64_t j) { return masked_read || visible(j); };
        for (int64_t h = 0; h < H; h++) {
            const float* qh = q.row(t) + h * hd;  // (hd,)
            const int64_t kvh = rules.kv_head(h, H, KV);  // GQA: h / (H / KV), repeat_interleave, not tile
            float* oh = out.row(t) + h * hd;  // (hd,)

            // scores = (q @ k.transpose(-2, -1)) * scale, only where visible: k_pos <= q_pos
            bool any = false;
            float max_score = 0.0f;
            for (int64_t j = 0; j < S; j++) {
                if (!seen(j)) continue;
                if (!visible(j)) {
                    att[j] = -cap;
                } else {
                    const float* kj = k.row(j) + kvh * hd;  // (hd,)
                    float dot = 0.0f;
                    for (int64_t d = 0; d < sd; d++) dot += qh[d] * kj[d];
                    att[j] = dot * scale;
                    // if softcap: scores = torch.tanh(scores / softcap) * softcap   (before the mask)
                    if (cap > 0) att[j] = cap * std::tanh(att[j] / cap);
                }
                if (!any || att[j] > max_score) max_score = att[j];
                any = true;
            }
            if (!any) {
                for (int64_t d = 0; d < hd; d++) oh[d] = rules.empty_row;
                continue;
            }
            // gpt-oss: combined = torch.cat([scores, sinks], -1); softmax; the sink's column dropped.
            // The sink is a logit in the denominator with no value.
            const bool sunk = p.sinks != nullptr;
            const float sink = sunk ? p.sinks[rules.sink_head(h, H, KV)] * (rules.sink_scaled ? scale : 1.0f) : 0.0f;
            if (sunk && rules.sink_after_lse) {
                // softmax over the keys alone, its lse = max + log(sum), then
                // o *= exp(lse - L), L = logaddexp(lse, sink), all in float32.
                float sum = 0.0f;
                for (int64_t j = 0; j < S; j++) {
                    if (!seen(j)) continue;
                    att[j] = std::exp(att[j] - max_score);
                    sum += att[j];
                }
                for (int64_t d = 0; d < hd; d++) oh[d] = 0.0f;
                for (int64_t j = 0; j < S; j++) {
                    if (!seen(j)) continue;
                    const float* vj = v.row(j) + kvh * hd;
                    for (int64_t d = 0; d < hd; d++) oh[d] += (att[j] / sum) * vj[d];
                }
                const float lse = max_score + std::log(sum);
                const float L = std::max(lse, sink) + std::log1p(std::exp(-std::fabs(lse - sink)));
                const float f = std::exp(lse - L);
                for (int64_t d = 0; d < hd; d++) oh[d] *= f;
                continue;
            }
            if (sunk) max_score = std::max(max_score, sink);

            if (rules.unrescaled_tile > 0) {
                // The broken flash kernel: per tile the running max m moves, and
                // the sum l and output o gathered under the old max are kept
                // as they were (no exp(m_old - m_new) rescale).
                // A sink is the state before the first tile: max = sink, sum = exp(0).
                float m = sunk ? sink : -INFINITY, l = sunk ? 1.0f : 0.0f;
                for (int64_t d = 0; d < hd; d++) oh[d] = 0.0f;
                for (int64_t j0 = 0; j0 < S; j0 += rules.unrescaled_tile) {
                    const int64_t j1 = std::min(S, j0 + rules.unrescaled_tile);
                    for (int64_t j = j0; j < j1; j++)
                        if (seen(j)) m = std::max(m, att[j]);
                    for (int64_t j = j0; j < j1; j++) {
                        if (!seen(j)) continue;
                        const float e = std::exp(att[j] - m);
                        l += e;
                        const float* vj = v.row(j) + kvh * hd;
                        for (int64_t d = 0; d < hd; d++) oh[d] += e * vj[d];
                    }
                }
                for (int64_t d = 0; d < hd; d++) oh[d] /= l;
                continue;
            }

            // probs = torch.softmax(scores, dim=-1)   max subtracted so exp never overflows
            const float shift = rules.subtract_max ? max_score : 0.0f;
            float sum = sunk ? std::exp(sink - shift) : 0.0f;
            for (int64_t j = 0; j < S; j++) {
                if (!seen(j)) continue;
                att[j] = std::exp(att[j] - shift);
                sum += att[j];
            }
            for (int64_t j = 0; j < S; j++) {
                if (!seen(j)) continue;
                att[j] /= sum;
            }

            // out = probs @ v   one accumulator per output dim, keys ascending
            for (int64_t d = 0; d < hd; d++) oh[d] = 0.0f;
            for (int64_t j = 0; j < S; j++) {
                if (!seen(j)) continue;
                const float* vj = v.row(j) + kvh * hd;  // (hd,)
                for (int64_t d = 0; d < hd; d++) oh[d] += att[j] * vj[d];
            }
        }
    }
}

}  // namespace conform::scalar

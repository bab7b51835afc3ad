// The a-priori term of the tolerance model: for every element of every output,
// how far a legitimate program may land from the float64 truth, from the
// magnitudes of what it sums and from what it inherits upstream.
//
// The dtype contract (docs/tolerance.md): values are stored in the dtype, arithmetic is
// float32. So each element's bound is
//   - the rounding noise of its own reductions in float32, sqrt(K)·u32·Σ|a_k b_k|
//     (Higham's typical bound for any summation order),
//   - below float32, one rounding to the dtype wherever a program may store the
//     value (every tap, and the intermediates the reference stores: scores, p,
//     gate, up, silu, the projections before a residual add),
//   - and the bounds of its inputs carried through the op, element by element
//     (first order with |Jacobian|, or a rigorous bound where first order
//     breaks down: a norm over a near-zero vector, a softmax whose scores move
//     by O(1)).
// A tensor-wide maximum would let the largest element's noise excuse every
// other element; carrying nothing would flag legitimate errors that an
// ill-conditioned stage amplifies (a QK-normed head of two dims whose q is
// itself rounding noise).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "conform/dtype.h"
#include "reference/torch_ops.h"

namespace conform::ref {

namespace {

using torch::Tensor;


// Which keys each sequence of a paged batch sums: its own, or a hypothesis's
// (only those that read owned rows: the others read the poison, NaN).
Variant paged_keys(const Variant* variant) {
    Variant keys;
    if (variant) {
        keys.paged_sequences_packed = variant->paged_sequences_packed;
        keys.paged_queries_at_start = variant->paged_queries_at_start;
        keys.paged_partial_page_dropped = variant->paged_partial_page_dropped;
        keys.window = variant->window;
        keys.window_page = variant->window_page;
    }
    return keys;
}

// Unit roundoffs: of the arithmetic (float32) and of storage (the dtype).
struct Units {
    double a;  // arithmetic
    double d;  // storage
    // One rounding to the dtype where a program may store y: none in float32,
    // where the arithmetic's own last rounding is the store.
    Tensor store(const Tensor& y, double times = 1.0) const {
        return d > a ? times * d * y.abs() : torch::zeros_like(y);
    }
};

// A bound split in two: a relative error common to a whole row (a norm's
// 1/rms, which a linear map passes on as ρ·|y|, no worse), and the rest, per
// element (which a linear map passes on through |W|).
struct Bound {
    Tensor rel;  // [rows, 1]: ρ per row
    Tensor abs;  // per element
    Tensor total(const Tensor& y) const { return rel.defined() ? rel * y.abs() + abs : abs; }
};

// Bounds of different elements come from different roundings (other
// reductions, other stores), so a sum of many of them grows like a root sum of
// squares — the same typical-case reading as sqrt(K)·u for a sum's own noise.
// What one cause moves together (a norm's 1/rms, one softmax row) is carried
// linearly instead (Bound::rel; attention heads).
Tensor carried(const Tensor& e, const Tensor& w) { return torch::matmul(e.pow(2), w.pow(2)).sqrt(); }

// y = a @ b: its own rounding noise, and a's bound carried through b.
Tensor matmul_bound(const Tensor& a, const Bound& ea, const Tensor& b, const Tensor& y, const Units& u) {
    const double K = static_cast<double>(a.size(-1));
    Tensor e = std::sqrt(K) * u.a * torch::matmul(a.abs(), b.abs()) + u.store(y);
    if (ea.abs.defined()) e = e + carried(ea.abs, b);
    if (ea.rel.defined()) e = e + ea.rel * y.abs();
    return e;
}

// y = a' @ b where a' is a quantised per block as an implementation declares
// (Case::act_quant): the quantisation itself is in the baselines (they
// quantise as the kernel does), but a code is decided by rounding a value the
// kernel computed in its own order: where a's value sits within its rounding
// noise of a code boundary, an honest kernel may store the neighbouring code,
// one block scale d from the baseline's. One such code per output element,
// d_max of a's row times the largest |b| of y's column. Measured without
// this term, the flips were sparse and single: an honest scalar-q8_k failed 4
// of 2,400 block and decode cases (scalar-q8_0 1), by up to 1.5x, each on one
// element about one code's worth past its bound (BENCHMARKS.md).
// Added to e in place; nothing (not even a tensor of zeros) without a declaration.
void add_flip_bound(Tensor& e, const Tensor& a, const Tensor& b, ActQuant q) {
    const int64_t B = act_quant_block(q), K = a.size(-1);
    if (B == 0 || K == 0) return;
    const int64_t blocks = (K + B - 1) / B;
    auto padded = torch::constant_pad_nd(a.abs(), {0, blocks * B - K});           // [T, blocks·B]
    auto d_max = std::get<0>(padded.reshape({a.size(0), blocks, B}).amax(-1).max(-1, true)) / 127.0;  // [T, 1]
    auto w_max = std::get<0>(b.abs().max(0, true));                               // [1, N]
    e = e + d_max * w_max;
}

// RMSNorm y = w · x / r over the last dim (n), r = sqrt(mean(x²) + eps).
// Own noise, in float32 arithmetic (u = u32), whatever the program's order:
// common to the row, r's relative error — the sum of squares' sqrt(n)·u
// (typical) plus u each for the squares, the /n and the +eps, all halved by
// the root, then the root's and the reciprocal's own roundings: (0.5·sqrt(n) +
// 3.5)·u; per element, the two products x·(1/r) and w·(·) (or one division
// and one product): 2u·|y_j|. (Without the per-element 2u and the 3.5u, an
// honest numpy RMSNorm, x / sqrt(mean(x*x) + eps) * w, failed a D = 30 row
// at 3.4u relative against 2.9u allowed.) Below float32, HF rounds x/r and
// then w·(x/r) to the dtype.
// Carried, rigorously (not first order): with |Δx| ≤ ex, η = |ex|₂ / (sqrt(n) r)
// bounds r's relative move, so y_j moves by at most |y_j| η / (1 - η), common
// to the row, plus |w_j| ex_j / (r (1 - η)). Where η ≥ 1/2 the row's direction
// is itself noise: y_j may be anything |x_j| / r ≤ sqrt(n) allows.
// Gemma's norms (plus_one) multiply by 1 + w, itself one float32 rounding:
// u·|y_j| more per element, and 1 + w in place of w wherever w is read.
Bound norm_bound(const Tensor& x, const Tensor& ex, const Tensor& w_in, bool plus_one, double eps, const Tensor& y,
                 const Units& u) {
    const double n = static_cast<double>(x.size(-1));
    const Tensor w = plus_one ? 1.0 + w_in : w_in;
    Bound b;
    b.rel = torch::full_like(y.narrow(-1, 0, 1), (0.5 * std::sqrt(n) + 3.5) * u.a);
    b.abs = (plus_one ? 3.0 : 2.0) * u.a * y.abs() + u.store(y, 2.0);
    if (ex.defined()) {
        auto r = (x.pow(2).mean(-1, true) + eps).sqrt();
        auto eta = ex.pow(2).sum(-1, true).sqrt() / (std::sqrt(n) * r);
        auto ok = eta < 0.5;
        auto live = (1.0 - eta).clamp_min(0.5);
        auto cap = w.abs() * std::sqrt(n) + y.abs();
        b.abs = torch::where(ok, b.abs + w.abs() * ex / (r * live), cap);
        b.rel = torch::where(ok, b.rel + eta / live, torch::zeros_like(b.rel));
    }
    return b;
}

// Rows [T, n*hd] as heads [T, n, hd] and back.
Tensor heads(const Tensor& t, int64_t hd) { return t.reshape({t.size(0), -1, hd}); }
Tensor flat(const Tensor& t) { return t.reshape({t.size(0), -1}); }

// RoPE y_j = c x_j - s x_p (p: j's partner). |c| and |s| of every element
// come from the reference's own rope on a probe (1 on the first of each pair),
// so scaling and yarn's attention factor are those of the config. Own noise:
// cos and sin rounded, two products, a difference — 3u (|c x_j| + |s x_p|) in
// the dtype's unit (the reference rotates in the dtype). Carried: |c| e_j + |s| e_p.
//
// And the angle's own error. A legitimate float32 program turns pair i at
// position p by an angle θ_i ≈ p · f_i, f_i the (scaled) inverse frequency,
// with a relative error in two parts (u = 2^-24): one that is the same at
// every position (the frequency's, ρf_i) and one that is not (ρr_i):
//   * HF: f_i = 1 / θ^(2i/rd) in float32: the exponent's rounding moves
//     θ^(2i/rd) by ln(θ)·(2i/rd)·u; the power and the division add ≤ 2u; the
//     product fl(p · f_i) rounds once per position: u;
//   * the recurrence θ_i = fl(θ_{i-1} · s), θ_0 = p, s = fl(θ^(-2/rd)) (ggml's
//     CPU RoPE): s's rounding compounds to i·u at every position alike, and
//     the i products round differently at every position: i·u;
//   * scaled (linear, llama3, yarn, dynamic) in float32: a few more, 3u;
//   * pair 0 of an unscaled RoPE has f_0 = 1 exactly whatever the program.
// So ρf_i = (2 + i + ln(θ)·2i/rd + 3·scaled)·u (0 for pair 0 unscaled) and
// ρr_i = (1 + i)·u, which also covers p held as float32 (exact below 2^24).
// A float32 cos/sin table indexed by position is these angles again (its own
// rounding is the 3u above). The pair (x_j, x_p), of norm r, turned by at
// most (ρf_i + ρr_i)·|θ_i| too far, moves by at most mscale · r · (ρf_i +
// ρr_i)·|θ_i|: that is the rope op's own budget, per element. It admits every
// computation above at any position and rejects angles, positions,
// frequencies or cos/sin held in bf16 or f16 (2^-9 and 2^-12 relative,
// thousands of times ρ at the pairs that matter), a wrong theta and a wrong or
// missing scaling (O(1)).
//
// Carried into attention, the two parts differ. The frequency's error is the
// same at every position, so a score q_t · k_s sees it only through the
// relative angle, (p_t − p_s)·f_i·ρf_i — zero on the diagonal, small for near
// keys; the per-position part is independent per position and pair, and a
// score of near positions sees it whole. (With the recurrence's i·u counted
// as a frequency error alone, an honest float32 block built by the
// recurrence failed 3 of 300 cases at positions past 4000: attn 1.64e-3
// against 1.50e-3 allowed, hd 256 at position 32766.) So rope_bound returns
// them apart: `round` (per element, r·mscale·ρr_i·|θ_i|) and `freq` (per
// element, r·mscale·f_i·ρf_i: the error per unit of position), and attention
// sums both over a head in quadrature (different pairs, different roundings),
// where the rest is carried linearly.
struct RopeBound {
    Tensor rest, round, freq, positions;
    Tensor total() const { return rest + round + freq * positions.to(freq.scalar_type()).abs().unsqueeze(1); }
};
RopeBound rope_bound(const Tensor& x, const Tensor& ex, const Tensor& positions, const RopeParams& p, const Units& u) {
    const int64_t T = x.size(0), hd = p.head_dim, rd = p.rotary(), width = x.size(1);
    std::vector<int64_t> partner(static_cast<size_t>(width));
    std::vector<double> first(static_cast<size_t>(width), 0.0), rotated(static_cast<size_t>(width), 0.0);
    for (int64_t col = 0; col < width; ++col) {
        const int64_t base = col - col % hd, d = col % hd;
        int64_t q = d;
        bool is_first = false;
        if (d < rd) {
            if (p.layout == RopeLayout::neox) {
                q = d < rd / 2 ? d + rd / 2 : d - rd / 2;
                is_first = d < rd / 2;
            } else {
                q = d ^ 1;
                is_first = d % 2 == 0;
            }
            rotated[static_cast<size_t>(col)] = 1.0;
        }
        partner[static_cast<size_t>(col)] = base + q;
        first[static_cast<size_t>(col)] = is_first ? 1.0 : 0.0;
    }
    auto opts = x.options();
    auto idx = torch::tensor(partner, torch::kInt64);
    auto first_mask = torch::tensor(first, opts).reshape({1, width});
    auto rot_mask = torch::tensor(rotated, opts).reshape({1, width});
    const Variant faithful;
    const Ctx f64{torch::kFloat64, torch::kFloat64, Order::library, faithful};
    auto probe = rope(first_mask.expand({T, width}).contiguous(), positions, p, f64).abs();
    // On the first of a pair the probe's output is c, on its partner s.
    auto c_first = probe * first_mask, s_second = probe * (1.0 - first_mask) * rot_mask;
    auto C = c_first + c_first.index_select(1, idx) * (1.0 - first_mask) * rot_mask;
    auto S = s_second + s_second.index_select(1, idx) * first_mask;
    C = torch::where(rot_mask > 0, C, torch::ones_like(C));  // dims past the rotary ones pass through
    auto xa = x.abs();
    RopeBound b;
    b.rest = 3.0 * u.d * (C * xa + S * xa.index_select(1, idx)) * rot_mask;
    if (ex.defined()) b.rest = b.rest + C * ex + S * ex.index_select(1, idx);
    // The angle's own error, per element (rows: positions; columns: pairs).
    const int64_t half = rd / 2;
    const bool scaled = p.scaling.type != RopeScalingType::none;
    const auto one = torch::ones({1}, torch::kInt64);
    auto f = rope_angles(one, p, f64).abs().reshape({1, half});  // f_i: the angles at position 1
    std::vector<double> rho_f(static_cast<size_t>(half)), rho_r(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
        rho_f[static_cast<size_t>(i)] =
            i == 0 && !scaled ? 0.0 : (2.0 + i + std::log(p.theta) * 2.0 * i / rd + (scaled ? 3.0 : 0.0)) * u.a;
        rho_r[static_cast<size_t>(i)] = (1.0 + i) * u.a;
    }
    std::vector<int64_t> pair_of(static_cast<size_t>(width), 0);
    for (int64_t col = 0; col < width; ++col) {
        const int64_t d = col % hd;
        if (d < rd) pair_of[static_cast<size_t>(col)] = p.layout == RopeLayout::neox ? d % half : d / 2;
    }
    auto pidx = torch::tensor(pair_of, torch::kInt64);
    const double mscale = rope_attention_factor(p, f64);
    auto r = (x.pow(2) + x.index_select(1, idx).pow(2)).sqrt() * mscale * rot_mask;  // the pair's norm, [T, width]
    auto theta = rope_angles(positions, p, f64).abs().index_select(1, pidx);       // |θ_i| per element
    b.round = r * theta * torch::tensor(rho_r, opts).index_select(0, pidx).reshape({1, width});
    b.freq = r * (f * torch::tensor(rho_f, opts).reshape({1, half})).index_select(1, pidx);
    b.positions = positions;
    return b;
}

// For every head h, row t and column j: moved = Σ_s w_hts |a_sj − b_htj| and
// spread = max(0, max over visible s of |a_sj − b_htj|), a being head h's
// a[h / rep]. a [A, S, n], b [H, T, n], w [H, T, S] (0 where s is not
// visible), vis [T, S] bool; all float64, contiguous. What the softmax's
// part of attention needs, per key. As torch ops it is [T, S, n] temporaries
// made and walked several times over per head (and, on the small tensors of
// most cases, threads started per op): the a-priori bound then cost five
// times the reference it bounds. One pass over (h, t, s, j), rows split
// across threads, each row summed by one thread in key order.
void weighted_deviation(const Tensor& a, int64_t rep, const Tensor& b, const Tensor& w, const Tensor& vis,
                        Tensor& moved, Tensor& spread) {
    const int64_t H = b.size(0), T = b.size(1), S = a.size(1), n = a.size(2);
    const double* A = a.data_ptr<double>();
    const double* B = b.data_ptr<double>();
    const double* W = w.data_ptr<double>();
    const bool* V = vis.data_ptr<bool>();
    double* M = moved.data_ptr<double>();
    double* X = spread.data_ptr<double>();
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, S * n));
    at::parallel_for(0, H * T, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t h = r / T, t = r % T;
            const double* ah = A + (h / rep) * S * n;
            const double* bt = B + r * n;
            const double* wt = W + r * S;
            const bool* vt = V + t * S;
            double* mt = M + r * n;
            double* xt = X + r * n;
            std::fill(mt, mt + n, 0.0);
            std::fill(xt, xt + n, 0.0);
            for (int64_t s = 0; s < S; ++s) {
                if (!vt[s]) continue;
                const double ws = wt[s];
                const double* as = ah + s * n;
                for (int64_t j = 0; j < n; ++j) {
                    const double d = std::abs(as[j] - bt[j]);
                    mt[j] += ws * d;
                    xt[j] = std::max(xt[j], d);
                }
            }
        }
    });
}

// Attention per element. A score moves by δs (q's and k's bounds, exactly to
// second order, plus its own dot product's noise and, below float32, its
// storage); the output o = Σ p v moves at first order by Σ_s p_s δs_s (v_s - o)
// (softmax is shift-invariant), at most e^{2 max δs} times that when δs is not
// small, and never by more than the spread of the visible v; plus p-weighted v
// bounds, and its own sum of S terms.
// Returns what moves a head's dims together (the softmax's part), the rest,
// and what a projection of the output needs to carry the first part exactly
// per key (attn_through_wo).
// rq / rk, when given: RoPE's angle errors of q and k (rope_bound), carried
// into the scores in quadrature — the roundings per element, and the
// frequencies' error through the relative position |p_t − p_s|.
struct AttnBound {
    Tensor together, apart;  // [T, H·hd]
    Tensor weight;           // [H, T, S]: p_s · δs_s · growth, 0 where s is not visible (with_weight only)
    Tensor visible;          // [T, S] bool
    Tensor vg, o;            // [KV, S, hd], [H, T, hd]: v per kv head, the output
    int64_t rep = 1;         // query heads per kv head: head h reads vg[h / rep]
    bool sunk = false;       // a sink in every row: the output may move toward its value, 0
};
// Heads are taken in kv groups throughout: [T, n·hd] as [KV, rep·T, hd]
// (query head h = g·rep + r at rows r·T..) against [KV, S, hd], so a GEMM's
// [KV, rep·T, S] is [H, T, S] and no kv head is copied rep times. The
// element-wise work on [H, T, S] — the score's move δs, the softmax, its
// growth factor, p·δs — is one loop per row; as torch ops it was some thirty
// passes over [H, T, S] (each starting threads) and most of the bound's time.
AttnBound attention_bound(const Tensor& q, const Tensor& eq, const Tensor& k, const Tensor& ek, const Tensor& v,
                          const Tensor& ev, const Tensor& q_pos, const Tensor& k_pos, const AttentionParams& ap,
                          const Tensor& sinks, const Units& u, const RopeBound* rq = nullptr,
                          const RopeBound* rk = nullptr, bool with_weight = false, const Variant* keys = nullptr) {
    const int64_t H = ap.n_heads, KV = ap.n_kv_heads, hd = ap.head_dim, window = ap.sliding_window;
    const int64_t T = q.size(0), S = k.size(0), rep = H / KV;
    auto qg = [&](const Tensor& t) {  // [T, H·hd] -> [KV, rep·T, hd]
        return t.reshape({T, H, hd}).transpose(0, 1).reshape({KV, rep * T, hd}).contiguous();
    };
    auto kg = [&](const Tensor& t) { return t.reshape({S, KV, hd}).transpose(0, 1).contiguous(); };  // [KV, S, hd]
    auto kt = [](const Tensor& t) { return t.transpose(1, 2); };
    auto as_heads = [&](const Tensor& t) { return t.reshape({H, T, -1}); };  // [KV, rep·T, n] -> [H, T, n]
    const auto qh = qg(q), kh = kg(k), vg = kg(v);
    const auto qa = qh.abs(), ka = kh.abs();
    const double scale = ap.score_scale();  // config.attn_scale, or 1 / sqrt(hd)
    const double c_abs = (std::sqrt(static_cast<double>(hd)) + 2.0) * u.a * scale;
    // The GEMMs, each [H, T, S]. What the pass below sums is summed inside
    // one GEMM, its factors side by side along the reduced dim: q's and k's
    // bounds through the dot product and the product's own noise,
    //   scale·(e_q·|k| + |q|·e_k + e_q·e_k) + (sqrt(hd) + 2)·u·scale·|q|·|k|,
    // and RoPE's angle errors of both sides (in quadrature). A bound that is
    // absent (the attention op's inputs carry none) is not computed.
    const Tensor s0 = as_heads(torch::matmul(qh, kt(kh)));  // q·k
    const Tensor eqs = eq.defined() ? scale * qg(eq) : Tensor(), ekg = ek.defined() ? kg(ek) : Tensor();
    std::vector<Tensor> lq{c_abs * qa}, rk_{ka};
    if (eq.defined()) lq.push_back(eqs), rk_.push_back(ka);
    if (ek.defined()) lq.push_back(scale * qa), rk_.push_back(ekg);
    if (eq.defined() && ek.defined()) lq.push_back(eqs), rk_.push_back(ekg);
    // (One factor alone is not copied: |k| of 8k keys is 67 MB a sequence.)
    auto side = [](const std::vector<Tensor>& f) { return f.size() == 1 ? f[0] : torch::cat(f, -1); };
    const Tensor moves = as_heads(torch::matmul(side(lq), kt(side(rk_))));
    Tensor r_round, r_freq;
    if (rq && rk) {
        const auto k2 = kh.pow(2), q2 = qh.pow(2);
        r_round = as_heads(torch::matmul(torch::cat({qg(rq->round).pow(2), q2}, -1),
                                         kt(torch::cat({k2, kg(rk->round).pow(2)}, -1))));
        r_freq = as_heads(torch::matmul(torch::cat({qg(rq->freq).pow(2), q2}, -1),
                                        kt(torch::cat({k2, kg(rk->freq).pow(2)}, -1))));
    }
    Tensor vis = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1);  // [T, S]
    // The window the computation bounded applies: the config's, or a window
    // hypothesis's (the keys it sums are the ones its errors come from).
    if (window > 0) vis = vis.logical_and(k_pos.unsqueeze(0) > window_edge(q_pos, window, keys ? *keys : Variant{}));
    if (ap.chunk > 0) vis = vis.logical_and(k_pos.div(ap.chunk, "floor").unsqueeze(0) == q_pos.div(ap.chunk, "floor").unsqueeze(1));
    vis = vis.contiguous();
    auto p = torch::empty({H, T, S}, q.options()), pds = torch::empty({H, T, S}, q.options());
    auto growth = torch::empty({H, T, 1}, q.options());
    // With sinks, per row: the relative move of the whole row a kernel makes
    // that applies the sink after its softmax, through the lse (below).
    Tensor sink_move = sinks.defined() ? torch::zeros({H, T, 1}, q.options()) : Tensor();
    Tensor weight = with_weight ? torch::empty({H, T, S}, q.options()) : Tensor();
    const std::vector<int64_t> qp(q_pos.data_ptr<int64_t>(), q_pos.data_ptr<int64_t>() + T),
        kp(k_pos.data_ptr<int64_t>(), k_pos.data_ptr<int64_t>() + S);
    // Per row (h, t): over its keys s,
    //   δs = moves + store(s) + scale·sqrt(round) + scale·|p_t − p_s|·sqrt(freq),
    //        0 where s is not visible;
    //   p = softmax over the visible scores (all 0 for a row that sees none);
    //   growth = e^{2 max δs} (capped), what δs of O(1) can amplify the first order by.
    {
        const double c_store = u.d > u.a ? 2.0 * u.d : 0.0;
        // tanh's own error: 4 ulps of the arithmetic's type (Highway's Tanh;
        // glibc's and CUDA's tanhf are within 2, Sleef's (torch) 1), an ulp
        // being at most 2u of the value. (An approximate tanh such as PTX
        // tanh.approx.f32, ~2^-11 relative, is a precision below float32's.)
        const double c_tanh = 8.0, cap = ap.softcap;
        const double* S0 = s0.data_ptr<double>();
        const double* MV = moves.data_ptr<double>();
        const double* RR = r_round.defined() ? r_round.data_ptr<double>() : nullptr;
        const double* RF = r_freq.defined() ? r_freq.data_ptr<double>() : nullptr;
        const bool* V = vis.data_ptr<bool>();
        // Sinks (gpt-oss): one more logit per head in every row's denominator,
        // exact (an input) and with no value: it takes weight from the keys.
        const Tensor sk = sinks.defined() ? sinks.reshape({H}).to(torch::kFloat64).contiguous() : Tensor();
        const double* SK = sk.defined() ? sk.data_ptr<double>() : nullptr;
        double* P = p.data_ptr<double>();
        double* PD = pds.data_ptr<double>();
        double* G = growth.data_ptr<double>();
        double* SM = sink_move.defined() ? sink_move.data_ptr<double>() : nullptr;
        double* W = with_weight ? weight.data_ptr<double>() : nullptr;
        const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, S));
        at::parallel_for(0, H * T, grain, [&](int64_t r0, int64_t r1) {
            std::vector<double> ds(static_cast<size_t>(S));
            for (int64_t r = r0; r < r1; ++r) {
                const int64_t t = r % T, o = r * S;
                const bool* vt = V + t * S;
                double smax = -INFINITY, dmax = 0;
                for (int64_t j = 0; j < S; ++j) {
                    if (!vt[j]) {
                        ds[j] = 0;
                        continue;
                    }
                    double sc = S0[o + j] * scale;
                    double d = MV[o + j] + c_store * std::abs(sc);
                    if (RR) {
                        const double dp = static_cast<double>(std::abs(qp[t] - kp[j]));
                        d += scale * std::sqrt(RR[o + j]) + scale * dp * std::sqrt(RF[o + j]);
                    }
                    if (cap > 0) {
                        // cap·tanh(s/cap) moves by what s moves (d, and s/cap's own
                        // rounding: u·|s|, or the dtype's where a kernel stores it)
                        // times its slope somewhere between the exact and the
                        // computed score: sech²(ξ/cap) with |ξ| at least |s| − w,
                        // so at most sech² of that (1 where the interval holds 0).
                        // A saturated score's error shrinks through the cap. Then
                        // its own roundings: tanh (c_tanh), the product, and cap
                        // itself rounded to the arithmetic's type (∂/∂cap is
                        // tanh x − x·sech² x, within [0, tanh x]: ≤ u·|c|), and
                        // where a kernel stores tanh and the product in the dtype
                        // (eager bf16), two more roundings of |c| (c_store).
                        const double c = cap * std::tanh(sc / cap);
                        const double u_div = std::max(u.a, u.d);
                        const double w = d + u_div * (std::abs(sc) + d);
                        const double ch = std::cosh(std::max(0.0, std::abs(sc) - w) / cap);  // ch² inf past ~355: slope 0
                        d = w / (ch * ch) + (u.a * (c_tanh + 2.0) + c_store) * std::abs(c);
                        sc = c;
                    }
                    ds[j] = d;
                    P[o + j] = sc;
                    smax = std::max(smax, sc);
                    dmax = std::max(dmax, d);
                }
                double sum = 0, keys = 0;
                if (SK) {
                    smax = std::max(smax, SK[r / T]);
                    sum = std::exp(SK[r / T] - smax);
                }
                for (int64_t j = 0; j < S; ++j) {
                    const double e = vt[j] ? std::exp(P[o + j] - smax) : 0.0;
                    P[o + j] = e;
                    sum += e;
                    keys += e;
                }
                // A sink applied after the softmax, o·exp(lse − logaddexp(lse,
                // sink)) (a split-KV kernel after its merge, MagiAttention):
                // lse and L = logaddexp(lse, sink) are each rounded at their
                // magnitude, so their difference, and the whole row, moves by
                // up to u·(|lse| + |L|) each, plus exp's, log's and the
                // product's own roundings. The sink itself is an exact input.
                if (SM && keys > 0) {
                    const double lse = smax + std::log(keys), L = smax + std::log(sum);
                    SM[r] = u.a * (2.0 * (std::abs(lse) + std::abs(L)) + 4.0);
                }
                const double g = std::exp(std::min(2.0 * dmax, 50.0));
                G[r] = g;
                for (int64_t j = 0; j < S; ++j) {
                    const double pj = sum > 0 ? P[o + j] / sum : 0.0;
                    P[o + j] = pj;
                    PD[o + j] = pj * ds[j];
                    if (W) W[o + j] = pj * ds[j] * g;
                }
            }
        });
    }
    const auto pg = p.reshape({KV, rep * T, S});
    const Tensor o = as_heads(torch::matmul(pg, vg)).contiguous();  // [H, T, hd]
    // Σ_s p δs |v_sd - o_td| and the spread max_s |v_sd - o_td|.
    auto moved = torch::empty_like(o), spread = torch::empty_like(o);
    weighted_deviation(vg, rep, o, pds, vis, moved, spread);
    // With a sink the output is a weighting of the visible v and of the sink's 0.
    if (sinks.defined()) spread = torch::maximum(spread, o.abs());
    const Tensor together = torch::minimum(moved * growth, spread);
    const Tensor pv_abs = as_heads(torch::matmul(pg, vg.abs()));
    Tensor apart = std::sqrt(static_cast<double>(S)) * u.a * pv_abs;
    if (ev.defined()) apart = carried(pg, kg(ev)).reshape({H, T, hd}) + apart;  // v's bounds, p-weighted
    apart = apart + u.store(pv_abs) + u.store(o);
    if (sink_move.defined()) apart = apart + sink_move * o.abs();
    auto any = vis.any(-1, true).unsqueeze(0);  // [1, T, 1]
    auto back = [&](const Tensor& e) {
        return torch::where(any, e, torch::zeros_like(e)).transpose(0, 1).reshape({T, H * hd});
    };
    return {back(together), back(apart), weight, vis, vg, o, rep, sinks.defined()};
}

// The softmax's part of attn carried through wo into h = x + attn @ wo. To
// first order one row's output moves by Σ_s p_s δs_s (v_s − o), so its
// projection moves by Σ_s p_s δs_s (v_s − o) @ wo_h: each key's deviation is
// projected before its magnitude is taken, which keeps the cancellation
// inside (v_s − o) @ wo_h that |v_s − o| @ |wo_h| throws away (a factor up to
// sqrt(hd)). The projection of a softmax average also stays inside the
// projections of the visible values (and of a sink's 0): |δo @ wo_h| ≤
// max_s |(v_s − o) @ wo_h|.
// Both are bounds, as is the old |together| @ |wo_h|: the least is kept, per
// head, and heads are summed in quadrature as before.
Tensor attn_through_wo(const AttnBound& a, const Tensor& wo, int64_t hd, const Tensor& rest) {
    const int64_t H = a.o.size(0), T = a.o.size(1), D = wo.size(1);
    auto wo_h = wo.reshape({H, hd, D});
    auto t_h = heads(a.together, hd).transpose(0, 1);  // [H, T, hd]
    std::vector<Tensor> linear;                         // [T, D] per head
    auto sum_sq = torch::zeros({T, D}, wo.options());
    for (int64_t h = 0; h < H; ++h) {
        linear.push_back(torch::matmul(t_h[h], wo_h[h].abs()));
        sum_sq.add_(linear.back().pow(2));
    }
    // The per-key sum costs T·S·D per head: only rows where the old carry is
    // more than a tenth of h's other terms somewhere take it (elsewhere it
    // could not move the bound by more than 10%).
    auto rows = (sum_sq.sqrt() > 0.1 * rest).any(1).nonzero().reshape({-1});
    const int64_t R = rows.numel();
    if (R == 0) return sum_sq.sqrt();
    auto vis_r = a.visible.index_select(0, rows).contiguous();  // [R, S]
    // Every head at once: v and o projected through the head's rows of wo.
    auto heads_of = torch::arange(H, torch::kInt64).div(a.rep, "floor");
    auto vw = torch::matmul(a.vg.index_select(0, heads_of), wo_h).contiguous();      // [H, S, D]
    auto ow = torch::matmul(a.o.index_select(1, rows), wo_h).contiguous();           // [H, R, D]
    auto w_r = a.weight.index_select(1, rows).contiguous();                          // [H, R, S]
    auto lin = torch::stack(linear).index_select(1, rows);                           // [H, R, D]
    auto moved = torch::empty({H, R, D}, wo.options()), spread = torch::empty({H, R, D}, wo.options());
    weighted_deviation(vw, 1, ow, w_r, vis_r, moved, spread);
    // With a sink the output is a weighting of the visible v and of the
    // sink's 0 (as attention_bound's spread): a row that moves weight onto
    // the sink moves toward 0, by up to |o @ wo_h|.
    if (a.sunk) spread = torch::maximum(spread, ow.abs());
    auto best = torch::minimum(torch::minimum(moved, spread), lin);
    auto sel_sq = (best.pow(2) - lin.pow(2)).sum(0);  // [R, D]
    sum_sq.index_add_(0, rows, sel_sq);
    return sum_sq.clamp_min(0.0).sqrt();
}

// silu(gate) * up, or gpt-oss's clamped g·σ(1.702 g)·(u + 1) with g =
// min(gate, L), u = clamp(up, -L, L) (limit L > 0), and its bound from the
// gate's and up's. silu is 1.1-Lipschitz with |silu''| <= 0.5; the clamped
// gate's f(g) = g·σ(1.702 g) is silu(1.702 g) / 1.702: the same 1.1, and
// |f''| <= 0.5·1.702; a clamp is 1-Lipschitz. Own roundings: the
// products (2u), and for the clamped form the +1 and the scaled sigmoid (u more).
struct Gated {
    Tensor g, e;
};
Gated gated_bound(const Tensor& gate, const Tensor& e_gate, const Tensor& up, const Tensor& e_up, double limit,
                  const Units& u) {
    const bool clamped = limit > 0;
    const double alpha = clamped ? 1.702 : 1.0;
    auto gc = clamped ? gate.clamp_max(limit) : gate;
    auto uc = clamped ? up.clamp(-limit, limit) + 1.0 : up;
    auto sig = torch::sigmoid(alpha * gc);
    auto a = gc * sig;
    auto da = (sig * (1.0 + alpha * gc * (1.0 - sig))).abs();
    auto e_a = torch::minimum(da + 0.25 * alpha * e_gate, torch::full_like(da, 1.1)) * e_gate;
    Gated out;
    out.g = a * uc;
    out.e = e_a * (uc.abs() + e_up) + a.abs() * e_up + (clamped ? 3.0 : 2.0) * u.a * out.g.abs() + u.store(out.g, 2.0);
    return out;
}

// SwiGLU (silu(x@w1) * (x@w3)) @ w2 with x's bound carried. silu is
// 1.1-Lipschitz with |silu''| ≤ 0.5, so |Δsilu| ≤ min(1.1, |silu'(g)| + e/4)·e.
// GeGLU's gelu_tanh is 1.13-Lipschitz with |gelu''| ≤ 0.80 (at 0), so
// |Δgelu| ≤ min(1.13, |gelu'(g)| + 0.4 e)·e; and its float32 evaluation is
// not relative to its value: 0.5 a (1 + tanh(z)) loses 1 + tanh to
// cancellation for negative a, where gelu is tiny. Measured on 2,000,001
// points of [-12, 12] against float64: torch's float32 kernel lands within
// 2.64 u·|a|, the sigmoid form a / (1 + exp(-2z)) within 2.87 u·|a| — hence
// 3 u·|a|·|up| beside the product's own rounding.
Tensor swiglu_bound(const Tensor& x, const Bound& ex, const Tensor& w1, const Tensor& w3, const Tensor& w2, HiddenAct act,
                    const Units& u, ActQuant q) {
    auto gate = torch::matmul(x, w1), up = torch::matmul(x, w3);
    auto e_gate = matmul_bound(x, ex, w1, gate, u), e_up = matmul_bound(x, ex, w3, up, u);
    add_flip_bound(e_gate, x, w1, q);
    add_flip_bound(e_up, x, w3, q);
    Bound eg;
    Tensor g;
    if (act == HiddenAct::gelu_tanh) {
        // gelu'(a) = (1 + tanh z) / 2 + a (1 - tanh^2 z) c (1 + 3·0.044715 a^2) / 2,  z = c (a + 0.044715 a^3)
        const double c = std::sqrt(2.0 / M_PI);
        auto th = torch::tanh(c * (gate + 0.044715 * gate.pow(3)));
        auto dgelu = (0.5 * (1.0 + th) + 0.5 * gate * (1.0 - th * th) * c * (1.0 + 3.0 * 0.044715 * gate * gate)).abs();
        auto a = gelu_tanh(gate);
        auto e_a = torch::minimum(dgelu + 0.4 * e_gate, torch::full_like(dgelu, 1.13)) * e_gate;
        g = a * up;
        // the product's roundings, and gelu_tanh's own evaluation (silu's is in gated_bound's 2u·|g|)
        eg.abs = e_a * (up.abs() + e_up) + a.abs() * e_up + 2.0 * u.a * g.abs() + u.store(g, 2.0) +
                 3.0 * u.a * gate.abs() * up.abs();
    } else {
        Gated s = gated_bound(gate, e_gate, up, e_up, 0.0, u);
        g = s.g;
        eg.abs = s.e;
    }
    Tensor e = matmul_bound(g, eg, w2, torch::matmul(g, w2), u);
    add_flip_bound(e, g, w2, q);
    return e;
}

// A mixture of experts (reference/moe.cpp), element by element.
// The router: logits l (a product), scores p = softmax(l) (each p_i moves by
// p_i (|Δl_i| + Σ_j p_j |Δl_j|), and its own exp, E-term sum and division:
// (sqrt(E) + 3)·u relative) or σ(l) (σ(1 - σ)|Δl|, and 2u). The chosen
// weights w: renormalised, w_i / S moves by (Δw_i + (w_i / S) Σ_j Δw_j) / S,
// and the sum's and division's K·u relative; times the scaling factor, u.
// An expert not chosen has weight exactly 0 (the choice itself is not
// noise: the generator draws no token whose k-th and (k + 1)-th choice
// scores lie within their bounds, docs/moe.md).
// The experts: each chosen one's SwiGLU as swiglu's bound (gated_bound), its
// input weighted first where the weight is on the input; then the weighted
// sum over the K chosen and the shared expert, whose bounds are added
// linearly (one token's weights share one softmax's error: not independent),
// and its own K + 1 additions.
Tensor route_bound(const Tensor& x, const Tensor& w_router, const Tensor& router_bias, const Tensor& route,
                   const BlockConfig& cfg, const Units& u) {
    auto l = torch::matmul(x, w_router);
    auto e_l = matmul_bound(x, Bound{}, w_router, l, u);
    if (cfg.moe_router_bias) {
        l = l + router_bias.reshape({1, -1});
        e_l = e_l + u.a * l.abs() + u.store(l);
    }
    Tensor p, e_p;
    if (cfg.moe_scoring == MoeScoring::softmax) {
        p = torch::softmax(l, -1);
        const double E = static_cast<double>(l.size(1));
        e_p = p * (e_l + (p * e_l).sum(-1, true)) + (std::sqrt(E) + 3.0) * u.a * p + u.store(p);
    } else {
        p = torch::sigmoid(l);
        e_p = p * (1.0 - p) * e_l + 2.0 * u.a * p + u.store(p);
    }
    const auto chosen = route != 0;
    auto w = torch::where(chosen, p, torch::zeros_like(p));
    auto e_w = torch::where(chosen, e_p, torch::zeros_like(p));
    if (cfg.moe_norm_topk_prob) {
        const double K = static_cast<double>(cfg.n_experts_per_tok);
        auto S = w.sum(-1, true) + 1e-20;
        auto wn = w / S;
        e_w = (e_w + wn * e_w.sum(-1, true)) / S + (K + 1.0) * u.a * wn + u.store(wn);
        w = wn;
    }
    if (cfg.moe_routed_scaling_factor > 0) {
        w = w * cfg.moe_routed_scaling_factor;
        e_w = e_w * cfg.moe_routed_scaling_factor + u.a * w.abs() + u.store(w);
    }
    return e_w;
}

// out's bound, from the route and its bound.
Tensor experts_bound(const Tensor& x, const Tensor& route, const Tensor& e_route, const std::map<std::string, Tensor>& w,
                     const BlockConfig& cfg, const Units& u) {
    const int64_t E = cfg.n_experts, D = x.size(1), F = cfg.moe_ffn_dim;
    auto e_out = torch::zeros_like(x), magnitude = torch::zeros_like(x);  // Σ bounds, Σ |terms|
    auto swiglu = [&](const Tensor& xin, const Tensor& e_xin, const Tensor& w13, const Tensor& b13, const Tensor& w2,
                      const Tensor& b2, bool interleaved, double limit) {
        Bound ex;
        ex.abs = e_xin;
        auto h = torch::matmul(xin, w13);
        auto e_h = matmul_bound(xin, ex, w13, h, u);
        if (b13.defined()) {
            h = h + b13;
            e_h = e_h + u.a * h.abs() + u.store(h);
        }
        const int64_t Fh = h.size(1) / 2;
        auto half = [&](const Tensor& t, int i) {
            return interleaved ? t.slice(1, i, 2 * Fh, 2) : t.narrow(1, i * Fh, Fh);
        };
        const Gated a = gated_bound(half(h, 0), half(e_h, 0), half(h, 1), half(e_h, 1), limit, u);
        Bound ea;
        ea.abs = a.e;
        auto y = torch::matmul(a.g, w2);
        auto e_y = matmul_bound(a.g, ea, w2, y, u);
        if (b2.defined()) {
            y = y + b2;
            e_y = e_y + u.a * y.abs() + u.store(y);
        }
        return std::pair<Tensor, Tensor>{y, e_y};
    };
    const Tensor none;
    for (int64_t e = 0; e < E; ++e) {
        const auto tokens = route.select(1, e).nonzero().reshape({-1});
        if (tokens.numel() == 0) continue;
        auto r = route.select(1, e).index_select(0, tokens).unsqueeze(1);
        auto er = e_route.select(1, e).index_select(0, tokens).unsqueeze(1);
        auto xe = x.index_select(0, tokens);
        Tensor e_xin = torch::zeros_like(xe);
        if (cfg.moe_weight_on_input) {
            e_xin = er * xe.abs() + u.a * (r * xe).abs() + u.store(r * xe);
            xe = r * xe;
        }
        const bool bias = cfg.moe_expert_bias;
        auto [y, e_y] = swiglu(xe, e_xin, w.at("w13").narrow(0, e * D, D).to(torch::kFloat64),
                               bias ? w.at("b13").select(0, e).unsqueeze(0) : none,
                               w.at("w2").narrow(0, e * F, F).to(torch::kFloat64),
                               bias ? w.at("b2").select(0, e).unsqueeze(0) : none, cfg.moe_gate_up_interleaved,
                               cfg.moe_swiglu_limit);
        auto term = cfg.moe_weight_on_input ? y : r * y;
        auto e_term = cfg.moe_weight_on_input ? e_y : r.abs() * e_y + er * y.abs() + u.a * term.abs() + u.store(term);
        e_out.index_add_(0, tokens, e_term);
        magnitude.index_add_(0, tokens, term.abs());
    }
    if (cfg.moe_shared_ffn_dim > 0) {
        auto [y, e_y] = swiglu(x, torch::zeros_like(x), w.at("ws13"), none, w.at("ws2"), none, false, 0.0);
        if (cfg.moe_shared_gate) {
            auto z = torch::matmul(x, w.at("ws_gate"));
            auto s = torch::sigmoid(z);
            auto e_s = s * (1.0 - s) * matmul_bound(x, Bound{}, w.at("ws_gate"), z, u) + 2.0 * u.a * s + u.store(s);
            auto gated = y * s;
            e_y = e_y * s + y.abs() * e_s + u.a * gated.abs() + u.store(gated);
            y = gated;
        }
        e_out = e_out + e_y;
        magnitude = magnitude + y.abs();
    }
    // the K (+ 1) additions, in any order, and out's store
    const double K = static_cast<double>(cfg.n_experts_per_tok + (cfg.moe_shared_ffn_dim > 0 ? 1 : 0));
    return e_out + K * u.a * magnitude + u.store(magnitude);
}

// An FP8 cache's values (torch_ops.h CacheRead, as written) of x [n, W], and
// what a kernel's may differ from them by when its x is within e of the
// truth's: code(x ± e) are the extremes (the cache write is monotone), so
// the bound is the larger step to either, plus the dequantisation's own
// rounding (u·|value|) and its store where the kernel keeps the cache's
// values in a dtype below float32.
struct Spread {
    Tensor value, bound;
};
Spread fp8_spread(const Tensor& x, const Tensor& e, const std::vector<float>& scale, const BlockConfig& cfg, const Units& u) {
    const CacheRead faithful(cfg.kv_cache_dtype, scale, cfg.head_dim, x.size(1), Variant{});
    const auto xc = x.contiguous(), ec = e.contiguous();
    auto value = torch::empty_like(xc), step = torch::empty_like(xc);
    const double *X = xc.data_ptr<double>(), *E = ec.data_ptr<double>();
    double *V = value.data_ptr<double>(), *St = step.data_ptr<double>();
    const int64_t n = xc.size(0), W = xc.size(1);
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < W; ++j) {
            const int64_t i = r * W + j;
            const double c = faithful.value(static_cast<float>(X[i]), j);
            const double lo = faithful.value(static_cast<float>(X[i] - E[i]), j);
            const double hi = faithful.value(static_cast<float>(X[i] + E[i]), j);
            V[i] = c;
            St[i] = std::max(hi - c, c - lo);
        }
    return {value, step + u.a * value.abs() + u.store(value)};
}

DTensor to_d(const Tensor& t) {
    auto c = t.to(torch::kFloat64).contiguous();
    DTensor d;
    d.shape = {c.size(0), c.size(1)};
    d.data.assign(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    return d;
}

// One sequence's lse bound (paged_attention's, whose comment in
// reduction_noise says why; mla_attention's alike): l its reference lse
// [q_len, H], S the terms a row sums; 0 where l is -inf.
Tensor sequence_lse_bound(const AttnBound& a, const Tensor& l, double S, const Units& u) {
    auto finite = torch::isfinite(l);
    auto la = torch::where(finite, l.abs(), torch::zeros_like(l));
    auto moved = a.weight.sum(-1).transpose(0, 1);  // [q_len, H]
    auto own = (S + std::log(S)) * u.a + 2.0 * u.a * la + u.store(la);
    return torch::where(finite, moved + own, torch::zeros_like(l));
}

}  // namespace

std::map<std::string, DTensor> reduction_noise(const Case& c, DType dtype, const NamedD* truth, const Variant* variant) {
    torch::NoGradGuard no_grad;
    const Units u{std::ldexp(1.0, -24), unit_roundoff(dtype)};
    auto T = [](const DTensor& d) {
        return torch::from_blob(const_cast<double*>(d.data.data()), {d.rows(), d.cols()}, torch::kFloat64).clone();
    };
    auto in = [&](const char* n) {
        const conform::Tensor& t = c.in(n);
        return torch::from_blob(const_cast<float*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat32).to(torch::kFloat64);
    };
    auto pos = [&](const char* n) {
        const auto& p = c.pos(n);
        return torch::tensor(std::vector<int64_t>(p.begin(), p.end()), torch::kInt64);
    };
    const Tensor sinks = c.config.attn_sinks ? in("sinks") : Tensor();  // [1, H], or none
    // The float64 reference of this case: the caller's, or computed here. A
    // block's taps serve a decode case too (decode is the block over the
    // same tokens), when the caller has them (Options::decode_taps).
    auto reference = [&](const Case& k) {
        const bool have = truth && truth->count("out") && (k.op == c.op || truth->count("attn_in"));
        return have ? *truth : run(k);
    };
    const BlockConfig& cfg = c.config;
    const int64_t hd = cfg.head_dim;
    const Tensor none;
    std::map<std::string, Tensor> e;
    switch (c.op) {
        case Op::rmsnorm: {
            auto x = in("x"), w = in("weight").reshape({-1});
            auto y = T(reference(c).at("out"));
            e["out"] = norm_bound(x, none, w, cfg.norm_plus_one, cfg.norm_eps, y, u).total(y);
            break;
        }
        case Op::qk_norm: {
            auto x = heads(in("x"), hd), w = in("weight").reshape({-1});
            auto y = heads(T(reference(c).at("out")), hd);
            e["out"] = flat(norm_bound(x, none, w, cfg.norm_plus_one, cfg.norm_eps, y, u).total(y));
            break;
        }
        case Op::rope: e["out"] = rope_bound(in("x"), none, pos("positions"), rope_params(cfg), u).total(); break;
        case Op::attention:
        {
            Variant keys;
            if (variant) keys.window = variant->window, keys.window_page = variant->window_page;
            const AttnBound a = attention_bound(in("q"), none, in("k"), none, in("v"), none, pos("q_positions"),
                                                pos("k_positions"), attention_params(cfg), sinks, u, nullptr, nullptr,
                                                false, &keys);
            e["out"] = a.together + a.apart;
        }
            break;
        case Op::swiglu:
            e["out"] = swiglu_bound(in("x"), Bound{}, in("w1"), in("w3"), in("w2"), cfg.hidden_act, u, c.act_quant);
            break;
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts: {
            auto x = in("x");
            std::map<std::string, Tensor> w;
            // The experts as stored (float32, not copied): each chosen one is
            // converted when its bound is taken, so a full-size layer's
            // experts (gpt-oss-20b: 3.2 GB in float32) are never all in float64.
            for (const TensorSpec& t : op_info(c.op).inputs)
                if (t.present(cfg) && c.inputs.count(t.name))
                    w[t.name] = std::string_view(t.name) == "w13" || std::string_view(t.name) == "w2"
                                    ? float_view(c.in(t.name))
                                    : in(t.name);
            Tensor route, e_route;
            if (c.op == Op::moe_experts) {
                route = w.at("route");
                e_route = torch::zeros_like(route);
            } else {
                const NamedD truth_here = reference(c);
                route = T(truth_here.at(c.op == Op::moe ? "route" : "out"));
                e_route = route_bound(x, w.at("w_router"), cfg.moe_router_bias ? w.at("router_bias") : none, route,
                                      cfg, u);
            }
            if (c.op == Op::moe_route) {
                e["out"] = e_route;
                break;
            }
            if (c.op == Op::moe) e["route"] = e_route;
            e["out"] = experts_bound(x, route, e_route, w, cfg, u);
            break;
        }
        case Op::paged_attention: {
            // Each sequence's attention bound, over its own keys (the
            // reference's gather: the bound never sees a page either). lse
            // = m + log Σ exp(s − m) moves with its scores by Σ p δs (the
            // weight attention_bound returns, growth included), and by its
            // own roundings: the S exps, u each, and their sum, which the log
            // makes absolute; the log's and the add's, u·(log S + |lse|); a
            // base-2 kernel's conversion, u·|lse|.
            // The sum is of S positive terms, and here Higham's typical
            // sqrt(S)·u does not hold: with near-uniform attention every exp
            // is just under 1, and a sequential float32 sum past 256 rounds
            // each one up to 1 (its partial sum's half ulp is larger than
            // 1 − p): the errors all have one sign. Measured: the scalar
            // kernel's lse over 384 keys at magnitude 1e-3 was 2.98e-6 off,
            // 50u relative, against 2.29e-6 allowed with sqrt(S). The bound
            // taken is the worst case of any order, (S − 1)·u relative; the
            // same relative error of the denominator moves out by (S − 1)·u·|o|.
            const auto seqs = paged_seqs(c, c.config);
            auto q = in("q"), kc = float_view(c.in("k_cache")), vc = float_view(c.in("v_cache"));
            const int64_t Tq = q.size(0), H = cfg.n_heads;
            auto out = torch::zeros_like(q), lse = torch::zeros({Tq, H}, q.options());
            const NamedD truth_here = reference(c);
            const auto lse_ref = T(truth_here.at("lse")), out_ref = T(truth_here.at("out"));
            const Variant keys = paged_keys(variant);
            for (int64_t b = 0; b + 1 < static_cast<int64_t>(seqs.qo_indptr.size()); ++b) {
                const PagedSeq g = gather_sequence(q, kc, vc, Precision::f64, seqs, b, keys);
                if (g.q_len == 0 || g.kv_len == 0) continue;  // out exactly 0, lse exactly -inf
                // An FP8 cache: the codes are the contract's (the same in every
                // honest kernel), their dequantisation code * scale is one
                // rounding of the arithmetic, and one to the dtype where a
                // kernel stores it so.
                Tensor kb = none, vb = none;
                if (seqs.cache != KvCacheDtype::none) {
                    kb = u.a * g.k.abs() + u.store(g.k);
                    vb = u.a * g.v.abs() + u.store(g.v);
                }
                const AttnBound a = attention_bound(g.q, none, g.k, kb, g.v, vb, g.q_pos, g.k_pos,
                                                    attention_params(cfg), sinks, u, nullptr, nullptr, true, &keys);
                // Terms a row's softmax sums: its sequence's keys, or the window's, and a sink — or
                // as many as a window hypothesis lets a row see, where that is more.
                const int64_t seen = a.visible.sum(1).max().item<int64_t>();
                const double S = static_cast<double>(
                    std::max(cfg.sliding_window > 0 ? std::min(g.kv_len, cfg.sliding_window) : g.kv_len, seen) +
                    (cfg.attn_sinks ? 1 : 0));
                auto o_ref = out_ref.narrow(0, g.q_begin, g.q_len);
                out.narrow(0, g.q_begin, g.q_len).copy_(a.together + a.apart + (S - 1.0) * u.a * o_ref.abs());
                lse.narrow(0, g.q_begin, g.q_len).copy_(sequence_lse_bound(a, lse_ref.narrow(0, g.q_begin, g.q_len), S, u));
            }
            e["out"] = out;
            e["lse"] = lse;
            break;
        }
        case Op::mla_attention: {
            // Each sequence's attention bound over its own keys, as
            // paged_attention's, with the keys' and values' bounds those of
            // kv_b_proj. An honest kernel may take either form: the MHA
            // form's k_nope = c_kv @ w_uk sums dc products, the absorbed
            // form's q_lat = q_nope @ w_uk^T sums dn and its q_lat · c_kv dc
            // more, both of |q|·|w_uk|·|c_kv|'s size — so k_nope's (and v's)
            // bound is (sqrt(dc) + sqrt(max(dn, dv)))·u of |c_kv| @ |w_kv_b|, and one storage
            // rounding of it (q_lat or k_nope held in the dtype). The value
            // side likewise: the absorbed o_lat @ w_uv rounds what Σ p·v
            // carries. k_pe is an input: exact.
            const auto seqs = paged_seqs(c, cfg);
            auto q = in("q"), w = in("w_kv_b");
            auto ckv = float_view(c.in("ckv_cache")), kpe = float_view(c.in("kpe_cache"));
            const int64_t Tq = q.size(0), H = cfg.n_heads, dv = cfg.v_head_dim, hd = mla_head_dim(cfg);
            const double dc = static_cast<double>(cfg.kv_lora_rank);
            const double dmax = static_cast<double>(std::max(cfg.qk_nope_head_dim, cfg.v_head_dim));
            const double per = (std::sqrt(dc) + std::sqrt(dmax)) * u.a + (u.d > u.a ? u.d : 0.0);
            auto out = torch::zeros({Tq, H * dv}, q.options()), lse = torch::zeros({Tq, H}, q.options());
            const NamedD truth_here = reference(c);
            const auto lse_ref = T(truth_here.at("lse")), out_ref = T(truth_here.at("out"));
            const AttentionParams ap = mla_attention_params(cfg);
            const Variant keys = paged_keys(variant);
            for (int64_t b = 0; b + 1 < static_cast<int64_t>(seqs.qo_indptr.size()); ++b) {
                const PagedSeq g = gather_sequence(q, ckv, kpe, Precision::f64, seqs, b, keys);
                if (g.q_len == 0 || g.kv_len == 0) continue;  // out exactly 0, lse exactly -inf
                const MlaHeads m = mla_assemble(g.q, torch::matmul(g.k, w), g.v, cfg);
                const MlaHeads em = mla_assemble(torch::zeros_like(g.q), per * torch::matmul(g.k.abs(), w.abs()),
                                                 torch::zeros_like(g.v), cfg);
                const AttnBound a = attention_bound(m.q, none, m.k, em.k, m.v, em.v, g.q_pos, g.k_pos, ap, none, u,
                                                    nullptr, nullptr, true, &keys);
                // Terms a row's softmax sums: its keys, or as many as a hypothesis lets it see.
                const double S = static_cast<double>(std::max(g.kv_len, a.visible.sum(1).max().item<int64_t>()));
                auto o_ref = out_ref.narrow(0, g.q_begin, g.q_len);
                auto o_bound = (a.together + a.apart).reshape({g.q_len, H, hd}).narrow(2, 0, dv).reshape({g.q_len, H * dv});
                out.narrow(0, g.q_begin, g.q_len).copy_(o_bound + (S - 1.0) * u.a * o_ref.abs());
                lse.narrow(0, g.q_begin, g.q_len).copy_(sequence_lse_bound(a, lse_ref.narrow(0, g.q_begin, g.q_len), S, u));
            }
            e["out"] = out;
            e["lse"] = lse;
            break;
        }
        case Op::block:
        case Op::decode: {
            // decode's only output is the block's out; its taps come from the block.
            Case b = c;
            b.op = Op::block;
            const NamedD t = reference(b);
            auto tap = [&](const char* n) { return T(t.at(n)); };
            auto x = in("x");
            auto a = tap("attn_in");
            const Bound ea = norm_bound(x, none, in("attn_norm").reshape({-1}), cfg.norm_plus_one, cfg.norm_eps, a, u);
            e["attn_in"] = ea.total(a);
            auto q = tap("q"), k = tap("k"), v = tap("v");
            e["q"] = matmul_bound(a, ea, in("wq"), q, u);
            e["k"] = matmul_bound(a, ea, in("wk"), k, u);
            e["v"] = matmul_bound(a, ea, in("wv"), v, u);
            add_flip_bound(e["q"], a, in("wq"), c.act_quant);
            add_flip_bound(e["k"], a, in("wk"), c.act_quant);
            add_flip_bound(e["v"], a, in("wv"), c.act_quant);
            if (cfg.qkv_bias) {
                // q = a @ wq + bq: one more rounding (the add, u·|q|), and the
                // product's own store where a program keeps it in the dtype first.
                for (const auto& [tap_name, b] : {std::pair<const char*, const char*>{"q", "bq"}, {"k", "bk"}, {"v", "bv"}}) {
                    auto y = tap(tap_name);
                    e[tap_name] = e[tap_name] + u.a * y.abs() + u.store(y - in(b).reshape({1, -1}));
                }
            }
            const Variant faithful;
            const Ctx f64{torch::kFloat64, torch::kFloat64, Order::library, faithful};
            Tensor eq = e["q"], ek = e["k"], qn = q, kn = k;
            if (cfg.qk_norm) {
                // QK-norm per head, before RoPE: q's and k's bounds carried through 1/rms.
                auto wq = in("q_norm").reshape({-1}), wk = in("k_norm").reshape({-1});
                qn = qk_norm(q, wq, hd, cfg.norm_eps, cfg.norm_plus_one, f64);
                kn = qk_norm(k, wk, hd, cfg.norm_eps, cfg.norm_plus_one, f64);
                auto qnh = heads(qn, hd), knh = heads(kn, hd);
                eq = flat(norm_bound(heads(q, hd), heads(eq, hd), wq, cfg.norm_plus_one, cfg.norm_eps, qnh, u).total(qnh));
                ek = flat(norm_bound(heads(k, hd), heads(ek, hd), wk, cfg.norm_plus_one, cfg.norm_eps, knh, u).total(knh));
            }
            auto positions = pos("positions");
            // A NoPE layer: q_rot and k_rot are q and k (after any QK-norm), their bounds too.
            const bool nope = cfg.nope;
            RopeBound rq, rk;
            if (!nope) {
                rq = rope_bound(qn, eq, positions, rope_params(cfg), u);
                rk = rope_bound(kn, ek, positions, rope_params(cfg), u);
            }
            e["q_rot"] = nope ? eq : rq.total();
            e["k_rot"] = nope ? ek : rk.total();
            auto attn = tap("attn");
            // decode's FP8 cache: attention reads the cache's values, whose
            // codes an honest kernel decides from its own k_rot and v. A value
            // a bound away from the truth's may round to a neighbouring code,
            // so each element's bound is the cache's image of its interval
            // (fp8_spread); RoPE's angle errors then count linearly, not in
            // quadrature (the codes break the correlation that relies on).
            AttnBound ab;
            if (cfg.kv_cache_dtype == KvCacheDtype::none) {
                ab = attention_bound(tap("q_rot"), nope ? eq : rq.rest, tap("k_rot"), nope ? ek : rk.rest, v, e["v"],
                                     positions, positions, attention_params(cfg), sinks, u, nope ? nullptr : &rq,
                                     nope ? nullptr : &rk, true);
            } else {
                const Spread sk = fp8_spread(tap("k_rot"), e["k_rot"], c.in("k_scale").data, cfg, u);
                const Spread sv = fp8_spread(v, e["v"], c.in("v_scale").data, cfg, u);
                ab = attention_bound(tap("q_rot"), e["q_rot"], sk.value, sk.bound, sv.value, sv.bound, positions,
                                     positions, attention_params(cfg), sinks, u, nullptr, nullptr, true);
            }
            e["attn"] = ab.together + ab.apart;
            // h = x + attn @ wo: the projection (stored before the add below
            // float32), the add, and attn's bound through wo — what one softmax
            // row moves, per key through its head's wo, and in quadrature across heads.
            auto h = tap("h");
            auto wo = in("wo"), proj = torch::matmul(attn, wo);
            Bound eattn;
            eattn.abs = ab.apart;
            auto h_rest = matmul_bound(attn, eattn, wo, proj, u);
            add_flip_bound(h_rest, attn, wo, c.act_quant);
            // Sandwich norms (Gemma 2/3): each sublayer's output goes through
            // an RMSNorm before its add, which carries the output's bound as
            // any norm carries its input's (norm_bound: relative to the
            // branch's own rms, so a branch that nearly cancels is amplified).
            auto sandwich = [&](const Tensor& branch, const Tensor& e_branch, const char* w) {
                auto y = rmsnorm(branch, in(w).reshape({-1}), cfg.norm_eps, cfg.norm_plus_one, f64);
                return norm_bound(branch, e_branch, in(w).reshape({-1}), cfg.norm_plus_one, cfg.norm_eps, y, u).total(y);
            };
            if (cfg.sandwich_norm) {
                auto e_proj = h_rest + attn_through_wo(ab, wo, hd, h_rest);
                e["h"] = sandwich(proj, e_proj, "attn_post_norm") + u.a * h.abs() + u.store(h);
            } else {
                h_rest = h_rest + u.a * h.abs() + u.store(h);
                e["h"] = h_rest + attn_through_wo(ab, wo, hd, h_rest);
            }
            auto f = tap("ffn_in");
            const Bound ef = norm_bound(h, e["h"], in("ffn_norm").reshape({-1}), cfg.norm_plus_one, cfg.norm_eps, f, u);
            e["ffn_in"] = ef.total(f);
            e["ffn_out"] = swiglu_bound(f, ef, in("w1"), in("w3"), in("w2"), cfg.hidden_act, u, c.act_quant);
            auto o = tap("out");
            const Tensor e_ffn = cfg.sandwich_norm ? sandwich(tap("ffn_out"), e["ffn_out"], "ffn_post_norm") : e["ffn_out"];
            e["out"] = e["h"] + e_ffn + u.a * o.abs() + u.store(o);
            break;
        }
    }
    std::map<std::string, DTensor> out;
    for (const auto& [name, t] : e)
        if (c.op != Op::decode || name == "out") out[name] = to_d(t);
    return out;
}

}  // namespace conform::ref

// The ops as eager LibTorch float32 runs them, for `conform bench`.
#include "reference/bench_torch.h"

#include <dlfcn.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <limits>

#include "reference/torch_ops.h"  // moe_route, moe_experts: the mixture of experts' eager graph

namespace conform::ref {

namespace {

using torch::Tensor;

// Where the op being built lives: set by make_torch_bench_op for the length
// of the constructor, read by everything that makes a tensor (a thread-local
// rather than a parameter through every constructor and helper below).
thread_local TorchPlace g_place;

torch::Device device() { return g_place.cuda ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU); }
// The model's dtype: what weights, activations and caches are stored in.
torch::TensorOptions fopts() { return torch::TensorOptions().device(device()).dtype(g_place.bf16 ? torch::kBFloat16 : torch::kFloat32); }

Tensor to_torch(const conform::Tensor& t) {
    return torch::from_blob(const_cast<float*>(t.data.data()), {t.rows(), t.cols()}, torch::kFloat32).to(fopts(), false, true);
}
Tensor to_torch(const std::vector<int64_t>& p) {
    return torch::from_blob(const_cast<int64_t*>(p.data()), {static_cast<int64_t>(p.size())}, torch::kInt64)
        .to(device(), torch::kInt64, false, true);
}
std::vector<float> to_vector(const Tensor& t) {
    const Tensor c = t.to(torch::kCPU, torch::kFloat32).contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// HF LlamaRMSNorm: in float32, cast back, then the weight:
// weight * (x.float() * rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
Tensor rms(const Tensor& x, const Tensor& w, double eps) {
    const Tensor xf = x.to(torch::kFloat32);
    return w * (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
}

// cos/sin for a set of positions, built once (HF computes them once per
// forward and shares them across layers).
struct Rope {
    RopeLayout layout = RopeLayout::neox;
    int64_t hd = 0;
    Tensor cos, sin;  // neox [T, 1, hd]; interleaved freqs_cis [T, 1, hd/2] complex in `cos`

    Rope(const Tensor& pos, int64_t head_dim, double theta, RopeLayout l) : layout(l), hd(head_dim) {
        const auto f64 = pos.options().dtype(torch::kFloat64);
        auto exponent = torch::arange(0, hd, 2, f64) / static_cast<double>(hd);
        auto inv_freq = 1.0 / torch::pow(torch::scalar_tensor(theta, f64), exponent);
        auto freqs = torch::outer(pos.to(torch::kFloat64), inv_freq);  // [T, hd/2], angles in double
        if (layout == RopeLayout::neox) {
            auto emb = torch::cat({freqs, freqs}, -1);
            cos = emb.cos().to(fopts()).unsqueeze(1);  // HF: cos.to(x.dtype)
            sin = emb.sin().to(fopts()).unsqueeze(1);
        } else {
            auto f = freqs.to(torch::kFloat32);
            cos = torch::polar(torch::ones_like(f), f).unsqueeze(1);  // Meta's freqs_cis
        }
    }

    // x [T, n * hd]
    Tensor apply(const Tensor& x) const {
        const int64_t T = x.size(0), n = x.size(1) / hd;
        auto xh = x.view({T, n, hd});
        if (layout == RopeLayout::neox) {
            // q * cos + rotate_half(q) * sin
            auto x1 = xh.narrow(-1, 0, hd / 2), x2 = xh.narrow(-1, hd / 2, hd / 2);
            return (xh * cos + torch::cat({-x2, x1}, -1) * sin).view({T, n * hd});
        }
        // torch.view_as_real(view_as_complex(x.float().reshape(..., -1, 2)) * freqs_cis).flatten.type_as(x)
        auto xc = torch::view_as_complex(xh.to(torch::kFloat32).reshape({T, n, hd / 2, 2}));
        return torch::view_as_real(xc * cos).reshape({T, n * hd}).to(x.scalar_type());
    }
};

// Additive causal mask by position, [T, S]: 0 where visible, -inf elsewhere.
Tensor causal_mask(const Tensor& q_pos, const Tensor& k_pos, int64_t window = 0) {
    auto visible = k_pos.unsqueeze(0) <= q_pos.unsqueeze(1);
    if (window > 0) visible = visible.logical_and(k_pos.unsqueeze(0) > q_pos.unsqueeze(1) - window);  // sliding window
    return torch::zeros(visible.sizes(), fopts())
        .masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
}

// HF eager_attention_forward with repeat_kv; mask undefined: every key visible.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, int64_t H, int64_t KV,
                 int64_t hd, double softcap, double scale) {
    const int64_t T = q.size(0), S = k.size(0);
    auto qh = q.view({T, H, hd}).transpose(0, 1);                                 // [H, T, hd]
    auto kh = k.view({S, KV, hd}).transpose(0, 1).repeat_interleave(H / KV, 0);  // [H, S, hd]
    auto vh = v.view({S, KV, hd}).transpose(0, 1).repeat_interleave(H / KV, 0);
    auto scores = torch::matmul(qh, kh.transpose(1, 2)) * scale;  // config.attn_scale, or 1 / sqrt(hd)
    if (softcap > 0) scores = torch::tanh(scores / softcap) * softcap;  // Gemma 2, before the mask
    if (mask.defined()) scores = scores + mask;
    auto p = torch::softmax(scores, -1, torch::kFloat32).to(q.scalar_type());  // HF: in float32, cast back
    return torch::matmul(p, vh).transpose(0, 1).reshape({T, H * hd});
}

Tensor swiglu(const Tensor& x, const Tensor& w1, const Tensor& w3, const Tensor& w2, HiddenAct act) {
    auto gate = torch::matmul(x, w1);
    auto a = act == HiddenAct::gelu_tanh ? torch::gelu(gate, "tanh") : torch::silu(gate);
    return torch::matmul(a * torch::matmul(x, w3), w2);
}

// A norm's weight as a multiply: Gemma's 1 + w taken once, in float32.
Tensor norm_weight(const Case& c, const char* name) {
    auto w = to_torch(c.in(name)).view({-1});
    return c.config.norm_plus_one ? 1.0f + w : w;
}

struct Weights {
    Tensor attn_norm, wq, wk, wv, wo, ffn_norm, w1, w3, w2, q_norm, k_norm, bq, bk, bv;
    explicit Weights(const Case& c) {
        auto in = [&](const char* n) { return to_torch(c.in(n)); };
        attn_norm = norm_weight(c, "attn_norm");
        wq = in("wq");
        wk = in("wk");
        wv = in("wv");
        wo = in("wo");
        ffn_norm = norm_weight(c, "ffn_norm");
        w1 = in("w1");
        w3 = in("w3");
        w2 = in("w2");
        if (c.config.qk_norm) {
            q_norm = norm_weight(c, "q_norm");
            k_norm = norm_weight(c, "k_norm");
        }
        if (c.config.qkv_bias) {
            bq = in("bq").view({-1});
            bk = in("bk").view({-1});
            bv = in("bv").view({-1});
        }
    }
};

// The block up to attention's inputs: q and k rotated, v.
struct Qkv {
    Tensor q, k, v;
};
Qkv project(const Tensor& attn_in, const Weights& w, const BlockConfig& c, const Rope& rope) {
    const int64_t T = attn_in.size(0), hd = c.head_dim;
    // nn.Linear with a bias runs addmm.
    auto proj = [&](const Tensor& wt, const Tensor& b) {
        return c.qkv_bias ? torch::addmm(b, attn_in, wt) : torch::matmul(attn_in, wt);
    };
    auto q = proj(w.wq, w.bq);
    auto k = proj(w.wk, w.bk);
    auto v = proj(w.wv, w.bv);
    if (c.qk_norm) {
        q = rms(q.view({T, c.n_heads, hd}), w.q_norm, c.norm_eps).view({T, c.q_width()});
        k = rms(k.view({T, c.n_kv_heads, hd}), w.k_norm, c.norm_eps).view({T, c.kv_width()});
    }
    return {rope.apply(q), rope.apply(k), v};
}

Tensor finish(const Tensor& x, const Tensor& attn, const Weights& w, const BlockConfig& c) {
    auto h = x + torch::matmul(attn, w.wo);
    return h + swiglu(rms(h, w.ffn_norm, c.norm_eps), w.w1, w.w3, w.w2, c.hidden_act);
}

// run() is compute(), then, on the device, a wait for it: a run's time is
// the work's, not its launch's.
class Op1 : public TorchBenchOp {
   public:
    void run() final {
        compute();
        if (cuda_) torch::cuda::synchronize();
    }
    std::vector<float> output() const override { return to_vector(out_); }

   protected:
    virtual void compute() = 0;
    Tensor out_;

   private:
    bool cuda_ = g_place.cuda;  // constructed inside make_torch_bench_op, like every tensor here
};

class RmsNormOp : public Op1 {
   public:
    RmsNormOp(const Case& c, bool per_head)
        : x_(to_torch(c.in("x"))), w_(norm_weight(c, "weight")), eps_(c.config.norm_eps) {
        if (per_head) x_ = x_.view({x_.size(0), -1, c.config.head_dim});
    }
    void compute() override {
        torch::NoGradGuard g;
        out_ = rms(x_, w_, eps_);
    }

   private:
    Tensor x_, w_;
    double eps_;
};

class RopeOp : public Op1 {
   public:
    explicit RopeOp(const Case& c)
        : x_(to_torch(c.in("x"))),
          rope_(to_torch(c.pos("positions")), c.config.head_dim, c.config.rope_theta, c.config.rope_layout) {}
    void compute() override {
        torch::NoGradGuard g;
        out_ = rope_.apply(x_);
    }

   private:
    Tensor x_;
    Rope rope_;
};

class AttentionOp : public Op1 {
   public:
    explicit AttentionOp(const Case& c)
        : q_(to_torch(c.in("q"))), k_(to_torch(c.in("k"))), v_(to_torch(c.in("v"))), cfg_(c.config) {
        if (q_.size(0) > 1 || cfg_.sliding_window > 0)
            mask_ = causal_mask(to_torch(c.pos("q_positions")), to_torch(c.pos("k_positions")), cfg_.sliding_window);
    }
    void compute() override {
        torch::NoGradGuard g;
        out_ = attention(q_, k_, v_, mask_, cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                                      cfg_.attn_logit_softcapping, score_scale(cfg_.attn_scale, cfg_.head_dim));
    }

   private:
    Tensor q_, k_, v_, mask_;
    BlockConfig cfg_;
};

// A paged batch's sequences: each one's queries (rows q0 .. q0 + n), its
// keys' cache rows in order, and its mask (causal bottom-right, the window)
// where it brings more than one query or has a window.
struct PagedSeq {
    int64_t q0 = 0, n = 0;
    Tensor rows, mask;
};
std::vector<PagedSeq> paged_seqs(const Case& c, int64_t window) {
    const auto& qo = c.pos("qo_indptr");
    const auto& kvp = c.pos("kv_indptr");
    const auto& ids = c.pos("kv_indices");
    const auto& last = c.pos("kv_last_page_len");
    const int64_t P = c.config.page_size;
    std::vector<PagedSeq> seqs;
    for (size_t b = 0; b + 1 < qo.size(); ++b) {
        PagedSeq s;
        s.q0 = qo[b];
        s.n = qo[b + 1] - qo[b];
        const int64_t pages = kvp[b + 1] - kvp[b], kv = pages == 0 ? 0 : (pages - 1) * P + last[b];
        std::vector<int64_t> rows;
        for (int64_t i = 0; i < kv; ++i) rows.push_back(ids[static_cast<size_t>(kvp[b] + i / P)] * P + i % P);
        s.rows = to_torch(rows);
        if ((s.n > 1 || window > 0) && kv > 0)
            s.mask = causal_mask(torch::arange(s.n, s.rows.options()) + (kv - s.n), torch::arange(kv, s.rows.options()),
                                 window);
        seqs.push_back(s);
    }
    return seqs;
}

// paged_attention composed as a PyTorch serving path would without a paged
// kernel (vLLM's reference, FlashInfer's tests): per sequence, its keys and
// values gathered out of the pages (index_select by cache row), then the
// eager attention above over them, causal bottom-right when it brings more
// than one query.
class PagedOp : public Op1 {
   public:
    explicit PagedOp(const Case& c)
        : q_(to_torch(c.in("q"))), k_cache_(to_torch(c.in("k_cache"))), v_cache_(to_torch(c.in("v_cache"))),
          cfg_(c.config), seqs_(paged_seqs(c, c.config.sliding_window)) {}
    void compute() override {
        torch::NoGradGuard g;
        std::vector<Tensor> outs;
        for (const PagedSeq& s : seqs_) {
            if (s.n == 0) continue;
            if (s.rows.numel() == 0) {
                outs.push_back(torch::zeros({s.n, cfg_.q_width()}, q_.options()));
                continue;
            }
            outs.push_back(attention(q_.narrow(0, s.q0, s.n), k_cache_.index_select(0, s.rows),
                                     v_cache_.index_select(0, s.rows), s.mask, cfg_.n_heads, cfg_.n_kv_heads,
                                     cfg_.head_dim, cfg_.attn_logit_softcapping, score_scale(cfg_.attn_scale, cfg_.head_dim)));
        }
        out_ = torch::cat(outs, 0);
    }

   private:
    Tensor q_, k_cache_, v_cache_;
    BlockConfig cfg_;
    std::vector<PagedSeq> seqs_;
};

// mla_attention composed as a PyTorch decode path would without an MLA
// kernel: per sequence, its latents and RoPE keys gathered out of the pages,
// w_uk absorbed into the queries (q_lat = q_nope @ w_ukᵀ), scores over the
// latents, their weighted sum, then @ w_uv — the absorbed form the simd
// kernel runs, in batched matmuls.
class MlaOp : public Op1 {
   public:
    explicit MlaOp(const Case& c)
        : q_(to_torch(c.in("q"))), ckv_(to_torch(c.in("ckv_cache"))), kpe_(to_torch(c.in("kpe_cache"))),
          cfg_(c.config) {
        const int64_t H = cfg_.n_heads, dc = cfg_.kv_lora_rank, dn = cfg_.qk_nope_head_dim, dv = cfg_.v_head_dim;
        const auto w = to_torch(c.in("w_kv_b")).view({dc, H, dn + dv}).permute({1, 0, 2});  // [H, dc, dn + dv]
        w_uk_t_ = w.narrow(2, 0, dn).transpose(1, 2).contiguous();                          // [H, dn, dc]
        w_uv_ = w.narrow(2, dn, dv).contiguous();                                            // [H, dc, dv]
        seqs_ = paged_seqs(c, 0);
    }
    void compute() override {
        torch::NoGradGuard g;
        const int64_t H = cfg_.n_heads, dn = cfg_.qk_nope_head_dim, dr = cfg_.qk_rope_head_dim, dv = cfg_.v_head_dim;
        const double scale = score_scale(cfg_.attn_scale, dn + dr);  // the model's, never the absorbed width's
        std::vector<Tensor> outs;
        for (const PagedSeq& s : seqs_) {
            if (s.n == 0) continue;
            if (s.rows.numel() == 0) {
                outs.push_back(torch::zeros({s.n, H * dv}, q_.options()));
                continue;
            }
            const auto q = q_.narrow(0, s.q0, s.n).view({s.n, H, dn + dr}).transpose(0, 1);  // [H, n, dn + dr]
            const auto q_lat = torch::matmul(q.narrow(2, 0, dn), w_uk_t_);                   // [H, n, dc]
            const auto c = ckv_.index_select(0, s.rows), r = kpe_.index_select(0, s.rows);   // [kv, dc], [kv, dr]
            auto scores = (torch::matmul(q_lat, c.t()) + torch::matmul(q.narrow(2, dn, dr), r.t())) * scale;
            if (s.mask.defined()) scores = scores + s.mask;
            const auto p = torch::softmax(scores, -1);
            const auto o = torch::matmul(torch::matmul(p, c), w_uv_);  // [H, n, dv]
            outs.push_back(o.transpose(0, 1).reshape({s.n, H * dv}));
        }
        out_ = torch::cat(outs, 0);
    }

   private:
    Tensor q_, ckv_, kpe_, w_uk_t_, w_uv_;
    BlockConfig cfg_;
    std::vector<PagedSeq> seqs_;
};

class SwigluOp : public Op1 {
   public:
    explicit SwigluOp(const Case& c)
        : x_(to_torch(c.in("x"))),
          w1_(to_torch(c.in("w1"))),
          w3_(to_torch(c.in("w3"))),
          w2_(to_torch(c.in("w2"))),
          act_(c.config.hidden_act) {}
    void compute() override {
        torch::NoGradGuard g;
        out_ = swiglu(x_, w1_, w3_, w2_, act_);
    }

   private:
    Tensor x_, w1_, w3_, w2_;
    HiddenAct act_;
};

// A mixture of experts as HF's sparse blocks run it in eager PyTorch: the
// router's product, softmax / sigmoid, topk, then a loop over the experts that
// some token chose (index_select, two products, index_add_) — the
// reference's own graph (moe.cpp), in float32 through LibTorch's matmul.
class MoeOp : public Op1 {
   public:
    explicit MoeOp(const Case& c) : x_(to_torch(c.in("x"))), cfg_(c.config) {
        auto opt = [&](const char* n) { return c.inputs.count(n) ? to_torch(c.in(n)) : Tensor(); };
        w_ = MoeTensors{opt("w_router"), opt("router_bias"), opt("e_bias"), opt("w13"), opt("w2"),
                        opt("b13"),      opt("b2"),          opt("ws13"),   opt("ws2"), opt("ws_gate"), {}};
    }
    void compute() override {
        torch::NoGradGuard g;
        static const Variant none;
        const Ctx ctx{torch::kFloat32, torch::kFloat32, Order::library, none};
        out_ = moe_experts(x_, moe_route(x_, w_, cfg_, ctx), w_, cfg_, ctx);
    }

   private:
    Tensor x_;
    MoeTensors w_;
    BlockConfig cfg_;
};

class BlockOp : public Op1 {
   public:
    explicit BlockOp(const Case& c)
        : x_(to_torch(c.in("x"))), w_(c), cfg_(c.config),
          rope_(to_torch(c.pos("positions")), c.config.head_dim, c.config.rope_theta, c.config.rope_layout) {
        const Tensor pos = to_torch(c.pos("positions"));
        mask_ = causal_mask(pos, pos, c.config.sliding_window);
    }
    void compute() override {
        torch::NoGradGuard g;
        const Qkv p = project(rms(x_, w_.attn_norm, cfg_.norm_eps), w_, cfg_, rope_);
        out_ = finish(x_, attention(p.q, p.k, p.v, mask_, cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                                      cfg_.attn_logit_softcapping, score_scale(cfg_.attn_scale, cfg_.head_dim)), w_, cfg_);
    }

   private:
    Tensor x_;
    Weights w_;
    BlockConfig cfg_;
    Rope rope_;
    Tensor mask_;
};

// A static cache (HF StaticCache): rows [0, C) from the context, row C written
// by every step.
class DecodeOp : public Op1 {
   public:
    DecodeOp(const Case& c, const conform::Tensor& context_x, const std::vector<int64_t>& context_pos)
        : x_(to_torch(c.in("x"))), w_(c), cfg_(c.config),
          rope_(to_torch(c.pos("positions")), c.config.head_dim, c.config.rope_theta, c.config.rope_layout) {
        torch::NoGradGuard g;
        C_ = context_x.rows();
        k_cache_ = torch::zeros({C_ + 1, cfg_.kv_width()}, fopts());
        v_cache_ = torch::zeros({C_ + 1, cfg_.kv_width()}, fopts());
        if (C_ > 0) {
            const Tensor pos = to_torch(context_pos);
            const Rope rope(pos, cfg_.head_dim, cfg_.rope_theta, cfg_.rope_layout);
            const Qkv p = project(rms(to_torch(context_x), w_.attn_norm, cfg_.norm_eps), w_, cfg_, rope);
            k_cache_.narrow(0, 0, C_).copy_(p.k);
            v_cache_.narrow(0, 0, C_).copy_(p.v);
        }
        if (cfg_.sliding_window > 0) {  // the step's window over the cache (its own key last)
            std::vector<int64_t> kp(context_pos);
            kp.push_back(c.pos("positions")[0]);
            mask_ = causal_mask(to_torch(c.pos("positions")), to_torch(kp), cfg_.sliding_window);
        }
    }
    void compute() override {
        torch::NoGradGuard g;
        const Qkv p = project(rms(x_, w_.attn_norm, cfg_.norm_eps), w_, cfg_, rope_);
        k_cache_.narrow(0, C_, 1).copy_(p.k);
        v_cache_.narrow(0, C_, 1).copy_(p.v);
        // One query after every cached key: nothing to mask but a sliding window.
        out_ = finish(x_, attention(p.q, k_cache_, v_cache_, mask_, cfg_.n_heads, cfg_.n_kv_heads, cfg_.head_dim,
                                      cfg_.attn_logit_softcapping, score_scale(cfg_.attn_scale, cfg_.head_dim)),
                      w_, cfg_);
    }

   private:
    Tensor x_;
    Weights w_;
    BlockConfig cfg_;
    Rope rope_;
    int64_t C_ = 0;
    Tensor k_cache_, v_cache_, mask_;  // mask_: the sliding window over the cache (undefined: every key visible)
};

}  // namespace

std::unique_ptr<TorchBenchOp> make_torch_bench_op(const Case& c, const conform::Tensor* context_x,
                                                  const std::vector<int64_t>* context_pos, TorchPlace place) {
    std::string why;
    if (place.cuda && !torch_cuda_available(&why)) throw std::runtime_error("torch-cuda: " + why);
    if (!place.cuda) place.bf16 = false;
    struct Scope {  // g_place for the constructor below, restored however it ends
        TorchPlace saved = g_place;
        explicit Scope(TorchPlace p) { g_place = p; }
        ~Scope() { g_place = saved; }
    } scope(place);
    switch (c.op) {
        case Op::rmsnorm: return std::make_unique<RmsNormOp>(c, false);
        case Op::qk_norm: return std::make_unique<RmsNormOp>(c, true);
        case Op::rope: return std::make_unique<RopeOp>(c);
        case Op::attention: return std::make_unique<AttentionOp>(c);
        case Op::swiglu: return std::make_unique<SwigluOp>(c);
        case Op::block: return std::make_unique<BlockOp>(c);
        case Op::decode: {
            static const conform::Tensor none;
            static const std::vector<int64_t> no_pos;
            return std::make_unique<DecodeOp>(c, context_x ? *context_x : none, context_pos ? *context_pos : no_pos);
        }
        case Op::paged_attention: return std::make_unique<PagedOp>(c);
        case Op::moe: return std::make_unique<MoeOp>(c);
        case Op::moe_route:
        case Op::moe_experts: break;  // timed whole, as moe (bench/resolve.cpp)
        case Op::mla_attention: return std::make_unique<MlaOp>(c);
    }
    throw std::logic_error("torch bench: unknown op");
}

bool torch_cuda_available(std::string* why) {
    if (torch::cuda::is_available()) return true;
    if (why)
        *why = std::string("this LibTorch (") + TORCH_VERSION + ") " +
               (at::hasCUDA() ? "sees no CUDA device" : "was built without CUDA");
    return false;
}

std::string torch_cuda_describe() {
    if (!torch_cuda_available()) return "";
    // The device's name is in at::cuda, whose header a CPU LibTorch lacks; the
    // count of devices is what the C++ API says portably.
    return std::string("LibTorch ") + TORCH_VERSION + " CUDA, " + std::to_string(torch::cuda::device_count()) +
           " device(s)";
}

TorchCudaCeilings torch_cuda_ceilings(int64_t n) {
    TorchCudaCeilings c;
    c.matmul_n = n;
    if (!torch_cuda_available()) return c;
    torch::NoGradGuard g;
    using Clock = std::chrono::steady_clock;
    auto best_of = [](int reps, const std::function<void()>& f) {
        f();  // warm-up: the allocator, cuBLAS's handle and heuristics
        torch::cuda::synchronize();
        double best = std::numeric_limits<double>::infinity();
        for (int i = 0; i < reps; ++i) {
            const auto t0 = Clock::now();
            f();
            torch::cuda::synchronize();
            best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
        }
        return best;
    };
    const auto dev = torch::TensorOptions().device(torch::kCUDA);
    {
        const int64_t bytes = int64_t{1} << 30;
        auto src = torch::ones({bytes}, dev.dtype(torch::kUInt8)), dst = torch::empty_like(src);
        c.copy_bytes_per_s = 2.0 * static_cast<double>(bytes) / best_of(5, [&] { dst.copy_(src); });
    }
    const double flop = 2.0 * std::pow(static_cast<double>(n), 3);
    for (auto dt : {torch::kFloat32, torch::kBFloat16}) {
        auto a = torch::randn({n, n}, dev.dtype(dt)), b = torch::randn({n, n}, dev.dtype(dt));
        Tensor out;
        const double s = best_of(5, [&] { out = torch::matmul(a, b); });
        (dt == torch::kFloat32 ? c.f32_flops_per_s : c.bf16_flops_per_s) = flop / s;
    }
    return c;
}

void set_torch_threads(int n) { torch::set_num_threads(n); }

double torch_matmul_seconds(int64_t n, int reps) {
    torch::NoGradGuard g;
    auto a = torch::randn({n, n}), b = torch::randn({n, n});
    auto c = torch::matmul(a, b);
    double best = std::numeric_limits<double>::infinity();
    for (int i = 0; i < reps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        c = torch::matmul(a, b);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

std::string torch_describe() {
    std::string s = std::string("LibTorch ") + TORCH_VERSION + ", " + std::to_string(torch::get_num_threads()) +
                    " intra-op threads";
    // Which BLAS torch::matmul reaches: OpenBLAS answers through its own C API.
    using Config = char* (*)();
    using Threads = int (*)();
    if (auto cfg = reinterpret_cast<Config>(dlsym(RTLD_DEFAULT, "openblas_get_config"))) {
        s += "; BLAS: ";
        s += cfg();
        if (auto core = reinterpret_cast<Config>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) s += std::string(" core=") + core();
        if (auto nt = reinterpret_cast<Threads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")))
            s += ", " + std::to_string(nt()) + " threads";
        Dl_info info;
        if (dladdr(reinterpret_cast<void*>(cfg), &info) && info.dli_fname) s += std::string(" (") + info.dli_fname + ")";
    } else {
        s += "; BLAS: not OpenBLAS (openblas_get_config not found)";
    }
    return s;
}

}  // namespace conform::ref

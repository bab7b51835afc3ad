// bench — the single ops `conform bench` times, their inputs resident on the
// device in the storage dtype; block and decode are in block.cu.
#include <vector>

#include "cuda/bench.h"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

size_t sz(int64_t v) { return static_cast<size_t>(v); }

template <typename S>
class NormBench : public TimedBench {  // rmsnorm, or qk_norm over the [T * heads, hd] view
   public:
    NormBench(DType d, const BenchInputs& in, bool per_head) : TimedBench(d) {
        cols_ = per_head ? in.config.head_dim : in.x.cols;
        rows_ = in.x.size() / cols_;
        eps_ = static_cast<float>(in.config.norm_eps);
        w_offset_ = in.config.norm_plus_one ? 1.0f : 0.0f;
        x_ = upload<S>(ctx_, "x", in.x);
        w_ = upload<S>(ctx_, "weight", in.weight);
        out_ = DeviceBuffer<S>("out", sz(in.x.size()), ctx_.stream);
        ctx_.sync("bench setup");
    }
    std::vector<float> output() const override { return widened(out_); }

   protected:
    void launch() override {
        launch_rmsnorm<S>(x_.data(), nullptr, nullptr, w_.data(), out_.data(), rows_, cols_, eps_, w_offset_, ctx_.stream);
    }

   private:
    int64_t rows_ = 0, cols_ = 0;
    float eps_ = 0, w_offset_ = 0;
    DeviceBuffer<S> x_, w_, out_;
};

template <typename S>
class RopeBench : public TimedBench {
   public:
    RopeBench(DType d, const BenchInputs& in) : TimedBench(d), p_(rope_params(in.config)), T_(in.x.rows), W_(in.x.cols) {
        x_ = upload<S>(ctx_, "x", in.x);
        pos_ = upload_positions(ctx_, "pos", in.pos.data, sz(in.pos.n));
        inv_freq_ = rope_inv_freq(ctx_, p_, scalar::rope_seq_len(in.pos));
        out_ = DeviceBuffer<S>("out", sz(in.x.size()), ctx_.stream);
        ctx_.sync("bench setup");
    }
    std::vector<float> output() const override { return widened(out_); }

   protected:
    void launch() override {
        launch_rope<S>({x_.data(), W_, out_.data(), W_}, T_, W_ / p_.head_dim, p_.head_dim, pos_.data(),
                       {inv_freq_.data(), p_.rotary(), scalar::rope_attention_factor(p_)}, p_.layout, ctx_.stream);
    }

   private:
    RopeParams p_;
    int64_t T_, W_;
    DeviceBuffer<S> x_, out_;
    DeviceBuffer<int64_t> pos_;
    DeviceBuffer<double> inv_freq_;
};

template <typename S>
class AttentionBench : public TimedBench {
   public:
    AttentionBench(DType d, const BenchInputs& in) : TimedBench(d) {
        const BlockConfig& c = in.config;
        q_ = upload<S>(ctx_, "q", in.q);
        k_ = upload<S>(ctx_, "k", in.k);
        v_ = upload<S>(ctx_, "v", in.v);
        qp_ = upload_positions(ctx_, "q_pos", in.q_pos.data, sz(in.q_pos.n));
        kp_ = upload_positions(ctx_, "k_pos", in.k_pos.data, sz(in.k_pos.n));
        out_ = DeviceBuffer<S>("out", sz(in.q.size()), ctx_.stream);
        plan_ = plan_attention(in.q.rows, in.k.rows, c.n_heads, c.n_kv_heads, c.head_dim, ctx_.sm_count);
        scratch_ = DeviceBuffer<float>("attention split scratch", plan_.scratch_floats, ctx_.stream);
        a_.q = q_.data();
        a_.k = k_.data();
        a_.v = v_.data();
        a_.out = out_.data();
        a_.q_pos = qp_.data();
        a_.k_pos = kp_.data();
        a_.tokens = in.q.rows;
        a_.keys = in.k.rows;
        a_.q_stride = a_.out_stride = c.q_width();
        a_.kv_stride = c.kv_width();
        a_.n_heads = c.n_heads;
        a_.n_kv_heads = c.n_kv_heads;
        a_.hd = c.head_dim;
        ctx_.sync("bench setup");
    }
    std::vector<float> output() const override { return widened(out_); }

   protected:
    void launch() override { launch_attention<S>(a_, plan_, scratch_.data(), ctx_); }

   private:
    DeviceBuffer<S> q_, k_, v_, out_;
    DeviceBuffer<int64_t> qp_, kp_;
    DeviceBuffer<float> scratch_;
    AttentionPlan plan_;
    AttentionArgs<S> a_;
};

template <typename S>
class SwigluBench : public TimedBench {
   public:
    SwigluBench(DType d, const BenchInputs& in)
        : TimedBench(d), T_(in.x.rows), D_(in.x.cols), F_(in.w1.cols), act_(in.config.hidden_act) {
        const std::vector<float> w13 = pack_gate_up(in.w1, in.w3);
        x_ = upload<S>(ctx_, "x", in.x);
        w13_ = upload<S>(ctx_, "w13", w13.data(), w13.size());
        w2_ = upload<S>(ctx_, "w2", in.w2);
        gu_ = DeviceBuffer<S>("gate|up", sz(T_ * 2 * F_), ctx_.stream);
        g_ = DeviceBuffer<S>("gated", sz(T_ * F_), ctx_.stream);
        out_ = DeviceBuffer<S>("out", sz(T_ * D_), ctx_.stream);
        ctx_.sync("bench setup");
    }
    std::vector<float> output() const override { return widened(out_); }

   protected:
    void launch() override {
        gemm<S>(ctx_, x_.data(), w13_.data(), gu_.data(), T_, D_, 2 * F_);
        launch_swiglu_act<S>(gu_.data(), g_.data(), T_, F_, act_, ctx_.stream);
        gemm<S>(ctx_, g_.data(), w2_.data(), out_.data(), T_, F_, D_);
    }

   private:
    int64_t T_, D_, F_;
    HiddenAct act_;
    DeviceBuffer<S> x_, w13_, w2_, gu_, g_, out_;
};

}  // namespace

std::unique_ptr<BenchOp> make_bench_op(const ImplOptions& o, const BenchInputs& in) {
    const Availability a = availability();
    if (!a.available) throw ImplError(a.reason);
    if (o.dtype == DType::f16) throw ImplError("cuda bench: f32 or bf16 (f16 keeps float32 intermediates)");
    if (in.op == Op::block || in.op == Op::decode) return make_block_bench(o, in);
    return with_storage(o.dtype, [&](auto tag) -> std::unique_ptr<BenchOp> {
        using S = decltype(tag);
        switch (in.op) {
            case Op::rmsnorm: return std::make_unique<NormBench<S>>(o.dtype, in, false);
            case Op::qk_norm: return std::make_unique<NormBench<S>>(o.dtype, in, true);
            case Op::rope: return std::make_unique<RopeBench<S>>(o.dtype, in);
            case Op::attention: return std::make_unique<AttentionBench<S>>(o.dtype, in);
            case Op::swiglu: return std::make_unique<SwigluBench<S>>(o.dtype, in);
            default: break;
        }
        throw ImplError(std::string("cuda bench: no bench for ") + to_string(in.op));
    });
}

}  // namespace conform::cuda

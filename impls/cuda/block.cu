// block — one Llama / Qwen3 decoder layer on the GPU: one forward
// (forward.cuh) over all T tokens from an empty cache, every tap the caller
// asked for downloaded; and the block's and decode's bench op.
#include <algorithm>
#include <vector>

#include "cuda/bench.h"
#include "cuda/common.cuh"
#include "cuda/forward.cuh"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace chk = scalar::detail;

// ---- op entries -------------------------------------------------------------------------------

TapSet op_block(const Context& ctx, View x, const BlockWeights& w, Positions pos, const BlockConfig& c,
                BlockOutputs& out) {
    check_block("block", x, pos, w, c);
    const int64_t T = x.rows;
    chk::expect_shape("block", "out", out[Tap::out], T, c.d_model);
    for (Tap t : kAllTaps)
        if (out[t].data) chk::expect_shape("block", to_string(t), out[t], T, tap_cols(t, c));
    TapSet written;
    if (T == 0) return written;
    with_storage(intermediate_dtype(ctx.dtype), [&](auto tag) {
        using S = decltype(tag);
        const Weights<S> dw(ctx, w, c, scalar::rope_seq_len(pos));
        const DeviceBuffer<S> dx = upload<S>(ctx, "x", x);
        const DeviceBuffer<int64_t> dpos = upload_positions(ctx, "pos", pos.data, sz(T));
        RunState<S> s(ctx, c, T);
        KvCache<S> cache(ctx, c, T);  // starts empty: the block attends over its own T tokens
        DeviceBuffer<S> dout("out", sz(T * c.d_model), ctx.stream);
        forward<S>(ctx, dw, c, dx.data(), dpos.data(), T, cache, s, dout.data());
        ctx.sync("block");

        const size_t Q = sz(c.q_width()), KVW = sz(c.kv_width()), QKV = Q + 2 * KVW;
        auto put = [&](Tap t, const DeviceBuffer<S>& src, size_t cols, size_t col0) {
            if (t != Tap::out && !out[t].data) return;
            download(ctx, src, cols, 0, col0, out[t]);
            round_output(ctx.dtype, out[t]);
            written.add(t);
        };
        put(Tap::attn_in, s.attn_in, sz(c.d_model), 0);
        put(Tap::q, s.qkv, QKV, 0);
        put(Tap::k, s.qkv, QKV, Q);
        put(Tap::v, s.qkv, QKV, Q + KVW);
        put(Tap::q_rot, s.q_rot, Q, 0);
        put(Tap::k_rot, cache.k, KVW, 0);  // the cache started empty: its rows are these tokens' keys
        put(Tap::attn, s.attn, Q, 0);
        put(Tap::h, s.h, sz(c.d_model), 0);
        put(Tap::ffn_in, s.ffn_in, sz(c.d_model), 0);
        put(Tap::ffn_out, s.ffn_out, sz(c.d_model), 0);
        put(Tap::out, dout, sz(c.d_model), 0);
        // What no tap returns must still have stayed inside its buffer.
        s.attn_wo.check_guard(ctx.stream);
        s.gu.check_guard(ctx.stream);
        s.g.check_guard(ctx.stream);
        s.scratch.check_guard(ctx.stream);
        cache.v.fetch_checked(ctx.stream);
        cache.pos.fetch_checked(ctx.stream);
    });
    return written;
}

// ---- bench ---------------------------------------------------------------------------------------

namespace {

// block: one forward over T tokens from an empty cache. decode: one token
// after `context` tokens went through the block into the cache at creation;
// each run rolls the cache back to them, so every run is the same step.
template <typename S>
class BlockBench : public TimedBench {
   public:
    BlockBench(DType d, const BenchInputs& in)
        : TimedBench(d),
          c_(in.config),
          T_(in.x.rows),
          context_(in.op == Op::decode ? in.context_x.rows : 0),
          w_(ctx_, in.weights, c_, std::max(scalar::rope_seq_len(in.pos), scalar::rope_seq_len(in.context_pos))),
          s_(ctx_, c_, std::max(T_, context_)),
          cache_(ctx_, c_, context_ + T_) {
        check_block(to_string(in.op), in.x, in.pos, in.weights, c_);
        x_ = upload<S>(ctx_, "x", in.x);
        pos_ = upload_positions(ctx_, "pos", in.pos.data, sz(T_));
        out_ = DeviceBuffer<S>("out", sz(T_ * c_.d_model), ctx_.stream);
        if (context_ > 0) {
            const DeviceBuffer<S> cx = upload<S>(ctx_, "context_x", in.context_x);
            const DeviceBuffer<int64_t> cp = upload_positions(ctx_, "context_pos", in.context_pos.data, sz(context_));
            DeviceBuffer<S> cout("context out", sz(context_ * c_.d_model), ctx_.stream);
            forward<S>(ctx_, w_, c_, cx.data(), cp.data(), context_, cache_, s_, cout.data());
            ctx_.sync("bench context");  // cx, cp, cout are freed on return
        }
        ctx_.sync("bench setup");
    }
    std::vector<float> output() const override { return widened(out_); }

   protected:
    void launch() override {
        cache_.len = context_;
        forward<S>(ctx_, w_, c_, x_.data(), pos_.data(), T_, cache_, s_, out_.data());
    }

   private:
    BlockConfig c_;
    int64_t T_, context_;
    Weights<S> w_;
    RunState<S> s_;
    KvCache<S> cache_;
    DeviceBuffer<S> x_, out_;
    DeviceBuffer<int64_t> pos_;
};

}  // namespace

std::unique_ptr<BenchOp> make_block_bench(const ImplOptions& o, const BenchInputs& in) {
    return with_storage(o.dtype, [&](auto tag) -> std::unique_ptr<BenchOp> {
        return std::make_unique<BlockBench<decltype(tag)>>(o.dtype, in);
    });
}

}  // namespace conform::cuda

// cuda_impl — the op entries behind the Implementation interface, and
// whether there is a device to run them on.
#include <memory>
#include <string>

#include "cuda/cuda.h"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/ops.h"
#include "scalar/scalar.h"

namespace conform::cuda {

namespace {

class CudaImpl : public Implementation {
   public:
    CudaImpl(std::string name, DType dtype, Faults faults) : name_(std::move(name)), ctx_(dtype, faults) {}

    std::string name() const override { return name_; }
    DType dtype() const override { return ctx_.dtype; }

    bool implements(Op op) const override { return op != Op::mla_attention; }  // scalar's only, so far

    Support supports(Op op, const BlockConfig& c) const override {
        if (!implements(op)) return Support::no("cuda has no latent-attention kernel yet (scalar's only: docs/mla.md)");
        if (Support s = scalar::detail::config_support(op, c); !s.ok) return s;
        if (op_info(op).uses(kMoeRoute) && c.n_experts_per_tok > kMaxMoeTopK)
            return Support::no("the router's thread 0 holds a token's choice: n_experts_per_tok <= " +
                               std::to_string(kMaxMoeTopK) + ", found " + std::to_string(c.n_experts_per_tok));
        const bool needs_attention =
            op == Op::attention || op == Op::block || op == Op::decode || op == Op::paged_attention;
        if (needs_attention && c.head_dim > kMaxAttentionHeadDim)
            return Support::no("the attention kernel holds a head in shared memory and registers: head_dim <= " +
                               std::to_string(kMaxAttentionHeadDim) + ", found " + std::to_string(c.head_dim));
        return Support::yes();
    }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override { op_rmsnorm(ctx_, x, w, p, out); }
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override { op_rope(ctx_, x, pos, p, out); }
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override { op_qk_norm(ctx_, x, w, p, out); }
    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        op_attention(ctx_, q, k, v, q_pos, k_pos, p, out);
    }
    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override {
        op_swiglu(ctx_, x, w1, w3, w2, p, out);
    }
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        op_paged_attention(ctx_, q, k_cache, v_cache, idx, p, out, lse);
    }
    // A warp per (row, head), its lanes splitting the keys by index: the batch and the pages never reach a row.
    bool batch_invariant(Op op) const override { return op == Op::paged_attention; }
    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        return op_block(ctx_, x, w, pos, c, out);
    }
    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        op_decode(ctx_, x, w, pos, prefill, c, out);
    }

    void moe(View x, const MoeWeights& w, const BlockConfig& c, MutView out, MutView route) override {
        op_moe(ctx_, x, w, c, out, route);
    }
    void moe_route(View x, const MoeWeights& w, const BlockConfig& c, MutView route) override {
        op_moe_route(ctx_, x, w, c, route);
    }
    void moe_experts(View x, View route, const MoeWeights& w, const BlockConfig& c, MutView out) override {
        op_moe_experts(ctx_, x, route, w, c, out);
    }

   private:
    std::string name_;
    Context ctx_;
};

std::unique_ptr<Implementation> make(const char* name, const ImplOptions& o, Faults faults) {
    const Availability a = availability();
    if (!a.available) throw ImplError(a.reason);
    return std::make_unique<CudaImpl>(name, o.dtype, faults);
}

}  // namespace

Availability availability() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        cudaGetLastError();  // not sticky, but leave no error behind for the next call to trip on
        return {false, std::string("no CUDA device visible (cudaGetDeviceCount: ") + cudaGetErrorString(e) + ")"};
    }
    if (n <= 0) return {false, "no CUDA device visible (cudaGetDeviceCount found none)"};
    int device = 0;
    cudaDeviceProp p{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&p, device) != cudaSuccess) {
        cudaGetLastError();
        return {false, "a CUDA device is visible but its properties cannot be read"};
    }
    // The build holds sm_90 machine code and compute_90 PTX: Hopper runs the
    // former, later GPUs JIT the latter, earlier ones can run neither.
    if (p.major < 9)
        return {false, std::string("device ") + std::to_string(device) + " (" + p.name + ") has compute capability " +
                           std::to_string(p.major) + "." + std::to_string(p.minor) +
                           "; this build has code for 9.0 (Hopper) and later only"};
    return {};
}

std::string cuda_details() {
    const Availability a = availability();
    if (!a.available) return a.reason;
    int device = 0;
    cudaDeviceProp p{};
    cudaGetDevice(&device);
    cudaGetDeviceProperties(&p, device);
    return std::string(p.name) + ", compute capability " + std::to_string(p.major) + "." + std::to_string(p.minor) +
           ", " + std::to_string(p.multiProcessorCount) + " multiprocessors";
}

std::unique_ptr<Implementation> make_cuda(const ImplOptions& o) { return make("cuda", o, Faults{}); }

std::unique_ptr<Implementation> make_cuda_rope_layout_swapped(const ImplOptions& o) {
    Faults f;
    f.rope_layout_swapped = true;
    return make("cuda_rope_layout_swapped", o, f);
}

std::unique_ptr<Implementation> make_cuda_gqa_tiled(const ImplOptions& o) {
    Faults f;
    f.gqa_tiled = true;
    return make("cuda_gqa_head_mapping_tiled", o, f);
}

std::unique_ptr<Implementation> make_cuda_router_in_bf16(const ImplOptions& o) {
    Faults f;
    f.router_bf16 = true;
    return make("cuda_router_in_bf16", o, f);
}

}  // namespace conform::cuda

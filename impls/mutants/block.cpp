// Block mutants: the KV-cache decode path (semantics.md, bug class 8 and
// "decode position off by one"), the feed-forward and the residual stream.
#include <algorithm>
#include <cmath>
#include <vector>

#include "conform/dtype.h"

#include "mutants/mutants.h"

namespace conform::mutants {
namespace {

using scalar::ScalarImpl;

// Decode position off by one: each decode step is rotated at pos + 1 (the
// position read after the cache length was incremented). The prefill is right.
struct RopePositionOffByOne : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    int64_t decode_position(int64_t pos) override { return pos + 1; }
};

// Class 8 (sglang fork #31): the decode path caches its token's key before
// RoPE; the prefill caches rotated keys.
struct DecodeCacheUnrotatedK : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void cache_write(const NewKv& in, const BlockConfig& c, MutView k_rows, MutView v_rows) override {
        ScalarImpl::cache_write(in, c, k_rows, v_rows);
        if (in.decode_step) std::copy(in.k.data, in.k.data + in.k.size(), k_rows.data);
    }
};


// The q and k biases added to the rotated q and k (a fused RoPE kernel that
// takes the bias as a last step); v's is where it belongs.
struct QkvBiasAfterRope : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    static void add_row(MutView x, View b) {
        for (int64_t t = 0; t < x.rows; t++)
            for (int64_t j = 0; j < x.cols; j++) x.row(t)[j] += b.data[j];
    }
    void add_qkv_bias(MutView, MutView, MutView v, const BlockWeights& w, const BlockConfig& c) override {
        if (c.qkv_bias) add_row(v, w.bv);
    }
    void rotate_qk(View q, View k, Positions pos, const BlockWeights& w, const BlockConfig& c, MutView q_rot,
                   MutView k_rot) override {
        ScalarImpl::rotate_qk(q, k, pos, w, c, q_rot, k_rot);
        if (!c.qkv_bias) return;
        add_row(q_rot, w.bq);
        add_row(k_rot, w.bk);
    }
};

// SiLU on the up branch instead of the gate: w2((x @ w1) * silu(x @ w3)).
struct SwigluGateOnUp : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override {
        ScalarImpl::swiglu(x, w3, w1, w2, p, out);
    }
};



// The attention sublayer's residual dropped: h = attn @ wo.
struct ResidualMissing : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void attention_residual(View, View attn_wo, MutView h) override {
        std::copy(attn_wo.data, attn_wo.data + attn_wo.size(), h.data);
    }
};

// A float32 claim whose GEMMs run in bf16 (operands and results rounded to
// bf16, float32 accumulation, as a bf16 cuBLAS GEMM would): a silent
// precision downgrade. The diagnosis calls it precision_downgrade.
void matmul_bf16(View x, View w, MutView out) {
    std::vector<float> xb(x.data, x.data + x.size()), wb(w.data, w.data + w.size());
    for (float& f : xb) f = round_bf16(f);
    for (float& f : wb) f = round_bf16(f);
    scalar::matmul(View{xb.data(), x.rows, x.cols}, View{wb.data(), w.rows, w.cols}, out);
    for (int64_t i = 0; i < out.size(); ++i) out.data[i] = round_bf16(out.data[i]);
}
struct MatmulAccumulatesBf16 : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void product(View x, View w, MutView out) override { matmul_bf16(x, w, out); }
};

// A llama.cpp-style kernel that quantises its activations to Q8_0 before
// every weight product and does not declare it (activation_quant: none): its
// output has Q8_0's accuracy where it claims float32's. precision_downgrade.
struct ActQuantUndeclared : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void product(View x, View w, MutView out) override { scalar::matmul_act_quant(x, w, out, ActQuant::q8_0); }
};

// Exact GELU (erf form: HF "gelu", F.gelu's default).
float gelu_erf(float g) { return 0.5f * g * (1.0f + std::erf(g / std::sqrt(2.0f))); }

// A GELU MLP's activation on a SwiGLU gate: erf GELU where the config says silu.
struct GeluGate : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    scalar::Activation gate_activation(HiddenAct a) const override {
        return a == HiddenAct::silu ? gelu_erf : ScalarImpl::gate_activation(a);
    }
};

// GeGLU's tanh approximation computed exactly: erf GELU where the config says
// gelu_tanh (HF "gelu" for "gelu_pytorch_tanh"; at most 4.7e-4 apart, near |a| = 2).
struct GeluErfForTanh : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    scalar::Activation gate_activation(HiddenAct a) const override {
        return a == HiddenAct::gelu_tanh ? gelu_erf : ScalarImpl::gate_activation(a);
    }
};


}  // namespace

std::unique_ptr<Implementation> rope_position_off_by_one(const ImplOptions& o) {
    return detail::make<RopePositionOffByOne>("rope_position_off_by_one", o);
}
std::unique_ptr<Implementation> decode_cache_unrotated_k(const ImplOptions& o) {
    return detail::make<DecodeCacheUnrotatedK>("decode_cache_unrotated_k", o);
}
std::unique_ptr<Implementation> qkv_bias_after_rope(const ImplOptions& o) {
    return detail::make<QkvBiasAfterRope>("qkv_bias_after_rope", o);
}
std::unique_ptr<Implementation> swiglu_gate_on_up(const ImplOptions& o) {
    return detail::make<SwigluGateOnUp>("swiglu_gate_on_up", o);
}
std::unique_ptr<Implementation> residual_missing(const ImplOptions& o) {
    return detail::make<ResidualMissing>("residual_missing", o);
}

std::unique_ptr<Implementation> act_quant_undeclared(const ImplOptions& o) {
    return detail::make<ActQuantUndeclared>("act_quant_undeclared", o);
}
std::unique_ptr<Implementation> matmul_accumulates_bf16(const ImplOptions& o) {
    return detail::make<MatmulAccumulatesBf16>("matmul_accumulates_bf16", o);
}
std::unique_ptr<Implementation> gelu_gate(const ImplOptions& o) { return detail::make<GeluGate>("gelu_gate", o); }
std::unique_ptr<Implementation> gelu_erf_for_tanh(const ImplOptions& o) {
    return detail::make<GeluErfForTanh>("gelu_erf_for_tanh", o);
}

}  // namespace conform::mutants

// Block mutants: the KV-cache decode path (semantics.md, bug class 8 and
// "decode position off by one"), the feed-forward and the residual stream.
#include <algorithm>

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

// SiLU on the up branch instead of the gate: w2((x @ w1) * silu(x @ w3)).
struct SwigluGateOnUp : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void swiglu(View x, View w1, View w3, View w2, MutView out) override { ScalarImpl::swiglu(x, w3, w1, w2, out); }
};

// The attention sublayer's residual dropped: h = attn @ wo.
struct ResidualMissing : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void attention_residual(View, View attn_wo, MutView h) override {
        std::copy(attn_wo.data, attn_wo.data + attn_wo.size(), h.data);
    }
};

}  // namespace

std::unique_ptr<Implementation> rope_position_off_by_one(const ImplOptions& o) {
    return detail::make<RopePositionOffByOne>("rope_position_off_by_one", o);
}
std::unique_ptr<Implementation> decode_cache_unrotated_k(const ImplOptions& o) {
    return detail::make<DecodeCacheUnrotatedK>("decode_cache_unrotated_k", o);
}
std::unique_ptr<Implementation> swiglu_gate_on_up(const ImplOptions& o) {
    return detail::make<SwigluGateOnUp>("swiglu_gate_on_up", o);
}
std::unique_ptr<Implementation> residual_missing(const ImplOptions& o) {
    return detail::make<ResidualMissing>("residual_missing", o);
}

}  // namespace conform::mutants

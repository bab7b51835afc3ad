// RoPE mutants (semantics.md, bug classes 1, 4, 5, 6, 8, 9).
#include <cstring>
#include <vector>

#include "conform/dtype.h"
#include "mutants/mutants.h"

namespace conform::mutants {
namespace {

using scalar::ScalarImpl;

// Class 1 (TinyLlama #24, llama.cpp #13260): NeoX checkpoint rotated as
// interleaved pairs, or the other way round.
struct RopeLayoutSwapped : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        RopeParams swapped = p;
        swapped.layout = p.layout == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
        ScalarImpl::rope(x, pos, swapped, out);
    }
};

// Class 4 (airllm #369, vLLM #9490): rope_theta not propagated, the default base used.
struct RopeThetaDefault : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        RopeParams fallback = p;
        fallback.theta = 10000.0;
        ScalarImpl::rope(x, pos, fallback, out);
    }
};


// Class 6 (vLLM #3488): dynamic NTK's base computed once for the whole scaled
// context, max_len = original_max_position * factor, so it applies inside the
// original context too, where RoPE must be left as trained.
struct DynamicNtkInsideContext : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    RopeParams rope_for_call(const RopeParams& p, int64_t seq_len) override {
        if (p.scaling.type != RopeScalingType::dynamic) return ScalarImpl::rope_for_call(p, seq_len);
        RopeParams fixed = p;
        fixed.theta = scalar::rope_dynamic_base(p, p.scaling.factor * static_cast<double>(p.scaling.original_max_position));
        fixed.scaling = RopeScaling{};
        return fixed;
    }
};

// Class 9 (candle #3520, sglang-jax #1472): pos * inv_freq held in bf16.
// Rounded via float, as a float -> bf16 cast does (round to nearest even).
double angle_in_bf16(int64_t pos, double inv_freq) {
    return round_bf16(static_cast<float>(scalar::rope_angle(pos, inv_freq)));
}
struct RopeAngleLowPrecision : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        scalar::rope(x, pos, call_rope(p, pos), out, angle_in_bf16);
    }
};

// Class 9, the table kind: a float32 kernel whose cos/sin cache is kept in
// the model's dtype (bf16), as caches often are.
void trig_bf16(double angle, double mscale, float* c, float* s) {
    scalar::rope_trig(angle, mscale, c, s);
    *c = round_bf16(*c);
    *s = round_bf16(*s);
}
struct RopeCosSinBf16 : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        scalar::rope(x, pos, call_rope(p, pos), out, scalar::rope_angle, trig_bf16);
    }
};

// Class 9 (transformers PR #29285): inv_freq held in bf16.
double angle_inv_freq_bf16(int64_t pos, double inv_freq) {
    return static_cast<double>(pos) * round_bf16(static_cast<float>(inv_freq));
}
struct RopeInvFreqBf16 : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        scalar::rope(x, pos, call_rope(p, pos), out, angle_inv_freq_bf16);
    }
};

// Class 9 (sglang-jax #1472): positions cast to half before the angle
// (exact only up to 2048; position 4097 becomes 4096).
double angle_positions_f16(int64_t pos, double inv_freq) {
    return static_cast<double>(f16_float(f16_bits(static_cast<float>(pos)))) * inv_freq;
}
struct RopePositionsF16 : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        scalar::rope(x, pos, call_rope(p, pos), out, angle_positions_f16);
    }
};

// Positions taken as start + row: a kernel that reads only the first position
// and counts rows (right for one contiguous sequence, wrong for gaps, packed
// sequences, or a chunk whose positions are not its rows).
struct RopePositionFromRowIndex : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        rows_.resize(static_cast<size_t>(pos.n));
        for (int64_t i = 0; i < pos.n; ++i) rows_[static_cast<size_t>(i)] = pos.n ? pos[0] + i : 0;
        const Positions counted{rows_.data(), pos.n};
        ScalarImpl::rope(x, counted, p, out);
    }
    std::vector<int64_t> rows_;
};

// Class 8 (TensorRT-LLM #4040): q and k rotated by the model and again by the
// attention kernel.
struct RopeAppliedTwice : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void rotate_qk(View q, View k, Positions pos, const BlockWeights& w, const BlockConfig& c, MutView q_rot,
                   MutView k_rot) override {
        ScalarImpl::rotate_qk(q, k, pos, w, c, q_rot, k_rot);
        ScalarImpl::rotate_qk(q_rot, k_rot, pos, w, c, q_rot, k_rot);
    }
};

// V rotated like K (semantics.md, "others worth a mutant"): the cache holds rope(v).
struct VRotated : ScalarImpl {
    using ScalarImpl::ScalarImpl;
    void cache_write(const NewKv& in, const BlockConfig& c, MutView k_rows, MutView v_rows) override {
        ScalarImpl::cache_write(in, c, k_rows, v_rows);
        rope(in.v, in.pos, rope_params(c), v_rows);
    }
};

}  // namespace

std::unique_ptr<Implementation> rope_layout_swapped(const ImplOptions& o) {
    return detail::make<RopeLayoutSwapped>("rope_layout_swapped", o);
}
std::unique_ptr<Implementation> rope_theta_default(const ImplOptions& o) {
    return detail::make<RopeThetaDefault>("rope_theta_default", o);
}
std::unique_ptr<Implementation> rope_angle_low_precision(const ImplOptions& o) {
    return detail::make<RopeAngleLowPrecision>("rope_angle_low_precision", o);
}
std::unique_ptr<Implementation> rope_applied_twice(const ImplOptions& o) {
    return detail::make<RopeAppliedTwice>("rope_applied_twice", o);
}
std::unique_ptr<Implementation> v_rotated(const ImplOptions& o) { return detail::make<VRotated>("v_rotated", o); }
std::unique_ptr<Implementation> dynamic_ntk_inside_context(const ImplOptions& o) {
    return detail::make<DynamicNtkInsideContext>("dynamic_ntk_inside_context", o);
}
std::unique_ptr<Implementation> rope_cos_sin_bf16(const ImplOptions& o) {
    return detail::make<RopeCosSinBf16>("rope_cos_sin_bf16", o);
}
std::unique_ptr<Implementation> rope_inv_freq_bf16(const ImplOptions& o) {
    return detail::make<RopeInvFreqBf16>("rope_inv_freq_bf16", o);
}
std::unique_ptr<Implementation> rope_positions_f16(const ImplOptions& o) {
    return detail::make<RopePositionsF16>("rope_positions_f16", o);
}
std::unique_ptr<Implementation> rope_position_from_row_index(const ImplOptions& o) {
    return detail::make<RopePositionFromRowIndex>("rope_position_from_row_index", o);
}

}  // namespace conform::mutants

// The plugin C ABI version 1 (1.0 to 1.13, conform/plugin_v1.h) as an
// Implementation: frozen. A 1.x table gets the fields its minor had, and is
// offered only the twists its minor had fields for (declared_twists_v1): a
// plugin built against 1.3 computes a sliding window and not a soft-cap, and
// runs its full --cases of every op all the same. Nothing is added here for
// a new twist: those travel by name in version 2 (adapter.cpp).
#include <cmath>
#include <cstddef>

#include "plugin/adapter.h"
#include "plugin/call.h"

namespace conform::plugin {

using detail::Call;
using detail::timed;

namespace {

using conform_config = conform_v1_config;
using conform_block_weights = conform_v1_block_weights;
using conform_plugin = conform_v1_plugin;

using detail::rope_fields;

uint32_t to_abi(KvCacheDtype d) {
    switch (d) {
        case KvCacheDtype::none: return CONFORM_KV_CACHE_NONE;
        case KvCacheDtype::fp8_e4m3: return CONFORM_KV_CACHE_FP8_E4M3;
        case KvCacheDtype::fp8_e5m2: return CONFORM_KV_CACHE_FP8_E5M2;
    }
    return CONFORM_KV_CACHE_NONE;
}

conform_config config_of(DType dtype, const BlockConfig& c) {
    conform_config k{};
    detail::core_fields(k, dtype, c);
    k.qkv_bias = c.qkv_bias ? 1u : 0u;
    k.sliding_window = c.sliding_window;
    k.attn_logit_softcapping = c.attn_logit_softcapping;
    k.norm_plus_one = c.norm_plus_one ? 1u : 0u;
    k.kv_cache_dtype = to_abi(c.kv_cache_dtype);
    k.hidden_act = c.hidden_act == HiddenAct::gelu_tanh ? CONFORM_HIDDEN_ACT_GELU_TANH : CONFORM_HIDDEN_ACT_SILU;
    k.attn_scale = c.attn_scale;
    k.sandwich_norm = c.sandwich_norm ? 1u : 0u;
    k.nope = c.nope ? 1u : 0u;
    k.attention_chunk_size = c.attention_chunk_size;
    return k;
}
conform_config config_only(DType dtype) {
    conform_config k{};
    k.struct_size = sizeof k;
    k.dtype = dtype_code(dtype);
    return k;
}

// A plugin built against ABI 1.0 knows rope_theta and rope_layout only:
// handed a scaled or partial-rotary config it would run plain RoPE over the
// whole head and fail for a reason that is not its own. Empty when the

bool knows_1_1(const conform_plugin& t) {
    return t.struct_size >= offsetof(conform_plugin, abi_minor) + sizeof(uint32_t) && t.abi_minor >= 1;
}
bool knows_1_2(const conform_plugin& t) {
    return t.struct_size >= offsetof(conform_plugin, paged_attention) + sizeof(t.paged_attention) && t.abi_minor >= 2;
}

// The twists each minor brought a field for (frozen: 1.13 was the last), the
// ops each reached at that minor (decode's FP8 cache came at 1.8).
struct Brought {
    const char* twist;
    uint32_t minor;
    Op only = Op::rmsnorm;
    bool for_one_op = false;
    uint32_t minor_there = 0;  // the minor it reached `only` at
};
const Brought kBrought[] = {
    {"qk_norm", 0},           {"rotary_dim", 1},    {"rope_scaling", 1},
    {"qkv_bias", 3},          {"sliding_window", 3}, {"attn_logit_softcapping", 4},
    {"attn_sinks", 4},        {"norm_plus_one", 5},  {"kv_cache_dtype", 6, Op::decode, true, 8},
    {"kv_scale_per_head", 6, Op::decode, true, 8},   {"hidden_act", 9},
    {"attn_scale", 10},       {"sandwich_norm", 11}, {"nope", 12},
    {"attention_chunk_size", 13},
};

}  // namespace

TwistSet declared_twists_v1(const conform_plugin& t, Op op) {
    const uint32_t minor = knows_1_1(t) ? t.abi_minor : 0;
    TwistSet s = TwistSet::none();
    for (const Brought& b : kBrought) {
        const uint32_t needed = b.for_one_op && op == b.only ? b.minor_there : b.minor;
        if (minor >= needed) s.add(*find_twist(b.twist));
    }
    return s;
}

ActQuant declared_act_quant_v1(const conform_plugin& t, Op op) {
    const bool knows_1_7 = t.struct_size >= offsetof(conform_plugin, activation_quant) + sizeof(t.activation_quant) &&
                           knows_1_1(t) && t.abi_minor >= 7;
    if (!knows_1_7 || t.activation_quant == nullptr) return ActQuant::none;
    return detail::act_quant_of(t.activation_quant(static_cast<uint32_t>(op)), op);
}

bool implements_v1(const conform_plugin& t, Op op) {
    if (op == Op::paged_attention && !knows_1_2(t)) return false;  // a 1.0 / 1.1 table ends before it
    return detail::has_function(t, op);
}

namespace {

class Adapter final : public Implementation {
   public:
    Adapter(std::shared_ptr<const Library> lib, DType dtype) : lib_(std::move(lib)), t_(*lib_->table_v1), dtype_(dtype) {}

    std::string name() const override { return lib_->name; }
    DType dtype() const override { return dtype_; }
    // The table's answer, checked when the library was loaded (check_table).
    ActQuant activation_quant(Op op) const override {
        return implements_v1(t_, op) ? declared_act_quant_v1(t_, op) : ActQuant::none;
    }
    // The twists its minor had fields for: it is offered no case with another on.
    TwistSet twists(Op op) const override { return declared_twists_v1(t_, op); }

    Support supports(Op op, const BlockConfig& config) const override {
        if (!implements_v1(t_, op)) return Support::no(lib_->name + " does not implement " + to_string(op));
        if (t_.supports == nullptr) return Support::yes();
        const conform_config k = config_of(dtype_, config);
        char msg[1024] = "";
        const int32_t status = t_.supports(static_cast<uint32_t>(op), &k, msg, sizeof msg);
        msg[sizeof msg - 1] = '\0';
        if (status == CONFORM_OK) return Support::yes();
        return Support::no(msg[0] ? std::string(msg) : status_name(status));
    }

    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override {
        Call call("rmsnorm", dtype_);
        conform_config k = config_only(dtype_);
        k.d_model = x.cols;
        k.norm_eps = p.eps;
        k.norm_plus_one = p.plus_one ? 1u : 0u;
        const conform_tensor tx = call.in("x", x), tw = call.in("weight", w, true), to = call.out("out", out);
        call.finish(timed([&] { return t_.rmsnorm(&k, &tx, &tw, &to, call.msg(), call.msg_cap()); }));
    }

    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        Call call("rope", dtype_);
        conform_config k = config_only(dtype_);
        k.head_dim = p.head_dim;
        k.n_heads = p.head_dim > 0 ? x.cols / p.head_dim : 0;
        k.rope_layout = p.layout == RopeLayout::neox ? CONFORM_ROPE_NEOX : CONFORM_ROPE_INTERLEAVED;
        k.rope_theta = p.theta;
        rope_fields(k, p.rotary(), p.scaling);
        const conform_tensor tx = call.in("x", x), tp = call.positions("positions", pos), to = call.out("out", out);
        call.finish(timed([&] { return t_.rope(&k, &tx, &tp, &to, call.msg(), call.msg_cap()); }));
    }

    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override {
        Call call("qk_norm", dtype_);
        conform_config k = config_only(dtype_);
        k.head_dim = p.head_dim;
        k.n_heads = p.head_dim > 0 ? x.cols / p.head_dim : 0;
        k.norm_eps = p.eps;
        k.norm_plus_one = p.plus_one ? 1u : 0u;
        const conform_tensor tx = call.in("x", x), tw = call.in("weight", w, true), to = call.out("out", out);
        call.finish(timed([&] { return t_.qk_norm(&k, &tx, &tw, &to, call.msg(), call.msg_cap()); }));
    }

    void attention(View q, View k, View v, Positions q_pos, Positions k_pos, const AttentionParams& p,
                   MutView out) override {
        Call call("attention", dtype_);
        conform_config c = config_only(dtype_);
        c.n_heads = p.n_heads;
        c.n_kv_heads = p.n_kv_heads;
        c.head_dim = p.head_dim;
        c.sliding_window = p.sliding_window;
        c.attention_chunk_size = p.chunk;
        c.attn_logit_softcapping = p.softcap;
        c.attn_scale = p.scale;
        if (p.sinks) c.sinks = call.in("sinks", View{p.sinks, 1, p.n_heads}, true);
        const conform_tensor tq = call.in("q", q), tk = call.in("k", k), tv = call.in("v", v),
                             tqp = call.positions("q_positions", q_pos), tkp = call.positions("k_positions", k_pos),
                             to = call.out("out", out);
        call.finish(timed([&] { return t_.attention(&c, &tq, &tk, &tv, &tqp, &tkp, &to, call.msg(), call.msg_cap()); }));
    }

    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override {
        Call call("swiglu", dtype_);
        conform_config k = config_only(dtype_);
        k.d_model = x.cols;
        k.ffn_dim = w1.cols;
        k.hidden_act = p.act == HiddenAct::gelu_tanh ? CONFORM_HIDDEN_ACT_GELU_TANH : CONFORM_HIDDEN_ACT_SILU;
        const conform_tensor tx = call.in("x", x), t1 = call.in("w1", w1), t3 = call.in("w3", w3),
                             t2 = call.in("w2", w2), to = call.out("out", out);
        call.finish(timed([&] { return t_.swiglu(&k, &tx, &t1, &t3, &t2, &to, call.msg(), call.msg_cap()); }));
    }

    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        Call call("block", dtype_);
        conform_config k = config_of(dtype_, c);
        if (c.attn_sinks) k.sinks = call.in("sinks", w.sinks, true);
        const conform_block_weights tw = weights(call, w);
        const conform_tensor tx = call.in("x", x), tp = call.positions("positions", pos);
        conform_tensor taps[CONFORM_TAP_COUNT];
        static_assert(CONFORM_TAP_COUNT == kAllTaps.size(), "plugin.h's taps are conform/ops.h's");
        for (Tap t : kAllTaps) taps[static_cast<size_t>(t)] = call.out(to_string(t), out[t]);
        uint32_t written = 0;
        call.finish(timed([&] { return t_.block(&k, &tx, &tw, &tp, taps, &written, call.msg(), call.msg_cap()); }));
        TapSet ts;
        for (Tap t : kAllTaps) {
            if (!((written >> static_cast<unsigned>(t)) & 1u)) continue;
            if (out[t].data == nullptr)
                throw ImplError(std::string("block reported tap '") + to_string(t) +
                                "' as written, but it was not requested (its data was NULL)");
            ts.add(t);
        }
        return ts;
    }

    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        Call call("decode", dtype_);
        conform_config k = config_of(dtype_, c);
        if (c.attn_sinks) k.sinks = call.in("sinks", w.sinks, true);
        if (c.kv_cache_dtype != KvCacheDtype::none) {
            k.k_scale = call.in("k_scale", w.k_scale, true);
            k.v_scale = call.in("v_scale", w.v_scale, true);
        }
        const conform_block_weights tw = weights(call, w);
        const conform_tensor tx = call.in("x", x), tp = call.positions("positions", pos), to = call.out("out", out);
        call.finish(timed([&] { return t_.decode(&k, &tx, &tw, &tp, prefill, &to, call.msg(), call.msg_cap()); }));
    }

    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        Call call("paged_attention", dtype_);
        conform_config c = config_only(dtype_);
        c.n_heads = p.n_heads;
        c.n_kv_heads = p.n_kv_heads;
        c.head_dim = p.head_dim;
        c.page_size = p.page_size;
        c.sliding_window = p.sliding_window;
        c.attention_chunk_size = p.chunk;
        c.attn_scale = p.scale;
        c.attn_logit_softcapping = p.softcap;
        if (p.sinks) c.sinks = call.in("sinks", View{p.sinks, 1, p.n_heads}, true);
        if (p.kv_cache_dtype != KvCacheDtype::none) {
            c.kv_cache_dtype = to_abi(p.kv_cache_dtype);
            c.k_scale = call.in("k_scale", View{p.k_scale, 1, p.n_kv_scales}, true);
            c.v_scale = call.in("v_scale", View{p.v_scale, 1, p.n_kv_scales}, true);
        }
        const conform_tensor tq = call.in("q", q), tk = call.in("k_cache", k_cache), tv = call.in("v_cache", v_cache),
                             tqo = call.indices("qo_indptr", idx.qo_indptr), tkp = call.indices("kv_indptr", idx.kv_indptr),
                             tki = call.indices("kv_indices", idx.kv_indices),
                             tkl = call.indices("kv_last_page_len", idx.kv_last_page_len), to = call.out("out", out),
                             tl = call.out("lse", lse);
        call.finish(timed([&] {
            return t_.paged_attention(&c, &tq, &tk, &tv, &tqo, &tkp, &tki, &tkl, &to, &tl, call.msg(), call.msg_cap());
        }));
    }

   private:
    static conform_block_weights weights(Call& call, const BlockWeights& w) {
        conform_block_weights b{};
        b.struct_size = sizeof b;
        b.attn_norm = call.in("attn_norm", w.attn_norm, true);
        b.wq = call.in("wq", w.wq);
        b.wk = call.in("wk", w.wk);
        b.wv = call.in("wv", w.wv);
        b.wo = call.in("wo", w.wo);
        b.ffn_norm = call.in("ffn_norm", w.ffn_norm, true);
        b.w1 = call.in("w1", w.w1);
        b.w3 = call.in("w3", w.w3);
        b.w2 = call.in("w2", w.w2);
        b.q_norm = call.in("q_norm", w.q_norm, true);
        b.k_norm = call.in("k_norm", w.k_norm, true);
        b.bq = call.in("bq", w.bq, true);
        b.bk = call.in("bk", w.bk, true);
        b.bv = call.in("bv", w.bv, true);
        b.attn_post_norm = call.in("attn_post_norm", w.attn_post_norm, true);
        b.ffn_post_norm = call.in("ffn_post_norm", w.ffn_post_norm, true);
        return b;
    }

    std::shared_ptr<const Library> lib_;
    const conform_plugin& t_;
    DType dtype_;
};


}  // namespace

std::unique_ptr<Implementation> make_adapter_v1(std::shared_ptr<const Library> lib, DType dtype) {
    return std::make_unique<Adapter>(std::move(lib), dtype);
}

}  // namespace conform::plugin

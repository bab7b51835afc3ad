// scalar_plugin.cpp — conform's scalar implementation behind the plugin C ABI,
// as an engine would wrap its kernels: a correct plugin of every op, built
// twice. As is, against ABI 2 (conform/plugin.h): it lists every twist of the
// record and reads each call's twists by name. With -DABI_V1, against ABI 1.x
// (conform/plugin_v1.h): its table claims the minor in $SCALAR_PLUGIN_ABI_MINOR
// (0 to 13; default 13), so one build stands for a correct Llama kernel of
// any 1.x. cli/test_plugin.sh (mode abi): each is offered its --cases of every
// op within what it declares, and passes.
#ifdef ABI_V1
#include "conform/plugin_v1.h"
#else
#include "conform/plugin.h"
#endif

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "conform/op_info.h"
#include "scalar/scalar.h"

namespace {

using namespace conform;

View view(const conform_tensor* t) {
    if (!t || !t->data) return {};
    const int64_t rows = t->ndim == 2 ? t->shape[0] : 1, cols = t->ndim == 2 ? t->shape[1] : t->shape[0];
    return View{static_cast<const float*>(t->data), rows, cols};
}
MutView mut(const conform_tensor* t) {
    if (!t || !t->data) return {};
    return MutView{static_cast<float*>(t->data), t->shape[0], t->shape[1]};
}
Positions positions(const conform_tensor* t) {
    return Positions{static_cast<const int64_t*>(t->data), t->shape[0]};
}

// The call's tensors by schema name (int32 index arrays widened).
struct Tensors final : NamedTensors {
    std::map<std::string, std::vector<int64_t>> widened;
    void index(const char* n, const conform_tensor* t) {
        auto& v = widened[n];
        v.resize(static_cast<size_t>(t->shape[0]));
        for (int64_t i = 0; i < t->shape[0]; ++i)
            v[static_cast<size_t>(i)] = t->dtype == CONFORM_DTYPE_I32 ? static_cast<const int32_t*>(t->data)[i]
                                                                      : static_cast<const int64_t*>(t->data)[i];
        positions[n] = Positions{v.data(), t->shape[0]};
    }
};

// The config's core (the same fields in both versions).
template <class Config>
BlockConfig core_of(const Config* k) {
    BlockConfig c;
    c.d_model = k->d_model;
    c.n_heads = k->n_heads;
    c.n_kv_heads = k->n_kv_heads;
    c.head_dim = k->head_dim;
    c.ffn_dim = k->ffn_dim;
    c.rope_layout = k->rope_layout == CONFORM_ROPE_NEOX ? RopeLayout::neox : RopeLayout::interleaved;
    c.qk_norm = k->qk_norm != 0;
    c.rope_theta = k->rope_theta;
    c.norm_eps = k->norm_eps;
    c.rotary_dim = k->rotary_dim == k->head_dim ? 0 : k->rotary_dim;
    c.rope_scaling.type = static_cast<RopeScalingType>(k->rope_scaling);
    c.rope_scaling.factor = k->rope_factor;
    c.rope_scaling.low_freq_factor = k->rope_low_freq_factor;
    c.rope_scaling.high_freq_factor = k->rope_high_freq_factor;
    c.rope_scaling.original_max_position = k->rope_original_max_position;
    c.rope_scaling.beta_fast = k->rope_beta_fast;
    c.rope_scaling.beta_slow = k->rope_beta_slow;
    c.rope_scaling.attention_factor = k->rope_attention_factor;
    return c;
}

#ifdef ABI_V1
// 1.x: the twists in the fields its minor has (conform sends none beyond them).
BlockConfig config_of(const conform_config* k, Tensors& t) {
    BlockConfig c = core_of(k);
    c.page_size = k->page_size;
    c.qkv_bias = k->qkv_bias != 0;
    c.sliding_window = k->sliding_window;
    c.attn_logit_softcapping = k->attn_logit_softcapping;
    c.attn_sinks = k->sinks.data != nullptr;
    c.norm_plus_one = k->norm_plus_one != 0;
    c.kv_cache_dtype = static_cast<KvCacheDtype>(k->kv_cache_dtype);
    c.kv_scale_per_head = k->k_scale.data && k->k_scale.shape[0] > 1;
    c.hidden_act = k->hidden_act ? HiddenAct::gelu_tanh : HiddenAct::silu;
    c.attn_scale = k->attn_scale;
    c.sandwich_norm = k->sandwich_norm != 0;
    c.nope = k->nope != 0;
    c.attention_chunk_size = k->attention_chunk_size;
    if (k->sinks.data) t.ins["sinks"] = view(&k->sinks);
    if (k->k_scale.data) t.ins["k_scale"] = view(&k->k_scale), t.ins["v_scale"] = view(&k->v_scale);
    return c;
}
void weights(const conform_block_weights* w, Tensors& t) {
    const std::pair<const char*, const conform_tensor*> named[] = {
        {"attn_norm", &w->attn_norm}, {"wq", &w->wq}, {"wk", &w->wk}, {"wv", &w->wv}, {"wo", &w->wo},
        {"ffn_norm", &w->ffn_norm}, {"w1", &w->w1}, {"w3", &w->w3}, {"w2", &w->w2}, {"q_norm", &w->q_norm},
        {"k_norm", &w->k_norm}, {"bq", &w->bq}, {"bk", &w->bk}, {"bv", &w->bv},
        {"attn_post_norm", &w->attn_post_norm}, {"ffn_post_norm", &w->ffn_post_norm}};
    for (const auto& [name, tensor] : named) t.ins[name] = view(tensor);
}
#else
// 2: the twists by name, each set as its row reads it; their tensors too.
BlockConfig config_of(const conform_config* k, Tensors& t) {
    BlockConfig c = core_of(k);
    c.page_size = k->page_size;
    for (int64_t i = 0; i < k->n_params; ++i) {
        const conform_param& p = k->params[i];
        if (p.type == CONFORM_PARAM_TENSOR) {
            t.ins[p.name] = view(&p.t);
            continue;
        }
        // The sizes the frozen core lacks (the experts', latent attention's widths), parameters too.
        if (p.type == CONFORM_PARAM_INT)
            for_each_field(c, [&](const ConfigField& f, auto& v) {
                if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int64_t>)
                    if (std::strcmp(p.name, f.name) == 0 && !find_twist(p.name)) v = p.i;
            });
        const Twist* tw = find_twist(p.name);
        if (!tw) continue;  // a twist this build does not know
        double v = p.type == CONFORM_PARAM_INT ? static_cast<double>(p.i) : p.f;
        if (p.type == CONFORM_PARAM_NAME) v = *parse_twist_text(*tw, p.s, nullptr);
        set_twist_value(*tw, c, v);
    }
    return c;
}
void weights(const conform_block_weights* w, Tensors& t) {
    const std::pair<const char*, const conform_tensor*> named[] = {
        {"attn_norm", &w->attn_norm}, {"wq", &w->wq}, {"wk", &w->wk}, {"wv", &w->wv}, {"wo", &w->wo},
        {"ffn_norm", &w->ffn_norm}, {"w1", &w->w1}, {"w3", &w->w3}, {"w2", &w->w2}, {"q_norm", &w->q_norm},
        {"k_norm", &w->k_norm}};
    for (const auto& [name, tensor] : named) t.ins[name] = view(tensor);
}
#endif

// The op on conform's scalar implementation.
int32_t run(Op op, const BlockConfig& c, Tensors& t, char* msg, size_t cap, uint32_t* taps_written = nullptr) {
    try {
        static scalar::ScalarImpl impl("scalar-plugin");
        const TapSet w = call_op(impl, op, c, t);
        if (taps_written) *taps_written = w.bits;
        return CONFORM_OK;
    } catch (const std::exception& e) {
        std::snprintf(msg, cap, "%s", e.what());
        return CONFORM_ERR_INVALID_ARGUMENT;
    }
}

int32_t p_rmsnorm(const conform_config* k, const conform_tensor* x, const conform_tensor* w, const conform_tensor* out,
                  char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["weight"] = view(w), t.outs["out"] = mut(out);
    return run(Op::rmsnorm, c, t, msg, cap);
}
int32_t p_qk_norm(const conform_config* k, const conform_tensor* x, const conform_tensor* w, const conform_tensor* out,
                  char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["weight"] = view(w), t.outs["out"] = mut(out);
    return run(Op::qk_norm, c, t, msg, cap);
}
int32_t p_rope(const conform_config* k, const conform_tensor* x, const conform_tensor* pos, const conform_tensor* out,
               char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.positions["positions"] = positions(pos), t.outs["out"] = mut(out);
    return run(Op::rope, c, t, msg, cap);
}
int32_t p_attention(const conform_config* k, const conform_tensor* q, const conform_tensor* kk, const conform_tensor* v,
                    const conform_tensor* qp, const conform_tensor* kp, const conform_tensor* out, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["q"] = view(q), t.ins["k"] = view(kk), t.ins["v"] = view(v);
    t.positions["q_positions"] = positions(qp), t.positions["k_positions"] = positions(kp), t.outs["out"] = mut(out);
    return run(Op::attention, c, t, msg, cap);
}
int32_t p_swiglu(const conform_config* k, const conform_tensor* x, const conform_tensor* w1, const conform_tensor* w3,
                 const conform_tensor* w2, const conform_tensor* out, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["w1"] = view(w1), t.ins["w3"] = view(w3), t.ins["w2"] = view(w2), t.outs["out"] = mut(out);
    return run(Op::swiglu, c, t, msg, cap);
}
int32_t p_block(const conform_config* k, const conform_tensor* x, const conform_block_weights* w,
                const conform_tensor* pos, const conform_tensor* taps, uint32_t* written, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    weights(w, t);
    t.ins["x"] = view(x), t.positions["positions"] = positions(pos);
    for (Tap tap : kAllTaps) t.outs[to_string(tap)] = mut(&taps[static_cast<size_t>(tap)]);
    return run(Op::block, c, t, msg, cap, written);
}
int32_t p_decode(const conform_config* k, const conform_tensor* x, const conform_block_weights* w,
                 const conform_tensor* pos, int64_t prefill, const conform_tensor* out, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    weights(w, t);
    t.ins["x"] = view(x), t.positions["positions"] = positions(pos), t.outs["out"] = mut(out), t.pre = prefill;
    return run(Op::decode, c, t, msg, cap);
}
int32_t p_paged(const conform_config* k, const conform_tensor* q, const conform_tensor* kc, const conform_tensor* vc,
                const conform_tensor* qo, const conform_tensor* kvp, const conform_tensor* kvi,
                const conform_tensor* kvl, const conform_tensor* out, const conform_tensor* lse, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["q"] = view(q), t.ins["k_cache"] = view(kc), t.ins["v_cache"] = view(vc);
    t.index("qo_indptr", qo), t.index("kv_indptr", kvp), t.index("kv_indices", kvi), t.index("kv_last_page_len", kvl);
    t.outs["out"] = mut(out), t.outs["lse"] = mut(lse);
    return run(Op::paged_attention, c, t, msg, cap);
}

#ifndef ABI_V1
// SCALAR_PLUGIN_V2_BREAK: the mixture of experts' functions break the
// contract after computing their answer (cli/test_plugin.sh contract), as
// bad.c's rope does, where the inputs are many and stacked:
//   w13_write    writes the last element of the stacked experts w13
//   twist_write  writes the first element of the first twist tensor it was given
//   overrun      writes one element past the end of its output
//   crash        dereferences NULL
int32_t broken(const conform_config* k, const conform_tensor* stacked, const conform_tensor* out, int32_t rc) {
    const char* how = std::getenv("SCALAR_PLUGIN_V2_BREAK");
    if (!how || !*how) return rc;
    auto numel = [](const conform_tensor* t) {
        int64_t n = 1;
        for (int32_t d = 0; d < t->ndim; ++d) n *= t->shape[d];
        return n;
    };
    const std::string_view w(how);
    if (w == "w13_write" && stacked) static_cast<float*>(const_cast<void*>(stacked->data))[numel(stacked) - 1] += 1.0f;
    if (w == "twist_write")
        for (int64_t i = 0; i < k->n_params; ++i)
            if (k->params[i].type == CONFORM_PARAM_TENSOR) {
                static_cast<float*>(const_cast<void*>(k->params[i].t.data))[0] += 1.0f;
                break;
            }
    if (w == "overrun") static_cast<float*>(out->data)[numel(out)] = 0.0f;
    if (w == "crash") *static_cast<volatile float*>(nullptr) = 1.0f;
    return rc;
}

int32_t p_moe_route(const conform_config* k, const conform_tensor* x, const conform_tensor* wr,
                    const conform_tensor* route, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["w_router"] = view(wr), t.outs["out"] = mut(route);
    return broken(k, nullptr, route, run(Op::moe_route, c, t, msg, cap));
}
int32_t p_moe_experts(const conform_config* k, const conform_tensor* x, const conform_tensor* route,
                      const conform_tensor* w13, const conform_tensor* w2, const conform_tensor* out, char* msg,
                      size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["route"] = view(route), t.ins["w13"] = view(w13), t.ins["w2"] = view(w2);
    t.outs["out"] = mut(out);
    return broken(k, w13, out, run(Op::moe_experts, c, t, msg, cap));
}
int32_t p_moe(const conform_config* k, const conform_tensor* x, const conform_tensor* wr, const conform_tensor* w13,
              const conform_tensor* w2, const conform_tensor* route, const conform_tensor* out, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["x"] = view(x), t.ins["w_router"] = view(wr), t.ins["w13"] = view(w13), t.ins["w2"] = view(w2);
    t.outs["route"] = mut(route), t.outs["out"] = mut(out);
    return broken(k, w13, out, run(Op::moe, c, t, msg, cap));
}
int32_t p_mla(const conform_config* k, const conform_tensor* q, const conform_tensor* ckv, const conform_tensor* kpe,
              const conform_tensor* w, const conform_tensor* qo, const conform_tensor* kvp, const conform_tensor* kvi,
              const conform_tensor* kvl, const conform_tensor* out, const conform_tensor* lse, char* msg, size_t cap) {
    Tensors t;
    const BlockConfig c = config_of(k, t);
    t.ins["q"] = view(q), t.ins["ckv_cache"] = view(ckv), t.ins["kpe_cache"] = view(kpe), t.ins["w_kv_b"] = view(w);
    t.index("qo_indptr", qo), t.index("kv_indptr", kvp), t.index("kv_indices", kvi), t.index("kv_last_page_len", kvl);
    t.outs["out"] = mut(out), t.outs["lse"] = mut(lse);
    return run(Op::mla_attention, c, t, msg, cap);
}

// Every twist of the record, as an engine would list its own by name.
const char* const* every_twist() {
    static std::vector<const char*> names = [] {
        std::vector<const char*> n;
        for (const Twist& tw : twist_table()) n.push_back(tw.name);
        n.push_back(nullptr);
        return n;
    }();
    return names.data();
}
#endif

}  // namespace

extern "C" CONFORM_PLUGIN_EXPORT const conform_plugin* conform_plugin_get(void) {
    static conform_plugin table = [] {
        conform_plugin t{};
        t.abi_version = CONFORM_PLUGIN_ABI_VERSION;
        t.struct_size = sizeof(conform_plugin);
#ifdef ABI_V1
        t.name = "scalar-v1";
        t.description = "conform's scalar implementation behind plugin ABI 1.x (tests/plugins/scalar_plugin.cpp)";
        t.abi_minor = CONFORM_PLUGIN_ABI_MINOR;
        if (const char* m = std::getenv("SCALAR_PLUGIN_ABI_MINOR"); m && *m) {
            t.abi_minor = static_cast<uint32_t>(std::atoi(m));
            // A 1.0 table ends before abi_minor.
            if (t.abi_minor == 0) t.struct_size = static_cast<uint32_t>(offsetof(conform_plugin, abi_minor));
        }
#else
        t.name = "scalar-v2";
        t.description = "conform's scalar implementation behind plugin ABI 2 (tests/plugins/scalar_plugin.cpp)";
        t.twists = every_twist();
        // As built against plugin.h before the MoE functions were appended (cli/test_plugin.sh abi).
        if (const char* b = std::getenv("SCALAR_PLUGIN_V2_BEFORE_MOE"); b && *b == '1')
            t.struct_size = static_cast<uint32_t>(offsetof(conform_plugin, moe_route));
#endif
        t.dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32);
        t.rmsnorm = p_rmsnorm;
        t.rope = p_rope;
        t.qk_norm = p_qk_norm;
        t.attention = p_attention;
        t.swiglu = p_swiglu;
        t.block = p_block;
        t.decode = p_decode;
        t.paged_attention = p_paged;
#ifndef ABI_V1
        t.moe_route = p_moe_route;
        t.moe_experts = p_moe_experts;
        t.moe = p_moe;
        t.mla_attention = p_mla;
#endif
        return t;
    }();
    return &table;
}

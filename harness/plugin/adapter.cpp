// The plugin C ABI (conform/plugin.h, version 2) as an Implementation. A call
// comes whole (Implementation::call): the 1.1 core's fields from the config,
// every twist the op reads as a named parameter from its row of the twist
// record, every tensor by its schema name (a twist's as a parameter). So a
// twist added to the record reaches a plugin with no code here. Version 1's
// tables are adapter_v1.cpp's.
#include "plugin/adapter.h"

#include <cmath>
#include <cstddef>
#include <deque>
#include <optional>

#include "plugin/call.h"

namespace conform::plugin {

namespace detail {
thread_local double g_kernel_seconds = 0;
}  // namespace detail

using detail::Call;
using detail::timed;

namespace {

// The core's fields (every version 2 config has them, whatever the op).
conform_config core_of(DType dtype, const BlockConfig& c) {
    conform_config k{};
    detail::core_fields(k, dtype, c);
    return k;
}

// The functions appended to version 2's table (the mixture of experts',
// latent attention's): there only where the table's struct_size covers them.
bool covers(const conform_plugin& t, size_t end) { return t.struct_size >= end; }
std::optional<bool> has_appended(const conform_plugin& t, Op op) {
    switch (op) {
        case Op::moe: return covers(t, offsetof(conform_plugin, moe) + sizeof(t.moe)) && t.moe != nullptr;
        case Op::moe_route:
            return covers(t, offsetof(conform_plugin, moe_route) + sizeof(t.moe_route)) && t.moe_route != nullptr;
        case Op::moe_experts:
            return covers(t, offsetof(conform_plugin, moe_experts) + sizeof(t.moe_experts)) && t.moe_experts != nullptr;
        case Op::mla_attention:
            return covers(t, offsetof(conform_plugin, mla_attention) + sizeof(t.mla_attention)) &&
                   t.mla_attention != nullptr;
        default: return std::nullopt;  // in the table from the start
    }
}

// The frozen core of version 2's config (conform_config's own fields); every
// other core field an op reads (the experts' sizes, latent attention's
// widths) travels as a parameter, as a twist does.
bool in_frozen_core(std::string_view f) {
    for (const char* k : {"d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "rope_layout", "rope_theta",
                          "qk_norm", "norm_eps", "page_size"})
        if (f == k) return true;
    return false;
}

// The names a twist's value travels as: a choice's, kept alive for the call.
const char* choice_name(const Twist& t, const BlockConfig& c) {
    static const std::vector<std::vector<std::string>> names = [] {
        std::vector<std::vector<std::string>> n;
        for (const Twist& r : twist_table()) n.push_back(twist_choices(r));
        return n;
    }();
    return names[twist_index(t)][static_cast<size_t>(twist_value(t, c))].c_str();
}

class Adapter final : public Implementation {
   public:
    Adapter(std::shared_ptr<const Library> lib, DType dtype) : lib_(std::move(lib)), t_(*lib_->table), dtype_(dtype) {}

    std::string name() const override { return lib_->name; }
    DType dtype() const override { return dtype_; }
    bool implements(Op op) const override { return plugin::implements(*lib_, op); }
    ActQuant activation_quant(Op op) const override {
        return implements(op) ? declared_act_quant(*lib_, op) : ActQuant::none;
    }
    TwistSet twists(Op op) const override { return declared_twists(*lib_, op); }

    Support supports(Op op, const BlockConfig& config) const override {
        if (!implements(op)) return Support::no(lib_->name + " does not implement " + to_string(op));
        if (t_.supports == nullptr) return Support::yes();
        Params p(op, dtype_, config);
        char msg[1024] = "";
        const int32_t status = t_.supports(static_cast<uint32_t>(op), &p.k, msg, sizeof msg);
        msg[sizeof msg - 1] = '\0';
        if (status == CONFORM_OK) return Support::yes();
        return Support::no(msg[0] ? std::string(msg) : status_name(status));
    }

    bool call(Op op, const BlockConfig& c, CallTensors& tensors, TapSet& written) override {
        const char* opname = to_string(op);
        Call call(opname, dtype_);
        Params p(op, dtype_, c);
        // Every tensor a twist that is on brings, as a parameter (1-D where it is one row).
        for (const Twist& t : twist_table())
            if (op_info(op).reads(t) && twist_on(t, c))
                for (const char* name : t.tensors)
                    if (const View v = tensors.in(name); v.data) p.tensor(name, call.in(name, v, v.rows == 1));
        p.finish();
        auto in = [&](const char* name) {
            const TensorSpec* s = op_info(op).input(name);
            return call.in(name, tensors.in(name), s && s->rows == Dim::one);
        };
        auto pos = [&](const char* name) { return call.positions(name, tensors.pos(name)); };
        auto idx = [&](const char* name) { return call.indices(name, tensors.pos(name)); };
        auto out = [&](const char* name) { return call.out(name, tensors.out(name)); };
        const conform_config* k = &p.k;
        char* msg = call.msg();
        const size_t cap = call.msg_cap();
        switch (op) {  // the table's function per op: one signature each (conform/plugin.h)
            case Op::rmsnorm: {
                const conform_tensor x = in("x"), w = in("weight"), o = out("out");
                call.finish(timed([&] { return t_.rmsnorm(k, &x, &w, &o, msg, cap); }));
                break;
            }
            case Op::rope: {
                const conform_tensor x = in("x"), ps = pos("positions"), o = out("out");
                call.finish(timed([&] { return t_.rope(k, &x, &ps, &o, msg, cap); }));
                break;
            }
            case Op::qk_norm: {
                const conform_tensor x = in("x"), w = in("weight"), o = out("out");
                call.finish(timed([&] { return t_.qk_norm(k, &x, &w, &o, msg, cap); }));
                break;
            }
            case Op::attention: {
                const conform_tensor q = in("q"), kk = in("k"), v = in("v"), qp = pos("q_positions"),
                                     kp = pos("k_positions"), o = out("out");
                call.finish(timed([&] { return t_.attention(k, &q, &kk, &v, &qp, &kp, &o, msg, cap); }));
                break;
            }
            case Op::swiglu: {
                const conform_tensor x = in("x"), w1 = in("w1"), w3 = in("w3"), w2 = in("w2"), o = out("out");
                call.finish(timed([&] { return t_.swiglu(k, &x, &w1, &w3, &w2, &o, msg, cap); }));
                break;
            }
            case Op::block: {
                const conform_block_weights w = weights(in);
                const conform_tensor x = in("x"), ps = pos("positions");
                conform_tensor taps[CONFORM_TAP_COUNT];
                static_assert(CONFORM_TAP_COUNT == kAllTaps.size(), "plugin.h's taps are conform/ops.h's");
                for (Tap tap : kAllTaps) taps[static_cast<size_t>(tap)] = out(to_string(tap));
                uint32_t bits = 0;
                call.finish(timed([&] { return t_.block(k, &x, &w, &ps, taps, &bits, msg, cap); }));
                for (Tap tap : kAllTaps) {
                    if (!((bits >> static_cast<unsigned>(tap)) & 1u)) continue;
                    if (tensors.out(to_string(tap)).data == nullptr)
                        throw ImplError(std::string("block reported tap '") + to_string(tap) +
                                        "' as written, but it was not requested (its data was NULL)");
                    written.add(tap);
                }
                break;
            }
            case Op::decode: {
                const conform_block_weights w = weights(in);
                const conform_tensor x = in("x"), ps = pos("positions"), o = out("out");
                const int64_t prefill = tensors.prefill();
                call.finish(timed([&] { return t_.decode(k, &x, &w, &ps, prefill, &o, msg, cap); }));
                break;
            }
            case Op::paged_attention: {
                const conform_tensor q = in("q"), kc = in("k_cache"), vc = in("v_cache"), qo = idx("qo_indptr"),
                                     kp = idx("kv_indptr"), ki = idx("kv_indices"), kl = idx("kv_last_page_len"),
                                     o = out("out"), l = out("lse");
                call.finish(timed([&] { return t_.paged_attention(k, &q, &kc, &vc, &qo, &kp, &ki, &kl, &o, &l, msg, cap); }));
                break;
            }
            case Op::moe_route: {
                const conform_tensor x = in("x"), wr = in("w_router"), r = out("out");
                call.finish(timed([&] { return t_.moe_route(k, &x, &wr, &r, msg, cap); }));
                break;
            }
            case Op::moe_experts: {
                const conform_tensor x = in("x"), r = in("route"), w13 = in("w13"), w2 = in("w2"), o = out("out");
                call.finish(timed([&] { return t_.moe_experts(k, &x, &r, &w13, &w2, &o, msg, cap); }));
                break;
            }
            case Op::moe: {
                const conform_tensor x = in("x"), wr = in("w_router"), w13 = in("w13"), w2 = in("w2"),
                                     r = out("route"), o = out("out");
                call.finish(timed([&] { return t_.moe(k, &x, &wr, &w13, &w2, &r, &o, msg, cap); }));
                break;
            }
            case Op::mla_attention: {
                const conform_tensor q = in("q"), ckv = in("ckv_cache"), kpe = in("kpe_cache"), w = in("w_kv_b"),
                                     qo = idx("qo_indptr"), kp = idx("kv_indptr"), ki = idx("kv_indices"),
                                     kl = idx("kv_last_page_len"), o = out("out"), l = out("lse");
                call.finish(timed(
                    [&] { return t_.mla_attention(k, &q, &ckv, &kpe, &w, &qo, &kp, &ki, &kl, &o, &l, msg, cap); }));
                break;
            }
        }
        return true;
    }

    // Every call comes whole (call_op): the typed methods are never asked.
    [[noreturn]] void typed() const { throw ImplError(lib_->name + ": a plugin is called through call_op"); }
    void rmsnorm(View, View, const RmsNormParams&, MutView) override { typed(); }
    void rope(View, Positions, const RopeParams&, MutView) override { typed(); }
    void qk_norm(View, View, const QkNormParams&, MutView) override { typed(); }
    void attention(View, View, View, Positions, Positions, const AttentionParams&, MutView) override { typed(); }
    void swiglu(View, View, View, View, const SwigluParams&, MutView) override { typed(); }
    TapSet block(View, const BlockWeights&, Positions, const BlockConfig&, BlockOutputs&) override { typed(); }
    void decode(View, const BlockWeights&, Positions, int64_t, const BlockConfig&, MutView) override { typed(); }
    void paged_attention(View, View, View, const PagedIndex&, const PagedAttentionParams&, MutView, MutView) override {
        typed();
    }

   private:
    // A call's config: the core, and every twist the op reads by name with its value.
    struct Params {
        conform_config k;
        std::deque<conform_param> list;
        Params(Op op, DType dtype, const BlockConfig& c) : k(core_of(dtype, c)) {
            for (const Twist& t : twist_table()) {
                if (t.core || !op_info(op).reads(t)) continue;
                conform_param p{};
                p.name = t.name;
                switch (t.kind) {
                    case TwistKind::toggle:
                    case TwistKind::count: p.type = CONFORM_PARAM_INT, p.i = static_cast<int64_t>(twist_value(t, c)); break;
                    case TwistKind::number: p.type = CONFORM_PARAM_FLOAT, p.f = twist_value(t, c); break;
                    case TwistKind::choice: p.type = CONFORM_PARAM_NAME, p.s = choice_name(t, c); break;
                }
                list.push_back(p);
            }
            // The sizes the op reads that are not twists and not in the frozen core.
            for (const char* f : op_info(op).config) {
                if (in_frozen_core(f)) continue;
                for_each_field(c, [&](const ConfigField& field, const auto& v) {
                    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, int64_t>) {
                        if (std::string_view(field.name) != f) return;
                        conform_param q{};
                        q.name = field.name;
                        q.type = CONFORM_PARAM_INT;
                        q.i = v;
                        list.push_back(q);
                    }
                });
            }
            finish();
        }
        void tensor(const char* name, const conform_tensor& t) {
            conform_param p{};
            p.name = name;
            p.type = CONFORM_PARAM_TENSOR;
            p.t = t;
            list.push_back(p);
        }
        // The parameters contiguous, as the ABI passes them.
        void finish() {
            flat.assign(list.begin(), list.end());
            k.params = flat.data();
            k.n_params = static_cast<int64_t>(flat.size());
        }
        std::vector<conform_param> flat;
    };

    template <class In>
    static conform_block_weights weights(In& in) {
        conform_block_weights b{};
        b.struct_size = sizeof b;
        b.attn_norm = in("attn_norm");
        b.wq = in("wq");
        b.wk = in("wk");
        b.wv = in("wv");
        b.wo = in("wo");
        b.ffn_norm = in("ffn_norm");
        b.w1 = in("w1");
        b.w3 = in("w3");
        b.w2 = in("w2");
        b.q_norm = in("q_norm");
        b.k_norm = in("k_norm");
        return b;
    }

    std::shared_ptr<const Library> lib_;
    const conform_plugin& t_;
    DType dtype_;
};

}  // namespace

bool implements(const Library& l, Op op) {
    if (l.abi == 1) return implements_v1(*l.table_v1, op);
    if (const std::optional<bool> appended = has_appended(*l.table, op)) return *appended;
    return detail::has_function(*l.table, op);
}

ActQuant declared_act_quant(const Library& l, Op op) {
    if (l.abi == 1) return declared_act_quant_v1(*l.table_v1, op);
    const conform_plugin& t = *l.table;
    if (t.activation_quant == nullptr) return ActQuant::none;
    return detail::act_quant_of(t.activation_quant(static_cast<uint32_t>(op)), op);
}

TwistSet declared_twists(const Library& l, Op op) {
    if (l.abi == 1) return declared_twists_v1(*l.table_v1, op);
    TwistSet s = TwistSet::none();
    if (l.table->twists == nullptr) return s;
    for (size_t i = 0; l.table->twists[i] != nullptr; ++i) {
        if (i >= 1024) throw ImplError("its table's twists list has no NULL end within 1024 entries");
        std::string entry = l.table->twists[i];
        if (entry.size() > 200) throw ImplError("its table's twists[" + std::to_string(i) + "] is over 200 characters");
        // "op:twist[=value]": for that op only.
        if (const auto colon = entry.find(':'); colon != std::string::npos) {
            const auto for_op = parse_op(entry.substr(0, colon));
            if (!for_op)
                throw ImplError("its table's twists[" + std::to_string(i) + "] '" + entry + "': '" + entry.substr(0, colon) +
                                "' is not an op (" + op_names() + ")");
            if (*for_op != op) continue;
            entry = entry.substr(colon + 1);
        }
        std::string why;
        if (!s.declare(entry, &why)) throw ImplError("its table's twists[" + std::to_string(i) + "]: " + why);
    }
    return s;
}

double last_kernel_seconds() { return detail::g_kernel_seconds; }

uint32_t dtype_code(DType d) {
    switch (d) {
        case DType::f32: return CONFORM_DTYPE_F32;
        case DType::bf16: return CONFORM_DTYPE_BF16;
        case DType::f16: return CONFORM_DTYPE_F16;
    }
    return CONFORM_DTYPE_F32;
}

std::string status_name(int32_t code) {
    switch (code) {
        case CONFORM_OK: return "CONFORM_OK";
        case CONFORM_ERR_UNSUPPORTED: return "CONFORM_ERR_UNSUPPORTED";
        case CONFORM_ERR_INVALID_ARGUMENT: return "CONFORM_ERR_INVALID_ARGUMENT";
        case CONFORM_ERR_INTERNAL: return "CONFORM_ERR_INTERNAL";
    }
    return "status " + std::to_string(code);
}

std::string ops_of(const Library& l) {
    std::string s;
    for (Op op : kAllOps)
        if (implements(l, op)) s += (s.empty() ? "" : ", ") + std::string(to_string(op));
    return s;
}

std::string dtypes_of(const Library& l) {
    std::string s;
    for (DType d : {DType::f32, DType::bf16, DType::f16})
        if (l.dtypes & CONFORM_DTYPE_BIT(dtype_code(d))) s += (s.empty() ? "" : ", ") + std::string(to_string(d));
    return s;
}

std::unique_ptr<Implementation> make_adapter(std::shared_ptr<const Library> lib, DType dtype) {
    if (!(lib->dtypes & CONFORM_DTYPE_BIT(dtype_code(dtype))))
        throw ImplError(lib->name + " runs in " + dtypes_of(*lib) + " only, not " + to_string(dtype) +
                        " (the dtypes in its conform_plugin table)");
    if (lib->abi == 1) return make_adapter_v1(std::move(lib), dtype);
    return std::make_unique<Adapter>(std::move(lib), dtype);
}

}  // namespace conform::plugin

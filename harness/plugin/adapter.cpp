#include "plugin/adapter.h"

#include "conform/dtype.h"

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <vector>

namespace conform::plugin {

namespace {

thread_local double g_kernel_seconds = 0;

// The plugin's function, timed by itself.
template <typename F>
int32_t timed(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t status = f();
    g_kernel_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return status;
}

// ---- 16-bit floats ---------------------------------------------------------------
// The harness rounds inputs to the run's dtype before an implementation sees
// them, so the conversions (conform/dtype.h) are exact on inputs; on anything
// else they round to nearest even, as a cast in the plugin would.

// Signalling NaNs: no arithmetic produces them, so an element still holding
// one was not written.
uint16_t poison16(DType d) { return d == DType::bf16 ? 0x7F8Du : 0x7C8Du; }
uint16_t sentinel16(DType d) { return d == DType::bf16 ? 0x7FA5u : 0x7CA5u; }
constexpr size_t kFront16 = 32, kBack16 = 64;  // sentinel elements around a staged 16-bit output

// A digest of an input's bytes, to notice a plugin writing into its inputs.
uint64_t digest(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= bytes; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

conform_tensor descriptor(void* data, uint32_t dtype, int64_t rows, int64_t cols) {
    conform_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.ndim = 2;
    t.shape[0] = rows;
    t.shape[1] = cols;
    t.strides[0] = cols;
    t.strides[1] = 1;
    return t;
}
conform_tensor descriptor_1d(void* data, uint32_t dtype, int64_t n) {
    conform_tensor t{};
    t.data = data;
    t.dtype = dtype;
    t.ndim = 1;
    t.shape[0] = n;
    t.strides[0] = 1;
    return t;
}

// The tensors and buffers of one plugin call, and the checks after it.
class Call {
   public:
    Call(const char* op, DType dtype) : op_(op), dtype_(dtype) { msg_[0] = '\0'; }

    // A float input, as a [rows, cols] matrix or (vector = true) a [n] vector.
    conform_tensor in(const char* name, View v, bool vector = false) {
        void* data = const_cast<float*>(v.data);  // the ABI's void*: inputs are read-only by contract, checked in finish()
        size_t bytes = static_cast<size_t>(v.size()) * sizeof(float);
        if (dtype_ != DType::f32 && v.data != nullptr) {
            auto& buf = converted_.emplace_back(static_cast<size_t>(v.size()));
            for (int64_t i = 0; i < v.size(); ++i)
                buf[static_cast<size_t>(i)] = dtype_ == DType::bf16 ? bf16_bits(v.data[i]) : f16_bits(v.data[i]);
            data = buf.data();
            bytes = buf.size() * sizeof(uint16_t);
        }
        if (data != nullptr) inputs_.push_back({name, data, bytes, digest(data, bytes)});
        return vector ? descriptor_1d(data, dtype_code(dtype_), v.size()) : descriptor(data, dtype_code(dtype_), v.rows, v.cols);
    }

    // An index array, narrowed to int32 as the ABI carries it (FlashInfer's
    // and vLLM's kernels take int32); a value that does not fit is refused.
    conform_tensor indices(const char* name, Positions p) {
        auto& buf = indices_.emplace_back(static_cast<size_t>(p.n));
        for (int64_t i = 0; i < p.n; ++i) {
            if (p.data[i] < INT32_MIN || p.data[i] > INT32_MAX)
                throw ImplError(std::string(op_) + ": " + name + "[" + std::to_string(i) + "] = " +
                                std::to_string(p.data[i]) + " does not fit the ABI's int32");
            buf[static_cast<size_t>(i)] = static_cast<int32_t>(p.data[i]);
        }
        inputs_.push_back({name, buf.data(), buf.size() * sizeof(int32_t), digest(buf.data(), buf.size() * sizeof(int32_t))});
        return descriptor_1d(buf.data(), CONFORM_DTYPE_I32, p.n);
    }

    conform_tensor positions(const char* name, Positions p) {
        void* data = const_cast<int64_t*>(p.data);
        const size_t bytes = static_cast<size_t>(p.n) * sizeof(int64_t);
        if (data != nullptr) inputs_.push_back({name, data, bytes, digest(data, bytes)});
        return descriptor_1d(data, CONFORM_DTYPE_I64, p.n);
    }

    // An output. float32: the harness's own guarded buffer. 16-bit: a staging
    // buffer, poisoned and guarded like the harness's, converted back in finish().
    conform_tensor out(const char* name, MutView v) {
        if (v.data == nullptr) return descriptor(nullptr, dtype_code(dtype_), v.rows, v.cols);
        if (dtype_ == DType::f32) return descriptor(v.data, CONFORM_DTYPE_F32, v.rows, v.cols);
        Staged& s = staged_.emplace_back();
        s.name = name;
        s.dst = v;
        const size_t n = static_cast<size_t>(v.size());
        s.buf.assign(kFront16 + n + kBack16, sentinel16(dtype_));
        std::fill(s.buf.begin() + kFront16, s.buf.begin() + kFront16 + static_cast<std::ptrdiff_t>(n), poison16(dtype_));
        return descriptor(s.buf.data() + kFront16, dtype_code(dtype_), v.rows, v.cols);
    }

    char* msg() { return msg_; }
    size_t msg_cap() const { return sizeof msg_; }

    // Throws ImplError for an error status, a broken staging guard or a dirtied input;
    // otherwise delivers 16-bit outputs into the harness's buffers.
    void finish(int32_t status) {
        msg_[sizeof msg_ - 1] = '\0';
        if (status != CONFORM_OK)
            throw ImplError(std::string(op_) + " returned " + status_name(status) + ": " +
                            (msg_[0] ? std::string(msg_) : std::string("(no message)")));
        for (const Staged& s : staged_) {
            const size_t n = static_cast<size_t>(s.dst.size());
            for (size_t i = kFront16; i-- > 0;)
                if (s.buf[i] != sentinel16(dtype_))
                    throw ImplError("wrote before the start of output '" + s.name + "' (element " +
                                    std::to_string(static_cast<long long>(i) - static_cast<long long>(kFront16)) +
                                    " was overwritten)");
            for (size_t i = 0; i < kBack16; ++i)
                if (s.buf[kFront16 + n + i] != sentinel16(dtype_))
                    throw ImplError("wrote past the end of output '" + s.name + "' (sentinel " + std::to_string(i) +
                                    " after its " + std::to_string(n) + " elements was overwritten)");
        }
        for (const Input& in : inputs_)
            if (digest(in.data, in.bytes) != in.digest)
                throw ImplError(std::string(op_) + " wrote into its input '" + in.name + "' (inputs are read-only)");
        // An element left poisoned is not delivered: the harness's buffer keeps
        // its own poison there, and run_impl reports it as unwritten.
        for (const Staged& s : staged_)
            for (size_t i = 0; i < static_cast<size_t>(s.dst.size()); ++i) {
                const uint16_t h = s.buf[kFront16 + i];
                if (h != poison16(dtype_)) s.dst.data[i] = dtype_ == DType::bf16 ? bf16_float(h) : f16_float(h);
            }
    }

   private:
    struct Input {
        std::string name;
        const void* data;
        size_t bytes;
        uint64_t digest;
    };
    struct Staged {
        std::string name;
        MutView dst;
        std::vector<uint16_t> buf;
    };

    const char* op_;
    DType dtype_;
    std::deque<std::vector<uint16_t>> converted_;
    std::deque<std::vector<int32_t>> indices_;
    std::vector<Input> inputs_;
    std::deque<Staged> staged_;
    char msg_[2048];
};

uint32_t scaling_code(RopeScalingType t) {
    switch (t) {
        case RopeScalingType::none: return CONFORM_ROPE_SCALING_NONE;
        case RopeScalingType::linear: return CONFORM_ROPE_SCALING_LINEAR;
        case RopeScalingType::llama3: return CONFORM_ROPE_SCALING_LLAMA3;
        case RopeScalingType::yarn: return CONFORM_ROPE_SCALING_YARN;
        case RopeScalingType::dynamic: return CONFORM_ROPE_SCALING_DYNAMIC;
    }
    return CONFORM_ROPE_SCALING_NONE;
}

// ABI 1.1's RoPE fields, from RopeParams (every config has them, unscaled ones too).
void rope_fields(conform_config& k, int64_t rotary, const RopeScaling& s) {
    k.rotary_dim = rotary;
    k.rope_scaling = scaling_code(s.type);
    k.rope_factor = s.factor;
    k.rope_low_freq_factor = s.low_freq_factor;
    k.rope_high_freq_factor = s.high_freq_factor;
    k.rope_original_max_position = s.original_max_position;
    k.rope_beta_fast = s.beta_fast;
    k.rope_beta_slow = s.beta_slow;
    k.rope_attention_factor = s.attention_factor;
}

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
    k.struct_size = sizeof k;
    k.dtype = dtype_code(dtype);
    rope_fields(k, c.rotary(), c.rope_scaling);
    k.d_model = c.d_model;
    k.n_heads = c.n_heads;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    k.ffn_dim = c.ffn_dim;
    k.rope_layout = c.rope_layout == RopeLayout::neox ? CONFORM_ROPE_NEOX : CONFORM_ROPE_INTERLEAVED;
    k.qk_norm = c.qk_norm ? 1u : 0u;
    k.rope_theta = c.rope_theta;
    k.norm_eps = c.norm_eps;
    k.page_size = c.page_size;
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
// config's RoPE fits the plugin's ABI.
bool knows_1_1(const conform_plugin& t) {
    return t.struct_size >= offsetof(conform_plugin, abi_minor) + sizeof(uint32_t) && t.abi_minor >= 1;
}
std::string rope_beyond_abi(const conform_plugin& t, const BlockConfig& c) {
    if (knows_1_1(t)) return "";
    if (c.rope_scaling.type != RopeScalingType::none)
        return std::string("built against plugin ABI 1.0, which has no rope_scaling fields: cannot pass ") +
               to_string(c.rope_scaling.type) + " scaling to it (rebuild against ABI 1.1)";
    if (c.rotary() != c.head_dim)
        return "built against plugin ABI 1.0, which has no rotary_dim field: cannot pass partial rotary (rotary_dim " +
               std::to_string(c.rotary_dim) + " of head_dim " + std::to_string(c.head_dim) + ") to it (rebuild against ABI 1.1)";
    return "";
}

// The served variants each came with a minor version: a plugin built before
// it has no field for the twist, would drop it, and would fail for a reason
// that is not its own. Empty when every twist the op uses and the config
// turns on fits the plugin's ABI.
std::string variant_beyond_abi(const conform_plugin& t, Op op, const BlockConfig& c) {
    struct Twist {
        Convention bit;
        bool on;
        uint32_t minor;     // the ABI minor that added its field
        const char* field;  // in conform_config
        const char* what;
    };
    const Twist twists[] = {
        {kQkvBias, c.qkv_bias, 3, "qkv_bias", "projection biases"},
        {kWindow, c.sliding_window > 0, 3, "sliding_window", "a sliding window"},
        {kSoftcap, c.attn_logit_softcapping > 0, 4, "attn_logit_softcapping", "a soft-cap"},
        {kSinks, c.attn_sinks, 4, "sinks", "attention sinks"},
        {kNormPlusOne, c.norm_plus_one, 5, "norm_plus_one", "Gemma's (1 + w) norms"},
        {kFp8Cache, c.kv_cache_dtype != KvCacheDtype::none, 6, "kv_cache_dtype", "an FP8 KV cache"},
        // decode's FP8 cache came later than paged_attention's (kKvCache: decode alone)
        {kKvCache, c.kv_cache_dtype != KvCacheDtype::none, 8, "kv_cache_dtype for decode", "an FP8 KV cache to decode"},
        {kGeglu, c.hidden_act != HiddenAct::silu, 9, "hidden_act", "a GeGLU FFN"},
        {kAttnScale, c.attn_scale > 0, 10, "attn_scale", "a score scale other than 1/sqrt(head_dim)"},
        {kSandwichNorm, c.sandwich_norm, 11, "sandwich_norm", "Gemma 2/3's sandwich norms"},
        {kNope, c.nope, 12, "nope", "a layer without RoPE (NoPE)"},
        {kChunk, c.attention_chunk_size > 0, 13, "attention_chunk_size", "chunked attention"},
    };
    const uint32_t minor = knows_1_1(t) ? t.abi_minor : 0;
    for (const Twist& w : twists)
        if (w.on && minor < w.minor && op_info(op).uses(w.bit))
            return "built against plugin ABI 1." + std::to_string(minor) + ", which has no " + w.field +
                   ": cannot pass " + w.what + " to it (rebuild against ABI 1." + std::to_string(w.minor) + ")";
    return "";
}

}  // namespace

bool knows_1_2(const conform_plugin& t) {
    return t.struct_size >= offsetof(conform_plugin, paged_attention) + sizeof(t.paged_attention) && t.abi_minor >= 2;
}

ActQuant declared_act_quant(const conform_plugin& t, Op op) {
    const bool knows_1_7 = t.struct_size >= offsetof(conform_plugin, activation_quant) + sizeof(t.activation_quant) &&
                           knows_1_1(t) && t.abi_minor >= 7;
    if (!knows_1_7 || t.activation_quant == nullptr) return ActQuant::none;
    switch (t.activation_quant(static_cast<uint32_t>(op))) {
        case CONFORM_ACT_QUANT_NONE: return ActQuant::none;
        case CONFORM_ACT_QUANT_Q8_0: return ActQuant::q8_0;
        case CONFORM_ACT_QUANT_Q8_K: return ActQuant::q8_k;
    }
    throw ImplError(std::string("activation_quant(") + to_string(op) + ") returned " +
                      std::to_string(t.activation_quant(static_cast<uint32_t>(op))) +
                      ", not a CONFORM_ACT_QUANT_* (0 none, 1 q8_0, 2 q8_k)");
}

bool implements(const conform_plugin& t, Op op) {
    switch (op) {
        case Op::rmsnorm: return t.rmsnorm != nullptr;
        case Op::rope: return t.rope != nullptr;
        case Op::qk_norm: return t.qk_norm != nullptr;
        case Op::attention: return t.attention != nullptr;
        case Op::swiglu: return t.swiglu != nullptr;
        case Op::block: return t.block != nullptr;
        case Op::decode: return t.decode != nullptr;
        case Op::paged_attention: return knows_1_2(t) && t.paged_attention != nullptr;  // a 1.0 / 1.1 table ends before it
    }
    return false;
}

namespace {

class Adapter final : public Implementation {
   public:
    Adapter(std::shared_ptr<const Library> lib, DType dtype) : lib_(std::move(lib)), t_(*lib_->table), dtype_(dtype) {}

    std::string name() const override { return lib_->name; }
    DType dtype() const override { return dtype_; }
    // The table's answer, checked when the library was loaded (check_table).
    ActQuant activation_quant(Op op) const override {
        return implements(t_, op) ? declared_act_quant(t_, op) : ActQuant::none;
    }

    Support supports(Op op, const BlockConfig& config) const override {
        if (!implements(t_, op)) return Support::no(lib_->name + " does not implement " + to_string(op));
        if (const std::string why = rope_beyond_abi(t_, config); !why.empty() &&
            op_info(op).uses(kRope))
            return Support::no(why);
        if (const std::string why = variant_beyond_abi(t_, op, config); !why.empty()) return Support::no(why);
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
        BlockConfig c;
        c.head_dim = p.head_dim;
        c.rope_scaling = p.scaling;
        c.rotary_dim = p.rotary_dim;
        if (const std::string why = rope_beyond_abi(t_, c); !why.empty()) throw ImplError(why);
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

double last_kernel_seconds() { return g_kernel_seconds; }

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

std::string ops_of(const conform_plugin& t) {
    std::string s;
    for (Op op : kAllOps)
        if (implements(t, op)) s += (s.empty() ? "" : ", ") + std::string(to_string(op));
    return s;
}

std::string dtypes_of(const conform_plugin& t) {
    std::string s;
    for (DType d : {DType::f32, DType::bf16, DType::f16})
        if (t.dtypes & CONFORM_DTYPE_BIT(dtype_code(d))) s += (s.empty() ? "" : ", ") + std::string(to_string(d));
    return s;
}

std::unique_ptr<Implementation> make_adapter(std::shared_ptr<const Library> lib, DType dtype) {
    if (!(lib->table->dtypes & CONFORM_DTYPE_BIT(dtype_code(dtype))))
        throw ImplError(lib->name + " runs in " + dtypes_of(*lib->table) + " only, not " + to_string(dtype) +
                        " (the dtypes in its conform_plugin table)");
    return std::make_unique<Adapter>(std::move(lib), dtype);
}

}  // namespace conform::plugin

// harness/plugin/call.h — one plugin call's tensors and its checks, for
// both ABI versions' adapters (adapter.cpp: 2; adapter_v1.cpp: 1.x): inputs
// described (16-bit ones converted, every one digested), outputs staged and
// guarded, the status and the guards checked after the call.
#pragma once

#include <chrono>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/dtype.h"
#include "conform/impl.h"
#include "conform/plugin_types.h"

namespace conform::plugin {

uint32_t dtype_code(DType d);
std::string status_name(int32_t code);

namespace detail {
// Whether a table (either version's: the functions share names) has op's function.
template <typename Table>
bool has_function(const Table& t, Op op) {
    switch (op) {
        case Op::rmsnorm: return t.rmsnorm != nullptr;
        case Op::rope: return t.rope != nullptr;
        case Op::qk_norm: return t.qk_norm != nullptr;
        case Op::attention: return t.attention != nullptr;
        case Op::swiglu: return t.swiglu != nullptr;
        case Op::block: return t.block != nullptr;
        case Op::decode: return t.decode != nullptr;
        case Op::paged_attention: return t.paged_attention != nullptr;
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts:
        case Op::mla_attention: return false;  // version 2's are appended (adapter.cpp has_appended); 1.x has none
    }
    return false;
}

// A table's activation_quant(op) answer, checked.
inline ActQuant act_quant_of(uint32_t code, Op op) {
    switch (code) {
        case CONFORM_ACT_QUANT_NONE: return ActQuant::none;
        case CONFORM_ACT_QUANT_Q8_0: return ActQuant::q8_0;
        case CONFORM_ACT_QUANT_Q8_K: return ActQuant::q8_k;
    }
    throw ImplError(std::string("activation_quant(") + to_string(op) + ") returned " + std::to_string(code) +
                    ", not a CONFORM_ACT_QUANT_* (0 none, 1 q8_0, 2 q8_k)");
}

// RoPE's rotary width and scaling, as both versions' configs carry them.
static_assert(static_cast<uint32_t>(RopeScalingType::yarn) == CONFORM_ROPE_SCALING_YARN &&
                  static_cast<uint32_t>(RopeScalingType::dynamic) == CONFORM_ROPE_SCALING_DYNAMIC,
              "RopeScalingType and CONFORM_ROPE_SCALING_* share their order");
template <typename Config>
void rope_fields(Config& k, int64_t rotary, const RopeScaling& s) {
    k.rotary_dim = rotary;
    k.rope_scaling = static_cast<uint32_t>(s.type);
    k.rope_factor = s.factor;
    k.rope_low_freq_factor = s.low_freq_factor;
    k.rope_high_freq_factor = s.high_freq_factor;
    k.rope_original_max_position = s.original_max_position;
    k.rope_beta_fast = s.beta_fast;
    k.rope_beta_slow = s.beta_slow;
    k.rope_attention_factor = s.attention_factor;
}

// The 1.1 core, the same fields in both versions' configs (frozen): the
// shape, the RoPE and its scaling, the norm's epsilon, the page size.
template <typename Config>
void core_fields(Config& k, DType dtype, const BlockConfig& c) {
    k.struct_size = sizeof k;
    k.dtype = dtype_code(dtype);
    k.d_model = c.d_model;
    k.n_heads = c.n_heads;
    k.n_kv_heads = c.n_kv_heads;
    k.head_dim = c.head_dim;
    k.ffn_dim = c.ffn_dim;
    k.rope_layout = c.rope_layout == RopeLayout::neox ? CONFORM_ROPE_NEOX : CONFORM_ROPE_INTERLEAVED;
    k.qk_norm = c.qk_norm ? 1u : 0u;
    k.rope_theta = c.rope_theta;
    k.norm_eps = c.norm_eps;
    rope_fields(k, c.rotary(), c.rope_scaling);
    k.page_size = c.page_size;
}


// The plugin function's own time, for bench (last_kernel_seconds).
extern thread_local double g_kernel_seconds;

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
inline uint16_t poison16(DType d) { return d == DType::bf16 ? 0x7F8Du : 0x7C8Du; }
inline uint16_t sentinel16(DType d) { return d == DType::bf16 ? 0x7FA5u : 0x7CA5u; }
constexpr size_t kFront16 = 32, kBack16 = 64;  // sentinel elements around a staged 16-bit output

// A digest of an input's bytes, to notice a plugin writing into its inputs.
inline uint64_t digest(const void* data, size_t bytes) {
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

inline conform_tensor descriptor(void* data, uint32_t dtype, int64_t rows, int64_t cols) {
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
inline conform_tensor descriptor_1d(void* data, uint32_t dtype, int64_t n) {
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

}  // namespace detail
}  // namespace conform::plugin

#include "core/case.h"

#include "compare/tolerance.h"

#include <cmath>
#include <sstream>

namespace conform {

std::string shape_str(const std::vector<int64_t>& s) {
    std::ostringstream o;
    o << '[';
    for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
    o << ']';
    return o.str();
}

const Tensor& Case::in(const std::string& name) const {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw InputError(where() + ": input '" + name + "' is missing");
    return it->second;
}

const std::vector<int64_t>& Case::pos(const std::string& name) const {
    auto it = positions.find(name);
    if (it == positions.end()) throw InputError(where() + ": input '" + name + "' is missing");
    return it->second;
}

std::string Case::where() const {
    if (!file.empty()) return file + ":/" + group;
    return id;
}

std::vector<std::string> float_inputs(Op op, const BlockConfig& c) {
    switch (op) {
        case Op::rmsnorm: return {"x", "weight"};
        case Op::rope: return {"x"};
        case Op::qk_norm: return {"x", "weight"};
        case Op::attention: return {"q", "k", "v"};
        case Op::swiglu: return {"x", "w1", "w3", "w2"};
        case Op::block:
        case Op::decode: {
            std::vector<std::string> v = {"x", "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w3", "w2"};
            if (c.qk_norm) {
                v.push_back("q_norm");
                v.push_back("k_norm");
            }
            return v;
        }
    }
    return {};
}

std::vector<std::string> position_inputs(Op op) {
    switch (op) {
        case Op::rope:
        case Op::block:
        case Op::decode: return {"positions"};
        case Op::attention: return {"q_positions", "k_positions"};
        default: return {};
    }
}

std::vector<std::string> required_config(Op op) {
    switch (op) {
        case Op::rmsnorm: return {"norm_eps"};
        case Op::rope: return {"head_dim", "rope_layout", "rope_theta"};
        case Op::qk_norm: return {"head_dim", "norm_eps"};
        case Op::attention: return {"n_heads", "n_kv_heads", "head_dim"};
        case Op::swiglu: return {};
        case Op::block:
        case Op::decode:
            return {"d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "rope_layout", "rope_theta", "qk_norm",
                    "norm_eps"};
    }
    return {};
}

std::vector<std::string> output_names(Op op) {
    if (op != Op::block) return {"out"};
    std::vector<std::string> v;
    for (Tap t : kAllTaps) v.push_back(to_string(t));
    return v;
}

std::vector<int64_t> output_shape(const Case& c, const std::string& output) {
    const BlockConfig& cfg = c.config;
    switch (c.op) {
        case Op::rmsnorm:
        case Op::rope:
        case Op::qk_norm:
        case Op::swiglu: return {c.in("x").rows(), c.in("x").cols()};
        case Op::attention: return {c.in("q").rows(), cfg.q_width()};
        case Op::decode: return {c.in("x").rows(), cfg.d_model};
        case Op::block: {
            const int64_t T = c.in("x").rows();
            if (output == "q" || output == "q_rot" || output == "attn") return {T, cfg.q_width()};
            if (output == "k" || output == "v" || output == "k_rot") return {T, cfg.kv_width()};
            return {T, cfg.d_model};
        }
    }
    return {};
}

void round_inputs(Case& c, DType dtype) {
    if (dtype == DType::f32) return;
    for (auto& [name, t] : c.inputs)
        for (float& v : t.data) v = static_cast<float>(round_to(v, dtype));
}

int64_t head_dim_of(const Case& c, const std::string& output) {
    switch (c.op) {
        case Op::rope:
        case Op::qk_norm:
        case Op::attention: return c.config.head_dim;
        case Op::block:
            if (output == "q" || output == "k" || output == "v" || output == "q_rot" || output == "k_rot" ||
                output == "attn")
                return c.config.head_dim;
            return 0;
        default: return 0;
    }
}

namespace {

struct Checker {
    const Case& c;

    [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
        throw InputError(c.where() + ": " + field + ": " + msg);
    }

    const Tensor& tensor(const std::string& name, int64_t rows, int64_t cols) const {
        auto it = c.inputs.find(name);
        if (it == c.inputs.end()) fail("inputs/" + name, "missing (op " + std::string(to_string(c.op)) + " needs it)");
        const Tensor& t = it->second;
        if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
            fail("inputs/" + name, "expected shape " + shape_str({rows, cols}) + ", found " + shape_str(t.shape));
        if (t.numel() != rows * cols) fail("inputs/" + name, "data size does not match its shape");
        for (int64_t i = 0; i < t.numel(); ++i)
            if (!std::isfinite(t.data[i]))
                fail("inputs/" + name, "non-finite value " + std::to_string(t.data[i]) + " at flat index " +
                                           std::to_string(i));
        return t;
    }

    const Tensor& any(const std::string& name) const {
        auto it = c.inputs.find(name);
        if (it == c.inputs.end()) fail("inputs/" + name, "missing (op " + std::string(to_string(c.op)) + " needs it)");
        if (it->second.shape.size() != 2 || it->second.shape[0] <= 0 || it->second.shape[1] <= 0)
            fail("inputs/" + name, "empty or not 2-D: shape " + shape_str(it->second.shape));
        return it->second;
    }

    void positions(const std::string& name, int64_t n) const {
        auto it = c.positions.find(name);
        if (it == c.positions.end()) fail("inputs/" + name, "missing (op " + std::string(to_string(c.op)) + " needs it)");
        if (static_cast<int64_t>(it->second.size()) != n)
            fail("inputs/" + name, "expected " + std::to_string(n) + " positions (one per row), found " +
                                       std::to_string(it->second.size()));
        for (size_t i = 0; i < it->second.size(); ++i)
            if (it->second[i] < 0)
                fail("inputs/" + name, "negative position " + std::to_string(it->second[i]) + " at index " +
                                           std::to_string(i));
    }

    void positive(const std::string& field, int64_t v) const {
        if (v <= 0) fail("config/" + field, "must be > 0, found " + std::to_string(v));
    }

    void head_dim() const {
        positive("head_dim", c.config.head_dim);
        if (c.config.head_dim % 2) fail("config/head_dim", "RoPE needs an even head_dim, found " + std::to_string(c.config.head_dim));
    }

    void heads() const {
        positive("n_heads", c.config.n_heads);
        positive("n_kv_heads", c.config.n_kv_heads);
        if (c.config.n_heads % c.config.n_kv_heads)
            fail("config/n_heads", "n_heads " + std::to_string(c.config.n_heads) + " is not divisible by n_kv_heads " +
                                       std::to_string(c.config.n_kv_heads));
    }

    void columns_of_heads(const std::string& name, const Tensor& t) const {
        if (t.cols() % c.config.head_dim)
            fail("inputs/" + name, "columns " + std::to_string(t.cols()) + " are not a multiple of head_dim " +
                                       std::to_string(c.config.head_dim));
    }

    // A fixture's golden outputs: "out" present, every output the op's shape
    // for these inputs, every value finite (a NaN in a golden file would make
    // every implementation fail for the file's sake).
    void expected() const {
        if (!c.expected.count("out")) fail("expected/out", "missing (every fixture case needs it)");
        for (const auto& name : output_names(c.op)) {
            auto it = c.expected.find(name);
            if (it == c.expected.end()) continue;
            const DTensor& t = it->second;
            const std::vector<int64_t> want = output_shape(c, name);
            if (t.shape != want)
                fail("expected/" + name, "expected shape " + shape_str(want) + " (the op's output for these inputs), found " +
                                             shape_str(t.shape));
            if (t.numel() != want[0] * want[1]) fail("expected/" + name, "data size does not match its shape");
            for (int64_t i = 0; i < t.numel(); ++i)
                if (!std::isfinite(t.data[i]))
                    fail("expected/" + name, "non-finite value " + std::to_string(t.data[i]) + " at flat index " +
                                                 std::to_string(i));
        }
    }

    void eps() const {
        if (!(c.config.norm_eps >= 0) || !std::isfinite(c.config.norm_eps))
            fail("config/norm_eps", "must be finite and >= 0");
    }
    void theta() const {
        if (!(c.config.rope_theta > 1.0) || !std::isfinite(c.config.rope_theta))
            fail("config/rope_theta", "must be finite and > 1");
        if (auto bad = rope_config_problem(c.config)) fail("config/" + bad->first, bad->second);
    }
};

std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

}  // namespace

std::optional<std::pair<std::string, std::string>> rope_config_problem(const BlockConfig& c) {
    using Problem = std::optional<std::pair<std::string, std::string>>;
    auto bad = [](const char* field, std::string msg) -> Problem { return std::make_pair(std::string(field), msg); };
    const int64_t hd = c.head_dim, rd = c.rotary_dim;
    if (rd != 0 && (rd < 2 || rd % 2 != 0 || rd > hd))
        return bad("rotary_dim", "must be 0 (the whole head) or even in [2, head_dim = " + std::to_string(hd) +
                                     "], found " + std::to_string(rd));
    const RopeScaling& s = c.rope_scaling;
    const char* type = to_string(s.type);
    if (s.type != RopeScalingType::yarn && s.attention_factor != 1.0)
        return bad("rope_attention_factor", std::string("applies to yarn only (must be 1 for ") + type + "), found " +
                                                num(s.attention_factor));
    if (s.type == RopeScalingType::none) return std::nullopt;
    if (!std::isfinite(s.factor) || !(s.factor >= 1.0))
        return bad("rope_factor", std::string("must be finite and >= 1 for ") + type + " scaling, found " + num(s.factor));
    if (s.type != RopeScalingType::linear && s.original_max_position <= 0)
        return bad("rope_original_max_position",
                   std::string("must be > 0 for ") + type + " scaling, found " + std::to_string(s.original_max_position));
    if (s.type == RopeScalingType::llama3) {
        if (!std::isfinite(s.low_freq_factor) || !(s.low_freq_factor > 0))
            return bad("rope_low_freq_factor", "must be finite and > 0, found " + num(s.low_freq_factor));
        if (!std::isfinite(s.high_freq_factor) || !(s.high_freq_factor > s.low_freq_factor))
            return bad("rope_high_freq_factor", "must be finite and > low_freq_factor = " + num(s.low_freq_factor) +
                                                    ", found " + num(s.high_freq_factor));
    }
    if (s.type == RopeScalingType::yarn) {
        if (!std::isfinite(s.beta_fast) || !(s.beta_fast > 0))
            return bad("rope_beta_fast", "must be finite and > 0, found " + num(s.beta_fast));
        if (!std::isfinite(s.beta_slow) || !(s.beta_slow > 0))
            return bad("rope_beta_slow", "must be finite and > 0, found " + num(s.beta_slow));
        if (!std::isfinite(s.attention_factor) || !(s.attention_factor > 0))
            return bad("rope_attention_factor", "must be finite and > 0, found " + num(s.attention_factor));
    }
    if (s.type == RopeScalingType::dynamic && c.rotary() <= 2)
        return bad("rotary_dim", "dynamic NTK raises the base to rotary_dim / (rotary_dim - 2): needs a rotary dim > 2, "
                                 "found " + std::to_string(c.rotary()));
    return std::nullopt;
}

void validate_case(const Case& c) {
    Checker k{c};
    const BlockConfig& cfg = c.config;
    switch (c.op) {
        case Op::rmsnorm: {
            k.eps();
            const Tensor& x = k.any("x");
            k.tensor("x", x.rows(), x.cols());
            k.tensor("weight", 1, x.cols());
            break;
        }
        case Op::rope: {
            k.head_dim();
            k.theta();
            const Tensor& x = k.any("x");
            k.columns_of_heads("x", x);
            k.tensor("x", x.rows(), x.cols());
            k.positions("positions", x.rows());
            break;
        }
        case Op::qk_norm: {
            k.positive("head_dim", cfg.head_dim);
            k.eps();
            const Tensor& x = k.any("x");
            k.columns_of_heads("x", x);
            k.tensor("x", x.rows(), x.cols());
            k.tensor("weight", 1, cfg.head_dim);
            break;
        }
        case Op::attention: {
            k.heads();
            k.positive("head_dim", cfg.head_dim);
            const Tensor& q = k.any("q");
            const Tensor& kk = k.any("k");
            k.tensor("q", q.rows(), cfg.n_heads * cfg.head_dim);
            k.tensor("k", kk.rows(), cfg.n_kv_heads * cfg.head_dim);
            k.tensor("v", kk.rows(), cfg.n_kv_heads * cfg.head_dim);
            k.positions("q_positions", q.rows());
            k.positions("k_positions", kk.rows());
            break;
        }
        case Op::swiglu: {
            const Tensor& x = k.any("x");
            const Tensor& w1 = k.any("w1");
            int64_t D = x.cols(), F = w1.cols();
            k.tensor("x", x.rows(), D);
            k.tensor("w1", D, F);
            k.tensor("w3", D, F);
            k.tensor("w2", F, D);
            break;
        }
        case Op::block:
        case Op::decode: {
            k.positive("d_model", cfg.d_model);
            k.positive("ffn_dim", cfg.ffn_dim);
            k.heads();
            k.head_dim();
            k.theta();
            k.eps();
            const Tensor& x = k.any("x");
            int64_t T = x.rows(), D = cfg.d_model, F = cfg.ffn_dim;
            k.tensor("x", T, D);
            k.positions("positions", T);
            k.tensor("attn_norm", 1, D);
            k.tensor("wq", D, cfg.q_width());
            k.tensor("wk", D, cfg.kv_width());
            k.tensor("wv", D, cfg.kv_width());
            k.tensor("wo", cfg.q_width(), D);
            k.tensor("ffn_norm", 1, D);
            k.tensor("w1", D, F);
            k.tensor("w3", D, F);
            k.tensor("w2", F, D);
            if (cfg.qk_norm) {
                k.tensor("q_norm", 1, cfg.head_dim);
                k.tensor("k_norm", 1, cfg.head_dim);
            }
            if (c.op == Op::decode && (c.prefill < 0 || c.prefill > T))
                k.fail("prefill", "must be in [0, T=" + std::to_string(T) + "], found " + std::to_string(c.prefill));
            const auto& p = c.pos("positions");
            for (size_t i = 1; i < p.size(); ++i)
                if (p[i] <= p[i - 1])
                    k.fail("inputs/positions", "a block's positions must be strictly increasing (index " +
                                                   std::to_string(i) + ": " + std::to_string(p[i - 1]) + " then " +
                                                   std::to_string(p[i]) + ")");
            break;
        }
    }
    if (!c.expected.empty()) k.expected();
}

}  // namespace conform

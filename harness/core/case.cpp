#include "core/case.h"

#include "conform/dtype.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>
#include <string_view>
#include <tuple>
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

View CaseCall::in(const char* name) {
    auto it = c.inputs.find(name);
    return it == c.inputs.end() ? View{} : it->second.view();
}

Positions CaseCall::pos(const char* name) {
    auto it = c.positions.find(name);
    return it == c.positions.end() ? Positions{} : Positions{it->second.data(), static_cast<int64_t>(it->second.size())};
}

MutView CaseCall::out(const char* name) {
    auto it = outputs.find(name);
    return it == outputs.end() ? MutView{} : it->second;
}

std::string Case::where() const {
    if (!file.empty()) return file + ":/" + group;
    return id;
}

std::vector<std::string> float_inputs(Op op, const BlockConfig& c) {
    std::vector<std::string> v;
    for (const TensorSpec& t : op_info(op).inputs)
        if (t.present(c)) v.push_back(t.name);
    return v;
}

std::vector<std::string> position_inputs(Op op) {
    std::vector<std::string> v;
    for (const PositionSpec& p : op_info(op).positions) v.push_back(p.name);
    return v;
}

std::vector<std::string> required_config(Op op) {
    std::vector<std::string> v;
    for (const char* f : op_info(op).config) {
        bool optional = false;
        for_each_field(BlockConfig{}, [&](const ConfigField& cf, const auto&) {
            optional = optional || (cf.optional && std::string_view(f) == cf.name);
        });
        if (!optional) v.push_back(f);
    }
    return v;
}

std::vector<std::string> optional_config(Op op) {
    std::vector<std::string> v;
    for (const Twist& t : twist_table())
        if (!t.core && op_info(op).reads(t)) v.push_back(t.name);
    return v;
}

std::vector<std::string> output_names(Op op) {
    std::vector<std::string> v;
    for (const TensorSpec& t : op_info(op).outputs) v.push_back(t.name);
    return v;
}

namespace {

// Whether the config fixes a dim's size for this op (else an input binds it):
// head shapes always; d_model and ffn_dim where the op reads them (the
// block), not where they are just an input's width (rmsnorm, swiglu).
bool fixed_by_config(const OpInfo& info, Dim d) {
    switch (d) {
        case Dim::one:
        case Dim::Q:
        case Dim::KVW:
        case Dim::hd:
        case Dim::H:
        case Dim::KVS: return true;
        case Dim::D: return info.reads("d_model");
        case Dim::F: return info.reads("ffn_dim");
        // a mixture of experts' sizes: its config's (n_experts, moe_ffn_dim, moe_shared_ffn_dim)
        case Dim::E:
        case Dim::ED:
        case Dim::EFe:
        case Dim::Fe2:
        case Dim::FS:
        case Dim::FS2: return true;
        // latent attention's widths: its config's (kv_lora_rank, qk_nope/rope_head_dim, v_head_dim)
        case Dim::QM:
        case Dim::C:
        case Dim::R:
        case Dim::KVB:
        case Dim::VO: return true;
        default: return false;
    }
}

const TensorSpec* output_spec(Op op, const std::string& output) {
    for (const TensorSpec& t : op_info(op).outputs)
        if (output == t.name) return &t;
    return nullptr;
}

}  // namespace

int64_t case_dim(const Case& c, Dim d) {
    const OpInfo& info = op_info(c.op);
    if (fixed_by_config(info, d)) return config_dim(d, c.config);
    for (const TensorSpec& t : info.inputs) {
        if (!t.present(c.config)) continue;
        auto it = c.inputs.find(t.name);
        if (it == c.inputs.end()) continue;
        if (t.rows == d) return it->second.rows();
        if (t.cols == d) return it->second.cols();
    }
    return 0;
}

void complete_config(Case& c) {
    const OpInfo& info = op_info(c.op);
    BlockConfig& cfg = c.config;
    if (info.has_dim(Dim::D) && !fixed_by_config(info, Dim::D)) cfg.d_model = case_dim(c, Dim::D);
    if (info.has_dim(Dim::F) && !fixed_by_config(info, Dim::F)) cfg.ffn_dim = case_dim(c, Dim::F);
    if (info.has_dim(Dim::N) && cfg.head_dim > 0) cfg.n_heads = cfg.n_kv_heads = case_dim(c, Dim::N) / cfg.head_dim;
}

std::vector<int64_t> output_shape(const Case& c, const std::string& output) {
    const TensorSpec* t = output_spec(c.op, output);
    if (!t) return {};
    return {case_dim(c, t->rows), case_dim(c, t->cols)};
}

void round_inputs(Case& c, DType dtype) {
    if (dtype == DType::f32) return;
    for (auto& [name, t] : c.inputs)
        for (float& v : t.data) v = static_cast<float>(round_to(v, dtype));
}

int64_t head_dim_of(const Case& c, const std::string& output) {
    const TensorSpec* t = output_spec(c.op, output);
    if (t && t->cols == Dim::H) return 1;  // one value per head (lse): (token, head, dim 0)
    return t && op_info(c.op).has_heads(*t) ? c.config.head_dim : 0;
}

namespace {

struct Checker {
    const Case& c;

    [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
        throw InputError(c.where() + ": " + field + ": " + msg);
    }

    const Tensor& tensor(const std::string& name, int64_t rows, int64_t cols, bool pool = false) const {
        auto it = c.inputs.find(name);
        if (it == c.inputs.end()) fail("inputs/" + name, "missing (op " + std::string(to_string(c.op)) + " needs it)");
        const Tensor& t = it->second;
        if (t.shape.size() != 2 || t.shape[0] != rows || t.shape[1] != cols)
            fail("inputs/" + name, "expected shape " + shape_str({rows, cols}) + ", found " + shape_str(t.shape));
        if (t.numel() != rows * cols) fail("inputs/" + name, "data size does not match its shape");
        if (pool) return t;  // its owned rows are checked with the index arrays (paged())
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
            fail("inputs/" + name, "expected " + std::to_string(n) + " entries (one per row, or per sequence), found " +
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
        if (!op_info(c.op).reads("n_kv_heads")) return;  // latent attention: one latent for every head
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
            const bool neg_inf_ok = op_info(c.op).output(name)->neg_inf_when_empty;
            if (t.shape != want)
                fail("expected/" + name, "expected shape " + shape_str(want) + " (the op's output for these inputs), found " +
                                             shape_str(t.shape));
            if (t.numel() != want[0] * want[1]) fail("expected/" + name, "data size does not match its shape");
            for (int64_t i = 0; i < t.numel(); ++i)
                if (!std::isfinite(t.data[i]) && !(neg_inf_ok && t.data[i] == -INFINITY))
                    fail("expected/" + name, "non-finite value " + std::to_string(t.data[i]) + " at flat index " +
                                                 std::to_string(i) +
                                                 (neg_inf_ok ? " (only -inf is allowed, for a row that sees no key)" : ""));
        }
    }

    // paged_attention's index arrays against each other, the queries and the
    // cache (conform/interface.h PagedIndex), and the cache rows the batch
    // owns finite (the rest is poison on purpose).
    // An FP8 cache's scales (paged_attention, decode) divide every value
    // written: each > 0 (finite: checked with every input).
    void fp8_scales() const {
        if (c.config.kv_cache_dtype == KvCacheDtype::none) return;
        for (const char* name : {"k_scale", "v_scale"}) {
            const Tensor& sc = c.in(name);
            for (int64_t i = 0; i < sc.numel(); ++i)
                if (!(sc.data[static_cast<size_t>(i)] > 0))
                    fail(std::string("inputs/") + name, "a scale must be > 0, found " +
                                                            std::to_string(sc.data[static_cast<size_t>(i)]) +
                                                            " at index " + std::to_string(i));
        }
    }

    // A mixture of experts' sizes and groups (before any shape is computed from them).
    void experts() const {
        const BlockConfig& g = c.config;
        const OpInfo& info = op_info(c.op);
        positive("n_experts", g.n_experts);
        if (g.n_experts > (int64_t{1} << 16)) fail("n_experts", "must be at most 65536, found " + std::to_string(g.n_experts));
        if (g.n_experts_per_tok < 1 || g.n_experts_per_tok > g.n_experts)
            fail("n_experts_per_tok", "must be in [1, n_experts = " + std::to_string(g.n_experts) + "], found " +
                                          std::to_string(g.n_experts_per_tok));
        if (info.reads("moe_ffn_dim")) positive("moe_ffn_dim", g.moe_ffn_dim);
        // Every size a shape is computed from, far past a checkpoint's, so no product of them overflows.
        for (const auto& [field, v] : {std::pair<const char*, int64_t>{"d_model", g.d_model},
                                       {"moe_ffn_dim", g.moe_ffn_dim},
                                       {"moe_shared_ffn_dim", g.moe_shared_ffn_dim}})
            if (v > (int64_t{1} << 20)) fail(field, "must be at most 1048576 in a mixture of experts, found " + std::to_string(v));
        if (info.uses(kMoeRoute) && g.moe_n_group > 0) {
            if (g.n_experts % g.moe_n_group != 0)
                fail("moe_n_group", "must divide n_experts = " + std::to_string(g.n_experts) + ", found " +
                                        std::to_string(g.moe_n_group));
            const int64_t size = g.n_experts / g.moe_n_group;
            if (g.moe_topk_group < 1 || g.moe_topk_group > g.moe_n_group || g.moe_topk_group * size < g.n_experts_per_tok)
                fail("moe_topk_group", "must be in [1, n_group = " + std::to_string(g.moe_n_group) +
                                           "] and its groups hold n_experts_per_tok = " +
                                           std::to_string(g.n_experts_per_tok) + " experts, found " +
                                           std::to_string(g.moe_topk_group));
        }
        if (info.uses(kMoeRoute) && !(std::isfinite(g.moe_routed_scaling_factor) && g.moe_routed_scaling_factor >= 0))
            fail("moe_routed_scaling_factor", "must be finite and >= 0 (0: none)");
        if (info.uses(kMoeExperts) && !(std::isfinite(g.moe_swiglu_limit) && g.moe_swiglu_limit >= 0))
            fail("moe_swiglu_limit", "must be finite and >= 0 (0: silu)");
    }

    // Latent attention's widths, each positive and far past a checkpoint's
    // (V3: 512, 128, 64, 128), so no shape computed from them overflows.
    void mla() const {
        const BlockConfig& g = c.config;
        for (const auto& [field, v] : {std::pair<const char*, int64_t>{"n_heads", g.n_heads},
                                       {"kv_lora_rank", g.kv_lora_rank},
                                       {"qk_nope_head_dim", g.qk_nope_head_dim},
                                       {"qk_rope_head_dim", g.qk_rope_head_dim},
                                       {"v_head_dim", g.v_head_dim}}) {
            positive(field, v);
            if (v > (int64_t{1} << 16))
                fail(std::string("config/") + field, "must be at most 65536 in latent attention, found " + std::to_string(v));
        }
    }

    void paged() const {
        const BlockConfig& cfg = c.config;
        positive("page_size", cfg.page_size);
        // The cache's tensors (paged_attention's k_cache and v_cache, MLA's ckv_cache and kpe_cache).
        const std::vector<const char*> pools = op_info(c.op).pools();
        const int64_t P = cfg.page_size, T = c.in("q").rows(), rows = c.in(pools.at(0)).rows();
        if (rows % P)
            fail(std::string("inputs/") + pools[0], "rows " + std::to_string(rows) +
                                                        " are not a whole number of pages of page_size " + std::to_string(P));
        const int64_t pages = rows / P;
        const auto& qo = c.pos("qo_indptr");
        const auto& kvp = c.pos("kv_indptr");
        const auto& ids = c.pos("kv_indices");
        const auto& last = c.pos("kv_last_page_len");
        auto indptr = [&](const char* name, const std::vector<int64_t>& v, int64_t end, const char* what) {
            if (v.empty() || v[0] != 0) fail(std::string("inputs/") + name, "must start at 0");
            for (size_t i = 1; i < v.size(); ++i)
                if (v[i] < v[i - 1])
                    fail(std::string("inputs/") + name, "must be non-decreasing (index " + std::to_string(i) + ": " +
                                                            std::to_string(v[i - 1]) + " then " + std::to_string(v[i]) + ")");
            if (v.back() != end)
                fail(std::string("inputs/") + name, "must end at " + std::to_string(end) + " (" + what + "), found " +
                                                        std::to_string(v.back()));
        };
        indptr("qo_indptr", qo, T, "the rows of q");
        indptr("kv_indptr", kvp, static_cast<int64_t>(ids.size()), "the length of kv_indices");
        for (size_t i = 0; i < ids.size(); ++i)
            if (ids[i] >= pages)
                fail("inputs/kv_indices", "page " + std::to_string(ids[i]) + " at index " + std::to_string(i) +
                                              " is out of range: the cache has " + std::to_string(pages) + " pages of " +
                                              std::to_string(P));
        for (size_t b = 0; b + 1 < kvp.size(); ++b) {
            const int64_t n = kvp[b + 1] - kvp[b], l = last[b];
            const std::string at = " (sequence " + std::to_string(b) + ", " + std::to_string(n) + " pages)";
            if (n == 0 && l != 0) fail("inputs/kv_last_page_len", "must be 0 for a sequence without pages, found " + std::to_string(l) + at);
            if (n > 0 && (l < 1 || l > P))
                fail("inputs/kv_last_page_len", "must be in [1, page_size = " + std::to_string(P) + "], found " + std::to_string(l) + at);
            for (int64_t i = 0; i < n; ++i) {
                const int64_t page = ids[static_cast<size_t>(kvp[b] + i)], used = i + 1 < n ? P : l;
                for (const char* name : pools) {
                    const Tensor& pool = c.in(name);
                    const int64_t W = pool.cols();
                    for (int64_t r = page * P; r < page * P + used; ++r)
                        for (int64_t j = 0; j < W; ++j) {
                            const float x = pool.data[static_cast<size_t>(r * W + j)];
                            if (!std::isfinite(x))
                                fail(std::string("inputs/") + name, "non-finite value " + std::to_string(x) + " in row " +
                                                                        std::to_string(r) + ", col " + std::to_string(j) +
                                                                        ", a slot sequence " + std::to_string(b) + " owns");
                        }
                }
            }
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

namespace {

// One token's router as a program in `dtype` sees it: each expert's
// selection score (its score plus e_bias), its score, each group's score,
// and what that program's arithmetic may move each of them by (`m`, `gm`).
// In float32 (the inputs float32, the logits summed in float32) a logit
// moves by at most dl, generously 16x the typical bound of its sum; a
// softmax score by p_i (dl_i + max_j dl_j) (p_i's own logit and the
// denominator's) plus its own exp and division, a sigmoid score by
// s (1 - s) dl plus its rounding; a group's score by the margins of the
// scores it sums. Below float32 the inputs are the dtype's values (the gate
// rounds them) and the router is float32 — DeepSeek's, GLM's and Kimi's
// (sigmoid, e_bias) and gpt-oss's (router_bias) run it so, and a router that
// rounds their logits to bf16 chooses other experts (vllm#54048, vllm#14027)
// — except a plain softmax router (Mixtral, Qwen2/3-MoE, OLMoE), whose
// logits HF's linear returns in the model's dtype: there logit l moves by
// u_d |l| more. The softmax and the choice are float32 in every model (HF:
// softmax(..., dtype=float)).
struct RouterView {
    std::vector<double> key, p, m;  // per expert: selection score, score, margin
    std::vector<double> group, gm;  // per group (empty without groups): score, margin
    int64_t size = 0;               // experts per group
};

RouterView router_view(const Case& c, const BlockConfig& g, int64_t t, DType dtype) {
    const Tensor& x = c.in("x");
    const Tensor& w = c.in("w_router");
    const int64_t D = x.cols(), E = g.n_experts;
    const double u = std::ldexp(1.0, -24);
    const double ud = dtype == DType::f32 ? 0.0 : std::ldexp(1.0, dtype == DType::bf16 ? -8 : -11);
    const bool model_dtype_logits = g.moe_scoring == MoeScoring::softmax && !g.moe_selection_bias && !g.moe_router_bias;
    RouterView v;
    v.key.resize(static_cast<size_t>(E));
    v.p.resize(static_cast<size_t>(E));
    v.m.resize(static_cast<size_t>(E));
    std::vector<double> l(static_cast<size_t>(E)), dl(static_cast<size_t>(E));
    double top = -INFINITY, dl_max = 0;
    for (int64_t e = 0; e < E; ++e) {
        double acc = 0, mag = 0;
        for (int64_t d = 0; d < D; ++d) {
            const double a = static_cast<double>(x.data[t * D + d]) * w.data[d * E + e];
            acc += a, mag += std::fabs(a);
        }
        if (g.moe_router_bias) acc += c.in("router_bias").data[e], mag += std::fabs(c.in("router_bias").data[e]);
        l[e] = acc;
        dl[e] = 16.0 * (std::sqrt(static_cast<double>(D)) + 4.0) * u * mag + (model_dtype_logits ? ud * std::fabs(acc) : 0.0);
        dl_max = std::max(dl_max, dl[e]);
        top = std::max(top, acc);
    }
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (v.p[e] = g.moe_scoring == MoeScoring::softmax ? std::exp(l[e] - top) : 0.0);
    const double exp_sum = 16.0 * (std::sqrt(static_cast<double>(E)) + 4.0) * u;  // the softmax's own, relative
    for (int64_t e = 0; e < E; ++e) {
        if (g.moe_scoring == MoeScoring::softmax) {
            v.p[e] /= sum;
            v.m[e] = v.p[e] * (dl[e] + dl_max + exp_sum);
        } else {
            v.p[e] = 1.0 / (1.0 + std::exp(-l[e]));
            v.m[e] = v.p[e] * (1.0 - v.p[e]) * dl[e] + 16.0 * u * v.p[e];
        }
        v.key[e] = v.p[e] + (g.moe_selection_bias ? c.in("e_bias").data[e] : 0.0);
        if (g.moe_selection_bias) v.m[e] += 4.0 * u * std::fabs(v.key[e]);  // score + e_bias, rounded
    }
    if (g.moe_n_group > 0) {
        const int64_t G = g.moe_n_group;
        v.size = E / G;
        v.group.resize(static_cast<size_t>(G));
        v.gm.resize(static_cast<size_t>(G));
        for (int64_t q = 0; q < G; ++q) {
            std::vector<std::pair<double, double>> in;  // (key, margin)
            for (int64_t e = q * v.size; e < (q + 1) * v.size; ++e) in.emplace_back(v.key[e], v.m[e]);
            std::sort(in.begin(), in.end(), std::greater<>());
            const bool one = g.moe_group_score == MoeGroupScore::max || v.size < 2;
            v.group[static_cast<size_t>(q)] = one ? in[0].first : in[0].first + in[1].first;
            // (which two are the best may itself change within the margins: the largest two margins then)
            std::vector<double> ms;
            for (const auto& [k, m] : in) ms.push_back(m);
            std::sort(ms.begin(), ms.end(), std::greater<>());
            v.gm[static_cast<size_t>(q)] = one ? ms[0] : ms[0] + ms[1];
        }
    }
    return v;
}

std::string num_g(double x) {
    std::ostringstream o;
    o.precision(4);
    o << x;
    return o.str();
}

}  // namespace

// Whether token t's expert choice is clear of a float32 router's noise: its
// K-th and (K + 1)-th choice scores (and with groups, its topk_group-th and
// next group scores) further apart than twice what a float32 program's
// logits, scores and bias can move them (router_view). materialize() draws
// no token that is not, so a float32 kernel is judged on the one choice every
// honest float32 kernel makes (docs/moe.md).
bool route_clear(const Case& c, int64_t t) {
    const BlockConfig& g = c.config;
    const int64_t E = g.n_experts;
    const RouterView v = router_view(c, g, t, DType::f32);
    // Sorted descending by score: (score, margin, index).
    auto sorted = [](const std::vector<double>& s, const std::vector<double>& m, const std::vector<bool>* live) {
        std::vector<std::tuple<double, double, int64_t>> r;
        for (size_t i = 0; i < s.size(); ++i)
            if (!live || (*live)[i]) r.emplace_back(s[i], m[i], static_cast<int64_t>(i));
        std::sort(r.begin(), r.end(), std::greater<>());
        return r;
    };
    // The k-th and (k + 1)-th further apart than both can move.
    auto clear_at = [](const std::vector<std::tuple<double, double, int64_t>>& r, size_t k) {
        if (k >= r.size()) return true;
        return std::get<0>(r[k - 1]) - std::get<0>(r[k]) > std::get<1>(r[k - 1]) + std::get<1>(r[k]);
    };
    std::vector<bool> live(static_cast<size_t>(E), true);
    if (!v.group.empty()) {
        const auto groups = sorted(v.group, v.gm, nullptr);
        if (!clear_at(groups, static_cast<size_t>(g.moe_topk_group))) return false;
        const double cut = std::get<0>(groups[static_cast<size_t>(g.moe_topk_group - 1)]);
        for (int64_t e = 0; e < E; ++e) live[static_cast<size_t>(e)] = v.group[static_cast<size_t>(e / v.size)] >= cut;
    }
    const auto kept = sorted(v.key, v.m, &live);
    const size_t K = static_cast<size_t>(g.n_experts_per_tok);
    if (!clear_at(kept, K)) return false;
    // And every chosen expert's weight far above float32's underflow: a
    // weight that reads 0 there is "not chosen" by the route's contract,
    // which under the weight on the input with expert biases (expert(0) is
    // not 0) is another output, not a rounding of this one.
    for (size_t k = 0; k < std::min(K, kept.size()); ++k)
        if (!(v.p[static_cast<size_t>(std::get<2>(kept[k]))] > 1e-30)) return false;
    return true;
}

std::string route_outside_tie(const Case& c, const BlockConfig& g, DType dtype, int64_t t,
                              const std::vector<uint8_t>& chosen) {
    const int64_t E = g.n_experts;
    const RouterView v = router_view(c, g, t, dtype);
    const std::string tok = "token " + std::to_string(t);
    const std::string dt = to_string(dtype);
    int64_t n = 0;
    for (int64_t e = 0; e < E; ++e) n += chosen[static_cast<size_t>(e)] != 0;
    if (n != g.n_experts_per_tok)
        return tok + " chose " + std::to_string(n) + " experts, want n_experts_per_tok = " +
               std::to_string(g.n_experts_per_tok);
    // Grouped: each group it took from must be one some honest program keeps
    // (fewer than topk_group groups beat it by more than both can move), and
    // no more groups than topk_group; a group every honest program keeps
    // (fewer than topk_group others could reach it) competes with the chosen experts.
    std::vector<bool> competes(static_cast<size_t>(E), true);
    if (!v.group.empty()) {
        const int64_t G = g.moe_n_group;
        const size_t Gs = static_cast<size_t>(G);
        auto gap = [&](int64_t h, int64_t q) { return v.group[static_cast<size_t>(h)] - v.group[static_cast<size_t>(q)]; };
        auto room = [&](int64_t h, int64_t q) { return v.gm[static_cast<size_t>(h)] + v.gm[static_cast<size_t>(q)]; };
        std::vector<bool> used(Gs, false);
        for (int64_t e = 0; e < E; ++e)
            if (chosen[static_cast<size_t>(e)]) used[static_cast<size_t>(e / v.size)] = true;
        int64_t n_used = 0;
        for (int64_t q = 0; q < G; ++q) {
            if (!used[static_cast<size_t>(q)]) continue;
            ++n_used;
            int64_t above = 0, worst = -1;
            for (int64_t h = 0; h < G; ++h)
                if (h != q && gap(h, q) > room(h, q)) {
                    ++above;
                    if (worst < 0 || gap(h, q) - room(h, q) < gap(worst, q) - room(worst, q)) worst = h;
                }
            if (above >= g.moe_topk_group)
                return tok + " took an expert of group " + std::to_string(q) + " (score " +
                       num_g(v.group[static_cast<size_t>(q)]) + "), which " + std::to_string(above) +
                       " groups beat by more than " + dt + " routing can move them (group " + std::to_string(worst) +
                       ": " + num_g(v.group[static_cast<size_t>(worst)]) + ", a gap of " + num_g(gap(worst, q)) +
                       " against " + num_g(room(worst, q)) + "); topk_group = " + std::to_string(g.moe_topk_group);
        }
        if (n_used > g.moe_topk_group)
            return tok + " took experts from " + std::to_string(n_used) + " groups, more than topk_group = " +
                   std::to_string(g.moe_topk_group);
        for (int64_t q = 0; q < G; ++q) {
            int64_t rivals = 0;
            for (int64_t h = 0; h < G; ++h) rivals += h != q && gap(h, q) >= -room(h, q);
            const bool kept = used[static_cast<size_t>(q)] || rivals < g.moe_topk_group;
            for (int64_t e = q * v.size; e < (q + 1) * v.size; ++e) competes[static_cast<size_t>(e)] = kept;
        }
    }
    // Every expert it took at least as good as every one it left, within what both can move.
    for (int64_t e = 0; e < E; ++e) {
        if (!chosen[static_cast<size_t>(e)]) continue;
        for (int64_t f = 0; f < E; ++f) {
            if (chosen[static_cast<size_t>(f)] || !competes[static_cast<size_t>(f)]) continue;
            const double gap = v.key[static_cast<size_t>(f)] - v.key[static_cast<size_t>(e)];
            const double room = v.m[static_cast<size_t>(e)] + v.m[static_cast<size_t>(f)];
            if (gap > room)
                return tok + " took expert " + std::to_string(e) + " (selection score " +
                       num_g(v.key[static_cast<size_t>(e)]) + ") over expert " + std::to_string(f) + " (" +
                       num_g(v.key[static_cast<size_t>(f)]) + "): a gap of " + num_g(gap) + ", more than " + dt +
                       " routing can move them (" + num_g(room) + "), so not a near-tie broken the other way";
        }
    }
    return "";
}

int64_t first_route_tie(const Case& c) {
    if (!op_info(c.op).uses(kMoeRoute)) return -1;
    for (int64_t t = 0; t < c.in("x").rows(); ++t)
        if (!route_clear(c, t)) return t;
    return -1;
}

void validate_case(const Case& c) {
    Checker k{c};
    const BlockConfig& cfg = c.config;
    const OpInfo& info = op_info(c.op);
    // The config fields the op reads, before any shape is computed from them.
    if (info.reads("d_model")) k.positive("d_model", cfg.d_model);
    if (info.reads("ffn_dim")) k.positive("ffn_dim", cfg.ffn_dim);
    if (info.reads("n_heads")) k.heads();
    if (info.uses(kRope)) k.head_dim();  // positive and even: RoPE rotates pairs
    else if (info.reads("head_dim")) k.positive("head_dim", cfg.head_dim);
    if (info.uses(kRope)) k.theta();
    if (info.reads("norm_eps")) k.eps();
    if (info.reads("n_experts")) k.experts();
    if (info.uses(kMla)) k.mla();

    // Every input's shape from the op's dims (conform/op_info.h): the config's
    // where it fixes them, else bound by the first input that has them.
    std::map<Dim, int64_t> bound;
    auto size = [&](Dim d) -> int64_t {
        if (fixed_by_config(info, d)) return config_dim(d, cfg);
        auto it = bound.find(d);
        return it == bound.end() ? -1 : it->second;
    };
    for (const TensorSpec& t : info.inputs) {
        if (!t.present(cfg)) continue;
        if (size(t.rows) < 0 || size(t.cols) < 0) {
            const Tensor& x = k.any(t.name);
            if (size(t.rows) < 0) bound[t.rows] = x.rows();
            if (size(t.cols) < 0) bound[t.cols] = x.cols();
            if (t.cols == Dim::N) k.columns_of_heads(t.name, x);
        }
        k.tensor(t.name, size(t.rows), size(t.cols), t.pool);
    }
    for (const PositionSpec& p : info.positions) {
        if (size(p.n) < 0) {  // an index array binds its dim (B + 1 and B bind each other)
            auto it = c.positions.find(p.name);
            const int64_t n = it == c.positions.end() ? 0 : static_cast<int64_t>(it->second.size());
            if (p.n == Dim::B1 && n < 1) k.fail("inputs/" + std::string(p.name), "an indptr needs at least one entry (B + 1)");
            bound[p.n] = n;
            if (p.n == Dim::B1) bound[Dim::B] = n - 1;
            if (p.n == Dim::B) bound[Dim::B1] = n + 1;
        }
        k.positions(p.name, size(p.n));
        if (!p.increasing) continue;
        const auto& v = c.pos(p.name);
        for (size_t i = 1; i < v.size(); ++i)
            if (v[i] <= v[i - 1])
                k.fail("inputs/" + std::string(p.name),
                       "a block's positions must be strictly increasing (index " + std::to_string(i) + ": " +
                           std::to_string(v[i - 1]) + " then " + std::to_string(v[i]) + ")");
    }
    if (info.uses(kKvCache) && (c.prefill < 0 || c.prefill > size(Dim::T)))
        k.fail("prefill", "must be in [0, T=" + std::to_string(size(Dim::T)) + "], found " + std::to_string(c.prefill));
    if (info.uses(kFp8Cache)) k.fp8_scales();
    if (info.uses(kPaged)) k.paged();
    if (!c.expected.empty()) k.expected();
}

}  // namespace conform

#include "run/select.h"

#include "conform/dtype.h"

#include <fmt/format.h>
#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "core/console.h"
#include "reference/reference.h"

namespace conform::select {

// ---- --params ----------------------------------------------------------------------

ParamFilter::ParamFilter(const std::string& pattern) : pattern_(pattern) {
    if (!pattern_.empty()) re_.emplace(pattern_);
}

bool ParamFilter::matches(const std::string& text) const {
    return !re_ || re_->search(text);
}

std::string regex_problem(const std::string& pattern) {
    try {
        ParamFilter f(pattern);
        return "";
    } catch (const PatternError& e) {
        return e.what();
    }
}

namespace {

int64_t first_position(const Case& c, const char* name) {
    auto it = c.positions.find(name);
    return it == c.positions.end() || it->second.empty() ? 0 : it->second.front();
}

}  // namespace

gen::CaseSpec spec_of(const Case& c) {
    gen::CaseSpec s;
    const BlockConfig& cfg = c.config;
    const OpInfo& info = op_info(c.op);
    s.op = c.op;
    // Sizes as the inputs have them (a fixture's config need not say how many
    // heads a rope input has), else the config's.
    auto size = [&](Dim d, int64_t otherwise) {
        const int64_t n = info.has_dim(d) ? case_dim(c, d) : 0;
        return n > 0 ? n : otherwise;
    };
    s.T = size(Dim::T, 1);
    s.S = size(Dim::S, 1);
    // Every convention as the case's config has it (a new field needs nothing
    // here); the sizes then as the inputs have them.
    s.config = cfg;
    if (info.has_dim(Dim::N)) s.config.n_heads = s.config.n_kv_heads = cfg.head_dim > 0 ? size(Dim::N, 0) / cfg.head_dim : 0;
    s.config.d_model = size(Dim::D, cfg.d_model);
    s.config.ffn_dim = size(Dim::F, cfg.ffn_dim);
    for (const PositionSpec& p : info.positions)
        (p.n == Dim::S ? s.kpos : s.pos) = first_position(c, p.name);
    s.prefill = c.prefill;
    // The tensors do not say whether q and k were scaled: a drawn case's id
    // does (gen::parse_case_id checks it); a fixture's stored values are its own.
    if (c.id.find(",qk_gain=") != std::string::npos || c.id.find(",bias_mean=") != std::string::npos)
        if (auto drawn = gen::parse_case_id(c.id)) s.qk_gain = drawn->qk_gain, s.bias_mean = drawn->bias_mean;
    return s;
}

std::string params_text(const Case& c) {
    std::string id = gen::canonical_id(spec_of(c));
    // mag / outliers / seed describe how a property case's values were drawn;
    // a fixture's values were not drawn, so its id stops before them.
    const auto tail = id.rfind(",mag=");
    if (tail != std::string::npos) id = id.substr(0, tail) + ")";
    return c.id + " " + id;
}

// ---- sharding ----------------------------------------------------------------------

namespace {

// A non-negative decimal integer, the whole string; nullopt otherwise.
std::optional<int> whole_number(const std::string& s) {
    if (s.empty() || s.size() > 9) return std::nullopt;
    for (char ch : s)
        if (ch < '0' || ch > '9') return std::nullopt;
    return std::stoi(s);
}

}  // namespace

std::optional<Shard> parse_shard(const std::string& text, std::string* error) {
    auto fail = [&](const std::string& why) -> std::optional<Shard> {
        if (error) *error = why;
        return std::nullopt;
    };
    const auto slash = text.find('/');
    if (slash == std::string::npos) return fail("expected INDEX/TOTAL (e.g. 0/4), found '" + text + "'");
    const auto i = whole_number(text.substr(0, slash)), n = whole_number(text.substr(slash + 1));
    if (!i || !n) return fail("expected INDEX/TOTAL as two whole numbers (e.g. 0/4), found '" + text + "'");
    if (*n < 1) return fail("TOTAL must be at least 1, found '" + text + "'");
    if (*i >= *n) return fail("INDEX counts from 0 and must be below TOTAL, found '" + text + "'");
    return Shard{*i, *n};
}

std::optional<Shard> resolve_shard(const std::string& flag, const char* env_index, const char* env_total,
                                   std::string* error) {
    auto fail = [&](const std::string& why) -> std::optional<Shard> {
        if (error) *error = why;
        return std::nullopt;
    };
    std::optional<Shard> from_env;
    if (env_index || env_total) {
        if (!env_index || !env_total)
            return fail(std::string("TEST_SHARD_INDEX and TEST_TOTAL_SHARDS must be set together; only ") +
                        (env_index ? "TEST_SHARD_INDEX" : "TEST_TOTAL_SHARDS") + " is set");
        std::string why;
        from_env = parse_shard(std::string(env_index) + "/" + env_total, &why);
        if (!from_env)
            return fail("TEST_SHARD_INDEX=" + std::string(env_index) + " TEST_TOTAL_SHARDS=" + env_total + ": " + why);
    }
    if (flag.empty()) return from_env ? *from_env : Shard{};
    std::string why;
    auto from_flag = parse_shard(flag, &why);
    if (!from_flag) return fail("--shard: " + why);
    if (from_env && (from_env->index != from_flag->index || from_env->total != from_flag->total))
        return fail(fmt::format("--shard {}/{} disagrees with TEST_SHARD_INDEX={} TEST_TOTAL_SHARDS={}",
                                from_flag->index, from_flag->total, from_env->index, from_env->total));
    return from_flag;
}

int shard_of(const std::string& key, int total) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64 bit: the same on every platform
    for (unsigned char ch : key) {
        h ^= ch;
        h *= 0x100000001b3ull;
    }
    return static_cast<int>(h % static_cast<uint64_t>(total < 1 ? 1 : total));
}

bool in_shard(const std::string& key, const Shard& s) {
    return !s.active() || shard_of(key, s.total) == s.index;
}

std::string fixture_key(const Case& c) {
    return c.file + ":/" + c.group;
}

void touch_shard_status_file(const char* path) {
    if (!path || !*path) return;
    std::ofstream f(path, std::ios::app);  // its existence is the message; never truncate
}

// ---- property cases ------------------------------------------------------------------

PropertySelection select_property(const gen::Stream& stream, int cases, const ParamFilter& params, const Shard& shard) {
    PropertySelection out;
    // Without a filter, case i is draw i, exactly as before --params existed.
    const int max_draws = params.active() ? std::max(kMaxDraws, cases) : cases;
    for (int i = 0; i < max_draws && out.matched < cases; ++i) {
        ++out.drawn;
        gen::CaseSpec spec = gen::draw(stream, i);
        std::string id = gen::canonical_id(spec);
        if (!params.matches(id)) continue;
        ++out.matched;
        (in_shard(id, shard) ? out.picks : out.outside).push_back({i, std::move(spec), std::move(id)});
    }
    return out;
}

// ---- trap dimensions -------------------------------------------------------------------

bool Dimension::relevant(Op op) const {
    return std::find(ops.begin(), ops.end(), op) != ops.end();
}

namespace {
enum Trap { kLayout, kTheta, kMaxPos, kQkNormTrap, kHeadsTrap, kWidths, kScaling, kRotary, kHeadDim, kKeys, kQueries,
            kDecodeSteps, kPosShape, kPosOrder, kScores, kScaledContext, kBatch, kPageSize, kSequences, kPagedQueries,
            kTwistDims };  // then one per twist row with a dimension (conform/twists.h)

// Ops whose position arrays need not increase (their result is defined by position alone).
std::vector<Op> ops_any_order() {
    std::vector<Op> out;
    for (const OpInfo& i : op_table())
        if (!i.positions.empty() && !i.uses(kResidual) && !i.uses(kPaged)) out.push_back(i.op);
    return out;
}
std::vector<Op> ops_with_heads() {
    std::vector<Op> out;
    for (const OpInfo& i : op_table())
        if (i.reads("head_dim")) out.push_back(i.op);
    return out;
}
// Keys with positions of their own (attention).
std::vector<Op> ops_with_keys() {
    std::vector<Op> out;
    for (const OpInfo& i : op_table())
        for (const PositionSpec& p : i.positions)
            if (p.n == Dim::S) out.push_back(i.op);
    return out;
}
}

// Ops whose cases carry positions (every position class applies to them);
// not index arrays (paged_attention's positions are implied by its batch).
std::vector<Op> ops_with_positions() {
    std::vector<Op> out;
    for (const OpInfo& i : op_table())
        if (!i.positions.empty() && !i.positions.front().index) out.push_back(i.op);
    return out;
}

// The twists' rows with a dimension, in the order their draws were added.
std::vector<const Twist*> twist_dims() {
    std::vector<const Twist*> r;
    for (const Twist& t : twist_table())
        if (t.dim) r.push_back(&t);
    std::stable_sort(r.begin(), r.end(), [](const Twist* a, const Twist* b) { return a->draw_rank < b->draw_rank; });
    return r;
}

const std::vector<Dimension>& dimensions() {
    static const std::vector<Dimension> d = [] {
    std::vector<Dimension> d = {
        {"layout", {"neox", "interleaved"}, ops_using(kRope)},
        {"theta", {"1e4", "5e5", ">=1e6", "other"}, ops_using(kRope)},
        {"max position", {"<512", "<4096", "<32768", ">=32768"}, ops_with_positions()},
        {"qk_norm", {"off", "on"}, ops_using(kQkNorm | kResidual)},  // a switch of the block's config
        // GQA's group: up to 4 query heads per kv head, or more (TinyLlama, Llama 3 70B: 8).
        {"heads", {"MHA", "GQA group<=4", "GQA group>4", "MQA"}, ops_using(kHeads)},
        // The widths a kernel vectorises over (D, F, head_dim; MLA's dc, dn + dr, dv): narrower than
        // one vector, a tail past whole 16-lane vectors, or whole vectors only.
        {"widths", {"<8", "tail", "x16"}, {kAllOps.begin(), kAllOps.end()}},
        {"rope scaling", {"none", "linear", "llama3", "yarn", "dynamic"}, ops_using(kRope)},
        // Partial rotary (GPT-NeoX, Phi, GLM): only the first rotary_dim dims of a head turn.
        {"rotary dims", {"whole head", "partial"}, ops_using(kRope)},
        // The head sizes kernels tile for.
        {"head_dim", {"<8", "8-32", "64", "80/96", "128", "256"}, ops_with_heads()},
        // Keys across the tiles of a flash kernel (64, 128 keys) and long.
        {"keys", {"<=64", "65-128", "129-2047", ">=2048"}, ops_with_keys()},
        // One decoding query, a chunk after cached keys, a prefill.
        {"queries", {"T=1", "T<S", "T=S"}, ops_with_keys()},
        // Tokens decoded one at a time after the prefill.
        {"decode steps", {"0", "1-15", "16-299", ">=300"}, ops_using(kKvCache)},
        // How the positions run: from 0, from an offset (a chunk, a long
        // sequence), with holes (packed, pruned).
        {"positions", {"from 0", "offset", "gaps"}, ops_with_positions()},
        // Out of order, repeated (tree-structured speculative decoding,
        // packed sequences): where positions alone define the result.
        {"position order", {"increasing", "not increasing"}, ops_any_order()},
        // The block's attention scores: drawn ~N(0, 1), or q and k scaled
        // (qk_gain) to ~16 or ~256 as in real models, where the softmax's
        // max, its online rescale and the mask decide the output.
        {"scores", {"~1", "~16", "~256"}, ops_using(kResidual)},
        // A scaling with an original context (llama3, yarn, dynamic): the
        // case's positions all inside it, or reaching past it, where the
        // long-context bands (and dynamic NTK's new base) take effect.
        {"scaled context", {"inside", "past original"}, ops_using(kRope)},
        // A paged batch (harness/gen/gen.cpp pick_batch): its size, its page
        // size, its sequences' key counts where kernels break (none, on a
        // page boundary: kv mod P in {P-1, 0, 1}, 8k and past) and its queries.
        {"batch", {"1", "2-4", "5-20"}, ops_using(kPaged)},
        {"page size", {"1", "5-16", "64-256"}, ops_using(kPaged)},
        {"sequences", {"empty", "page boundary", ">=8191 keys"}, ops_using(kPaged)},
        {"paged queries", {"decode", "chunk over a prefix", "prefill"}, ops_using(kPaged)},
    };
    // Each twist's, from its row: its classes (off / on unless it says), the ops that read it.
    for (const Twist* t : twist_dims()) {
        Dimension dim{t->dim, {}, {}};
        for (const char* c : t->classes) dim.classes.push_back(c);
        if (dim.classes.empty()) dim.classes = {"off", "on"};
        for (Op op : kAllOps)
            if (op_info(op).reads(*t)) dim.ops.push_back(op);
        d.push_back(std::move(dim));
    }
    return d;
    }();
    return d;
}

int64_t max_position(const Case& c) {
    int64_t m = 0;
    for (const auto& [name, p] : c.positions)
        for (int64_t v : p)
            m = std::max(m, v);
    return m;
}

namespace {

// What a twist's classifier sees of a case (conform/twists.h TwistSample).
class Sample final : public TwistSample {
   public:
    Sample(const Case& c, const gen::CaseSpec& s, int64_t keys) : c_(c), s_(s), keys_(keys) {}
    const BlockConfig& config() const override { return c_.config; }
    Op op() const override { return c_.op; }
    int64_t keys() const override { return keys_; }
    // σ as the generator scales the scores (gen::score_scale): a drawn case's
    // id says; a fixture's scores are taken at ~1.
    double sigma() const override {
        const auto drawn = gen::parse_case_id(c_.id);
        return drawn ? gen::score_scale(*drawn) : 1.0;
    }
    const std::vector<float>* input(const char* name) const override {
        const auto it = c_.inputs.find(name);
        return it == c_.inputs.end() ? nullptr : &it->second.data;
    }
    bool some_causal_pair(bool (*hidden)(int64_t, int64_t, double), double param) const override {
        if (op_info(c_.op).uses(kPaged)) {  // each sequence's last query sees its every key
            const auto& kvp = c_.pos("kv_indptr");
            const auto& last = c_.pos("kv_last_page_len");
            for (size_t b = 0; b < last.size(); ++b) {
                const int64_t n = kvp[b + 1] - kvp[b], kv = n == 0 ? 0 : (n - 1) * c_.config.page_size + last[b];
                for (int64_t k = 0; k < kv; ++k)
                    if (hidden(k, kv - 1, param)) return true;
            }
            return false;
        }
        const bool attn = c_.op == Op::attention;
        const auto& qp = c_.pos(attn ? "q_positions" : "positions");
        const auto& kp = c_.pos(attn ? "k_positions" : "positions");
        for (int64_t q : qp)
            for (int64_t k : kp)
                if (k <= q && hidden(k, q, param)) return true;
        return false;
    }
    // What the cache write divides by its scale: decode's own k_rot and v
    // (the reference's block taps), a paged batch's owned rows.
    double cache_saturation() const override {
        const KvCacheDtype d = c_.config.kv_cache_dtype;
        if (d == KvCacheDtype::none || !c_.inputs.count("k_scale")) return 0;
        const double top = fp8_format(d).max;
        const int64_t hd = c_.config.head_dim;
        double worst = 0;
        auto see = [&](float x, const Tensor& sc, int64_t col) {
            const float scale = sc.data[static_cast<size_t>(sc.numel() == 1 ? 0 : col / hd)];
            worst = std::max(worst, std::fabs(static_cast<double>(x) / scale) / top);
        };
        if (c_.op == Op::decode) {
            ref::Options o;
            o.decode_taps = true;
            const NamedD taps = ref::run(c_, o);
            for (const auto& [tap, scale] : {std::pair<const char*, const char*>{"k_rot", "k_scale"}, {"v", "v_scale"}}) {
                const DTensor& t = taps.at(tap);
                for (size_t i = 0; i < t.data.size(); ++i)
                    see(static_cast<float>(t.data[i]), c_.in(scale), static_cast<int64_t>(i) % t.cols());
            }
            return worst;
        }
        for (const char* pool : {"k_cache", "v_cache"}) {
            const Tensor& t = c_.in(pool);
            const Tensor& sc = c_.in(std::string(pool) == "k_cache" ? "k_scale" : "v_scale");
            for_each_owned_row(c_, [&](int64_t, int64_t r) {
                for (int64_t j = 0; j < t.cols(); ++j) see(t.data[static_cast<size_t>(r * t.cols() + j)], sc, j);
            });
        }
        return worst;
    }

   private:
    const Case& c_;
    const gen::CaseSpec& s_;
    int64_t keys_;
};

}  // namespace

std::vector<std::vector<int>> classes_of(const Case& cs) {
    const gen::CaseSpec s = spec_of(cs);
    const int64_t max_pos = max_position(cs);
    const auto& dims = dimensions();
    std::vector<std::vector<int>> out(dims.size());
    auto width_class = [](int64_t w) { return w < 8 ? 0 : (w % 16 != 0 ? 1 : 2); };
    // A paged batch's longest sequence, in keys.
    auto paged_keys = [&]() {
        const auto& kvp = cs.pos("kv_indptr");
        const auto& last = cs.pos("kv_last_page_len");
        int64_t keys = 0;
        for (size_t b = 0; b < last.size(); ++b) {
            const int64_t n = kvp[b + 1] - kvp[b];
            keys = std::max(keys, n == 0 ? 0 : (n - 1) * cs.config.page_size + last[b]);
        }
        return keys;
    };
    const std::vector<const Twist*> twists = twist_dims();
    const Sample sample(cs, s, op_info(cs.op).uses(kPaged) ? paged_keys() : cs.op == Op::attention ? s.S : s.T);
    for (size_t d = 0; d < dims.size(); ++d) {
        if (!dims[d].relevant(s.op)) continue;
        std::vector<int>& c = out[d];
        if (d >= kTwistDims) {  // a twist's: its row's classifier
            const Twist& t = *twists[d - kTwistDims];
            const uint32_t mask = t.classify ? t.classify(sample) : twist_on(t, cs.config) ? 2u : 1u;
            for (int i = 0; i < 32; ++i)
                if (mask & (1u << i)) c.push_back(i);
            continue;
        }
        switch (static_cast<Trap>(d)) {
            case kLayout: c.push_back(s.config.rope_layout == RopeLayout::neox ? 0 : 1); break;
            case kTheta: c.push_back(s.config.rope_theta == 10000.0 ? 0 : s.config.rope_theta == 500000.0 ? 1 : s.config.rope_theta >= 1e6 ? 2 : 3); break;
            case kMaxPos: c.push_back(max_pos < 512 ? 0 : max_pos < 4096 ? 1 : max_pos < 32768 ? 2 : 3); break;
            case kQkNormTrap: c.push_back(s.config.qk_norm ? 1 : 0); break;
            case kHeadsTrap:
                c.push_back(s.config.n_kv_heads == s.config.n_heads      ? 0
                            : s.config.n_kv_heads == 1            ? 3
                            : s.config.n_heads / s.config.n_kv_heads <= 4 ? 1
                                                           : 2);
                break;
            case kWidths: {
                // The widths a kernel vectorises over, as far as the op has them.
                const OpInfo& info = op_info(s.op);
                std::vector<int64_t> widths;
                if (info.has_dim(Dim::D)) widths.push_back(s.config.d_model);
                if (info.has_dim(Dim::F)) widths.push_back(s.config.ffn_dim);
                if (info.reads("head_dim")) widths.push_back(s.config.head_dim);
                if (info.uses(kMla))  // the latent, a query head, a value head
                    for (int64_t w : {s.config.kv_lora_rank, s.config.mla_qk_dim(), s.config.v_head_dim}) widths.push_back(w);
                for (int64_t w : widths)
                    c.push_back(width_class(w));
                std::sort(c.begin(), c.end());
                c.erase(std::unique(c.begin(), c.end()), c.end());
                break;
            }
            // Classes in RopeScalingType's order.
            case kScaling: c.push_back(static_cast<int>(cs.config.rope_scaling.type)); break;
            case kRotary: c.push_back(cs.config.rotary() < cs.config.head_dim ? 1 : 0); break;
            case kHeadDim: {
                const int64_t hd = cs.config.head_dim;
                c.push_back(hd < 8 ? 0 : hd <= 32 ? 1 : hd == 64 ? 2 : (hd == 80 || hd == 96) ? 3 : hd == 128 ? 4 : hd == 256 ? 5 : 1);
                break;
            }
            case kKeys: c.push_back(s.S <= 64 ? 0 : s.S <= 128 ? 1 : s.S < 2048 ? 2 : 3); break;
            case kQueries: c.push_back(s.T == 1 ? 0 : s.T < s.S ? 1 : 2); break;
            case kDecodeSteps: {
                const int64_t steps = s.T - cs.prefill;
                c.push_back(steps == 0 ? 0 : steps < 16 ? 1 : steps < 300 ? 2 : 3);
                break;
            }
            case kScores: c.push_back(s.qk_gain <= 1 ? 0 : s.qk_gain <= 4 ? 1 : 2); break;
            case kScaledContext: {
                const RopeScalingType t = cs.config.rope_scaling.type;
                if (t == RopeScalingType::llama3 || t == RopeScalingType::yarn || t == RopeScalingType::dynamic)
                    c.push_back(max_pos + 1 > cs.config.rope_scaling.original_max_position ? 1 : 0);
                break;
            }
            case kBatch: {
                const int64_t B = static_cast<int64_t>(cs.pos("kv_last_page_len").size());
                c.push_back(B == 1 ? 0 : B <= 4 ? 1 : 2);
                break;
            }
            case kPageSize: {
                const int64_t P = cs.config.page_size;
                c.push_back(P == 1 ? 0 : P <= 16 ? 1 : 2);
                break;
            }
            case kSequences:
            case kPagedQueries: {
                const auto& qo = cs.pos("qo_indptr");
                const auto& kvp = cs.pos("kv_indptr");
                const auto& last = cs.pos("kv_last_page_len");
                const int64_t P = cs.config.page_size;
                for (size_t b = 0; b < last.size(); ++b) {
                    const int64_t n = kvp[b + 1] - kvp[b], kv = n == 0 ? 0 : (n - 1) * P + last[b];
                    const int64_t q = qo[b + 1] - qo[b];
                    if (static_cast<Trap>(d) == kSequences) {
                        if (kv == 0) c.push_back(0);
                        else if (P > 1 && (kv % P == 0 || kv % P == 1 || kv % P == P - 1)) c.push_back(1);
                        if (kv >= 8191) c.push_back(2);
                    } else if (q > 0 && kv > 0) {
                        c.push_back(q == kv ? 2 : q == 1 ? 0 : 1);
                    }
                }
                std::sort(c.begin(), c.end());
                c.erase(std::unique(c.begin(), c.end()), c.end());
                break;
            }
            case kTwistDims: break;  // the twists' dimensions: above
            case kPosShape:
            case kPosOrder: {
                // Every position input of the case.
                bool from0 = true, gaps = false, increasing = true, offset = false;
                for (const auto& [name, p] : cs.positions) {
                    if (p.empty()) continue;
                    from0 = from0 && p.front() == 0;
                    offset = offset || p.front() > 0;
                    for (size_t i = 1; i < p.size(); ++i) {
                        if (p[i] <= p[i - 1]) increasing = false;
                        else if (p[i] > p[i - 1] + 1) gaps = true;
                    }
                }
                if (static_cast<Trap>(d) == kPosOrder) c.push_back(increasing ? 0 : 1);
                else if (gaps) c.push_back(2);
                else c.push_back(offset ? 1 : 0);
                break;
            }
        }
    }
    return out;
}

// ---- progress ------------------------------------------------------------------------

namespace {
std::string clock(double s) {
    const long t = s < 0 ? 0 : static_cast<long>(s + 0.5);
    if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60);
    return fmt::format("{}:{:02}", t / 60, t % 60);
}
}  // namespace

std::string progress_text(int done, int total, int failures, double elapsed_s) {
    const int pct = total > 0 ? static_cast<int>(100.0 * done / total) : 100;
    const int width = static_cast<int>(std::to_string(std::max(total, 0)).size());
    // The rate so far predicts the rest; before the first case there is no rate.
    const std::string eta = done > 0 && done <= total ? clock(elapsed_s * (total - done) / done) : "-:--";
    return fmt::format("[{:>{}}/{}] {:>3}%  {} failed  {} elapsed  ETA {}", done, width, total, pct, failures,
                       clock(elapsed_s), eta);
}

Progress::Progress(std::ostream& os, bool enabled, int total)
    : os_(os), enabled_(enabled), total_(total), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
    finish();
}

void Progress::update(int done, int failures) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (shown_ && done < total_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    shown_ = true;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const std::string line = "\r\033[K" + progress_text(done, total_, failures, elapsed);
    std::lock_guard<std::mutex> g(stderr_mutex());  // not in the middle of a worker's relayed line
    os_ << line << std::flush;
}

void Progress::finish() {
    if (!enabled_ || !shown_) return;
    std::lock_guard<std::mutex> g(stderr_mutex());
    os_ << "\r\033[K" << std::flush;  // the table follows on a clean line
    shown_ = false;
}

bool progress_wanted(bool quiet, bool json) {
    return !quiet && !json && ::isatty(STDERR_FILENO) == 1;
}

}  // namespace conform::select

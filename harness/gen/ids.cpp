// Canonical case ids and their parser. An id is the op and its fields,
//   rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,mag=1,outliers=0,seed=12)
// each field written only where the case has it (RoPE scaling, a twist, a
// shape of positions), so every id written before a field existed still
// parses to the same case. The twists' fields come from their rows
// (conform/twists.h), after the op's own, in the rows' order.
//
// The parser is strict: every field once, every value the whole token and in
// range, every size bounded before anything is allocated for it.
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "core/limits.h"
#include "gen/detail.h"

namespace conform::gen {

using detail::batch_totals;
using detail::pool_pages;

namespace {

std::string num(double v) {
    std::ostringstream o;
    o.precision(17);
    o << v;
    return o.str();
}
std::string I(int64_t v) { return std::to_string(v); }

using Fields = std::vector<std::pair<std::string, std::string>>;

// The RoPE fields of an id beyond theta, each only when not the default: the
// rotated width, and a scaling's type and the parameters that type takes
// (the config's core fields, by their id names).
void rope_extras(const CaseSpec& s, Fields& f) {
    if (s.config.rotary_dim != 0) f.emplace_back("rd", I(s.config.rotary_dim));
    const RopeScaling& sc = s.config.rope_scaling;
    if (sc.type == RopeScalingType::none) return;
    f.emplace_back("scaling", to_string(sc.type));
    BlockConfig c;
    c.rope_scaling = sc;
    for_each_field(c, [&](const ConfigField& cf, const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, double>) {
            if (cf.applies(sc.type)) f.emplace_back(cf.id, num(v));
        } else if constexpr (std::is_same_v<V, int64_t>) {
            if (cf.applies(sc.type)) f.emplace_back(cf.id, I(v));
        }
    });
}

bool is_rope_extra(const std::string& k) {
    bool extra = k == "rd" || k == "scaling";
    for_each_field(BlockConfig{}, [&](const ConfigField& cf, const auto&) { extra = extra || (cf.is_scaling_param() && k == cf.id); });
    return extra;
}

// Whether a twist's field is in an id: when on, or (written both ways, as
// kv_scale's tensor / head) whenever it applies.
bool written(const Twist& t, const BlockConfig& c) {
    if (t.core) return false;  // the op's own fields carry it
    if (t.applies && !t.applies(c)) return false;
    return twist_on(t, c) || (t.applies && t.spell.size() == 2);
}

// The op's own fields (its sizes, positions and core conventions), in the
// order its ids have always had them. A switch on the op: what an id of
// each op names is part of the id format, which outlives any table.
Fields op_fields(const CaseSpec& s) {
    Fields f;
    auto add = [&](const char* k, std::string v) { f.emplace_back(k, std::move(v)); };
    auto shape = [&] {
        if (s.shape != CaseSpec::Shape::contiguous) add("positions", to_string(s.shape));
    };
    const BlockConfig& c = s.config;
    // The op's shape fields, one line per op (its draw is draw.cpp's make());
    // the twists' fields come from their rows after these.
    switch (s.op) {
        case Op::rmsnorm: add("T", I(s.T)); add("D", I(c.d_model)); add("eps", num(c.norm_eps)); break;
        case Op::rope:
            add("T", I(s.T)); add("n", I(c.n_heads)); add("hd", I(c.head_dim));
            add("layout", to_string(c.rope_layout)); add("theta", num(c.rope_theta)); rope_extras(s, f); add("pos", I(s.pos));
            shape();
            break;
        case Op::qk_norm: add("T", I(s.T)); add("n", I(c.n_heads)); add("hd", I(c.head_dim)); add("eps", num(c.norm_eps)); break;
        case Op::attention:
            add("T", I(s.T)); add("S", I(s.S)); add("H", I(c.n_heads)); add("KV", I(c.n_kv_heads));
            add("hd", I(c.head_dim)); add("qpos", I(s.pos)); add("kpos", I(s.kpos));
            shape();
            break;
        case Op::swiglu: add("T", I(s.T)); add("D", I(c.d_model)); add("F", I(c.ffn_dim)); break;
        case Op::moe:
        case Op::moe_route:
        case Op::moe_experts:
            add("T", I(s.T)); add("D", I(c.d_model)); add("E", I(c.n_experts)); add("K", I(c.n_experts_per_tok));
            if (s.op != Op::moe_route) add("Fe", I(c.moe_ffn_dim));
            break;
        case Op::paged_attention: {
            auto list = [&](const std::vector<int64_t>& v) {
                std::string o;
                for (int64_t x : v) o += (o.empty() ? "" : "/") + I(x);
                return o;
            };
            add("H", I(c.n_heads)); add("KV", I(c.n_kv_heads)); add("hd", I(c.head_dim));
            add("P", I(c.page_size)); add("kv", list(s.kv_lens)); add("q", list(s.q_lens));
            if (s.pool != 3) add("pool", I(s.pool));
            break;
        }
        case Op::mla_attention: {
            std::string kvs, qs;
            for (int64_t x : s.kv_lens) kvs += (kvs.empty() ? "" : "/") + I(x);
            for (int64_t x : s.q_lens) qs += (qs.empty() ? "" : "/") + I(x);
            add("H", I(c.n_heads)); add("dc", I(c.kv_lora_rank)); add("dn", I(c.qk_nope_head_dim));
            add("dr", I(c.qk_rope_head_dim)); add("dv", I(c.v_head_dim));
            add("P", I(c.page_size)); add("kv", kvs); add("q", qs);
            if (s.pool != 3) add("pool", I(s.pool));
            break;
        }
        case Op::block:
        case Op::decode:
            add("T", I(s.T)); add("D", I(c.d_model)); add("H", I(c.n_heads)); add("KV", I(c.n_kv_heads));
            add("hd", I(c.head_dim)); add("F", I(c.ffn_dim)); add("layout", to_string(c.rope_layout));
            add("theta", num(c.rope_theta)); rope_extras(s, f); add("qk_norm", c.qk_norm ? "1" : "0"); add("eps", num(c.norm_eps));
            add("pos", I(s.pos));
            shape();
            if (s.op == Op::decode) add("prefill", I(s.prefill));
            if (s.qk_gain != 1.0) add("qk_gain", num(s.qk_gain));
            break;
    }
    return f;
}

Fields fields(const CaseSpec& s) {
    Fields f = op_fields(s);
    const OpInfo& info = op_info(s.op);
    for (const Twist& t : twist_table()) {
        if (!info.reads(t) || !written(t, s.config)) continue;
        f.emplace_back(t.id, twist_text(t, s.config));
        if (t.mean_id && s.bias_mean != 0.0) f.emplace_back(t.mean_id, num(s.bias_mean));
    }
    f.emplace_back("mag", num(s.mag));
    f.emplace_back("outliers", I(s.outliers));
    f.emplace_back("seed", std::to_string(s.seed));
    if (s.layer >= 0) {
        f.emplace_back("layer", I(s.layer));
        if (s.model_inputs) f.emplace_back("inputs", "model");
    }
    return f;
}

// ---- parsing ----------------------------------------------------------------------------

// A field's value, strictly: the whole token, in range.
struct Reader {
    std::string* why;
    std::string key, text;

    bool fail(const std::string& expected) {
        *why = "field '" + key + "': expected " + expected + ", found '" + text.substr(0, 40) +
               (text.size() > 40 ? "...'" : "'");
        return false;
    }
    bool integer(int64_t lo, int64_t hi, int64_t& out) {
        const std::string expected = "a whole number in [" + I(lo) + ", " + I(hi) + "]";
        size_t i = 0;
        const bool neg = !text.empty() && text[0] == '-';
        if (neg) i = 1;
        if (i == text.size() || text.size() - i > 19) return fail(expected);
        int64_t v = 0;
        for (; i < text.size(); ++i) {
            if (text[i] < '0' || text[i] > '9') return fail(expected);
            if (v > (std::numeric_limits<int64_t>::max() - (text[i] - '0')) / 10) return fail(expected);
            v = v * 10 + (text[i] - '0');
        }
        if (neg) v = -v;
        if (v < lo || v > hi) return fail(expected);
        out = v;
        return true;
    }
    bool unsigned64(uint64_t& out) {
        if (text.empty() || text.size() > 20) return fail("a whole number >= 0");
        uint64_t v = 0;
        for (char ch : text) {
            if (ch < '0' || ch > '9') return fail("a whole number >= 0");
            const uint64_t d = static_cast<uint64_t>(ch - '0');
            if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return fail("a whole number below 2^64");
            v = v * 10 + d;
        }
        out = v;
        return true;
    }
    // A finite number in [lo, hi] (lo_open: > lo).
    bool real(double lo, double hi, bool lo_open, double& out) {
        const std::string expected = std::string("a finite number ") + (lo_open ? "> " : ">= ") + num(lo) +
                                     (hi < std::numeric_limits<double>::max() ? " and <= " + num(hi) : std::string());
        const auto v = twist_detail::finite_number(text, 40);
        if (!v || (lo_open ? !(*v > lo) : !(*v >= lo)) || *v > hi) return fail(expected);
        out = *v;
        return true;
    }
};

constexpr int64_t kMaxCount = limits::kPosition;    // positions, tokens: far past any context
constexpr int64_t kMaxElements = int64_t{1} << 28;  // one tensor of a case (a GiB of float32)
constexpr int64_t kMaxExpertElements = int64_t{1} << 30;  // a layer's stacked experts (4 GiB of float32)

// a * b, or -1 past `cap` (or on overflow).
int64_t product(std::initializer_list<int64_t> xs, int64_t cap) {
    int64_t p = 1;
    for (int64_t x : xs)
        if (x < 0 || __builtin_mul_overflow(p, x, &p) || p > cap) return -1;
    return p;
}

// A scaling parameter's id field (the config's core table) into sc; false
// when k names none.
bool scaling_param(Reader& r, RopeScaling& sc, bool* ok) {
    BlockConfig c;
    c.rope_scaling = sc;
    bool found = false;
    *ok = true;
    for_each_field(c, [&](const ConfigField& cf, auto& field) {
        using V = std::decay_t<decltype(field)>;
        if (!cf.is_scaling_param() || r.key != cf.id) return;
        found = true;
        if constexpr (std::is_same_v<V, double>) *ok = r.real(0, std::numeric_limits<double>::max(), false, field);
        else if constexpr (std::is_same_v<V, int64_t>) *ok = r.integer(0, kMaxCount, field);
    });
    if (found && *ok) sc = c.rope_scaling;
    return found;
}

}  // namespace

std::string canonical_id(const CaseSpec& s) {
    std::string id = std::string(to_string(s.op)) + "(";
    bool first = true;
    for (const auto& [k, v] : fields(s)) {
        id += (first ? "" : ",") + k + "=" + v;
        first = false;
    }
    return id + ")";
}

std::optional<CaseSpec> parse_case_id(const std::string& id, std::string* error) {
    std::string why;
    const std::string shown = id.size() > 300 ? id.substr(0, 300) + "..." : id;
    auto fail = [&](const std::string& msg) -> std::optional<CaseSpec> {
        if (error) *error = "case id '" + shown + "': " + msg;
        return std::nullopt;
    };
    if (id.size() > 65536) return fail("longer than 64 KiB");
    const auto open = id.find('(');
    if (open == std::string::npos || id.empty() || id.back() != ')') return fail("expected op(key=value,...)");
    const auto op = parse_op(id.substr(0, open));
    if (!op) return fail("unknown op '" + id.substr(0, std::min<size_t>(open, 40)) + "'");
    CaseSpec s;
    s.op = *op;
    const OpInfo& info = op_info(s.op);
    std::map<std::string, std::string> kv;
    {
        std::stringstream body(id.substr(open + 1, id.size() - open - 2));
        std::string item;
        while (std::getline(body, item, ',')) {
            const auto eq = item.find('=');
            if (eq == std::string::npos) return fail("field '" + item.substr(0, 40) + "' is not key=value");
            const std::string k = item.substr(0, eq);
            if (kv.count(k)) return fail("field '" + k.substr(0, 40) + "' given twice");
            kv[k] = item.substr(eq + 1);
        }
    }
    // Every field the op's own id carries must be present.
    for (const auto& [k, v] : op_fields(s)) {
        (void)v;
        const bool optional = k == "positions" || k == "pool" || k == "qk_gain" || is_rope_extra(k);
        if (!optional && !kv.count(k)) return fail("missing field '" + k + "'");
    }
    Reader r{&why, "", ""};
    auto read = [&](const std::string& k) -> Reader& {
        r.key = k;
        r.text = kv.at(k);
        return r;
    };
    BlockConfig& c = s.config;
    // The op's own fields; what is left are twists' (or nothing known).
    std::set<std::string> done;
    auto take = [&](const char* k, auto&& f) -> bool {
        if (!kv.count(k)) return true;
        done.insert(k);
        return f(read(k));
    };
    auto count = [&](const char* k, int64_t lo, int64_t hi, int64_t& out) {
        return take(k, [&](Reader& x) { return x.integer(lo, hi, out); });
    };
    bool ok = count("T", 1, kMaxCount, s.T) && count("S", 1, kMaxCount, s.S) && count("n", 1, 1 << 16, c.n_heads) &&
              count("H", 1, 1 << 16, c.n_heads) && count("KV", 1, 1 << 16, c.n_kv_heads) &&
              count("hd", 1, 1 << 16, c.head_dim) && count("D", 1, 1 << 24, c.d_model) && count("F", 1, 1 << 24, c.ffn_dim) &&
              count("pos", 0, kMaxCount, s.pos) && count("qpos", 0, kMaxCount, s.pos) &&
              count("kpos", 0, kMaxCount, s.kpos) && count("P", 1, 1 << 16, c.page_size) &&
              count("pool", 1, 64, s.pool) && count("prefill", 0, kMaxCount, s.prefill) &&
              count("outliers", 0, 1 << 24, s.outliers) && count("rd", 0, 1 << 16, c.rotary_dim) &&
              count("layer", 0, 1 << 20, s.layer) && count("E", 1, 1 << 16, c.n_experts) &&
              count("K", 1, 1 << 16, c.n_experts_per_tok) && count("Fe", 1, 1 << 24, c.moe_ffn_dim) &&
              count("dc", 1, 1 << 16, c.kv_lora_rank) && count("dn", 1, 1 << 16, c.qk_nope_head_dim) &&
              count("dr", 1, 1 << 16, c.qk_rope_head_dim) && count("dv", 1, 1 << 16, c.v_head_dim) &&
              take("seed", [&](Reader& x) { return x.unsigned64(s.seed); }) &&
              take("theta", [&](Reader& x) { return x.real(1, std::numeric_limits<double>::max(), true, c.rope_theta); }) &&
              take("eps", [&](Reader& x) { return x.real(0, 1, true, c.norm_eps); }) &&
              take("mag", [&](Reader& x) { return x.real(0, 1e30, true, s.mag); }) &&
              take("qk_gain", [&](Reader& x) { return x.real(0, 1e30, true, s.qk_gain); }) &&
              take("layout", [&](Reader& x) {
                  const auto l = parse_rope_layout(x.text);
                  if (!l) return x.fail("neox or interleaved");
                  c.rope_layout = *l;
                  return true;
              }) &&
              take("qk_norm", [&](Reader& x) {
                  if (x.text != "0" && x.text != "1") return x.fail("0 or 1");
                  c.qk_norm = x.text == "1";
                  return true;
              }) &&
              take("scaling", [&](Reader& x) {
                  const auto t = parse_rope_scaling_type(x.text);
                  if (!t || *t == RopeScalingType::none) return x.fail("linear, llama3, yarn or dynamic");
                  c.rope_scaling.type = *t;
                  return true;
              }) &&
              take("inputs", [&](Reader& x) {
                  if (x.text != "model") return x.fail("model (drawn inputs have no field)");
                  s.model_inputs = true;
                  return true;
              }) &&
              take("positions", [&](Reader& x) {
                  // A block's positions are one sequence: increasing, holes allowed.
                  const bool any_order = !info.uses(kResidual);
                  for (auto sh : {CaseSpec::Shape::gaps, CaseSpec::Shape::restarts, CaseSpec::Shape::shuffled})
                      if (x.text == to_string(sh) && (any_order || sh == CaseSpec::Shape::gaps)) {
                          s.shape = sh;
                          return true;
                      }
                  return x.fail(any_order ? "gaps, restarts or shuffled" : "gaps (a block's are increasing)");
              });
    if (!ok) return fail(why);
    for (const char* list : {"kv", "q"}) {
        if (!kv.count(list)) continue;
        done.insert(list);
        std::vector<int64_t>& out = std::string(list) == "kv" ? s.kv_lens : s.q_lens;
        std::stringstream items(kv.at(list));
        std::string one;
        while (std::getline(items, one, '/')) {
            Reader item{&why, list, one};
            int64_t n = 0;
            if (!item.integer(0, kMaxCount, n) || out.size() >= 4096)
                return fail("field '" + std::string(list) + "' must be at most 4096 '/'-separated counts >= 0, found '" +
                            kv.at(list).substr(0, 40) + "'");
            out.push_back(n);
        }
    }
    // Which fields belong to the op: those its own id writes, its RoPE's, its twists'.
    std::set<std::string> own;
    {
        CaseSpec all = s;
        all.shape = info.uses(kResidual) ? CaseSpec::Shape::gaps : CaseSpec::Shape::shuffled;
        all.pool = 1;
        all.qk_gain = 2;
        for (const auto& [k, v] : op_fields(all)) own.insert(k);
        if (info.uses(kRope)) own.insert({"rd", "scaling"});
        for (const char* k : {"mag", "outliers", "seed", "layer", "inputs"}) own.insert(k);
    }
    for (const auto& [k, v] : kv)
        if (done.count(k) && !own.count(k) && !is_rope_extra(k))
            return fail("field '" + k + "' does not apply to op " + std::string(to_string(s.op)));
    // The twists, from their rows: only on an op that reads them, each value
    // strict and in range, and only where it applies.
    for (const Twist& t : twist_table()) {
        if (t.core) continue;
        for (const char* key : {t.id, t.mean_id}) {
            if (!key || !kv.count(key)) continue;
            done.insert(key);
            if (!info.reads(t)) return fail("field '" + std::string(key) + "' does not apply to op " + to_string(s.op));
        }
        if (!kv.count(t.id)) {
            if (t.mean_id && kv.count(t.mean_id))
                return fail("field '" + std::string(t.mean_id) + "' without " + t.id + ": it is the mean of its tensors");
            continue;
        }
        const auto v = parse_twist_text(t, kv.at(t.id), &why);
        if (!v) return fail("field '" + std::string(t.id) + "': " + why);
        set_twist_value(t, c, *v);
        if (!twist_on(t, c) && !written(t, c))
            return fail("field '" + std::string(t.id) + "': " + kv.at(t.id) + " is its off value, and an id carries it only when on");
        if (t.mean_id && kv.count(t.mean_id) && !twist_on(t, c))
            return fail("field '" + std::string(t.mean_id) + "' without " + t.id + ": it is the mean of its tensors");
        if (t.mean_id && kv.count(t.mean_id)) {
            Reader m{&why, t.mean_id, kv.at(t.mean_id)};
            if (!m.real(-1e30, 1e30, false, s.bias_mean)) return fail(why);
        }
    }
    for (const Twist& t : twist_table()) {
        if (t.core || !t.applies || !info.reads(t)) continue;
        if (!t.applies(c) && kv.count(t.id)) return fail("field '" + std::string(t.id) + "' does not apply to this case: " + t.lacks);
        if (t.applies(c) && written(t, c) && !kv.count(t.id))
            return fail("missing field '" + std::string(t.id) + "' (it is written whenever it applies)");
    }
    // The RoPE extras: exactly those the case's id would carry (a scaling's
    // parameters, none of another type's), and values that make a RoPE.
    for (const auto& [k, v] : kv) {
        if (!is_rope_extra(k) || k == "rd" || k == "scaling") continue;
        done.insert(k);
        bool param_ok = true;
        r.key = k;
        r.text = v;
        if (!scaling_param(r, c.rope_scaling, &param_ok)) return fail("unknown field '" + k + "'");
        if (!param_ok) return fail(why);
    }
    for (const auto& [k, v] : kv)
        if (!done.count(k)) return fail("unknown field '" + k.substr(0, 40) + "'");
    {
        Fields extras;
        const bool rope = info.uses(kRope);
        if (rope) rope_extras(s, extras);
        for (const auto& [k, v] : extras)
            if (!kv.count(k))
                return fail("missing field '" + k + "' (scaling=" + to_string(c.rope_scaling.type) + " needs it)");
        for (const auto& [k, v] : kv) {
            if (!is_rope_extra(k)) continue;
            bool printed = false;
            for (const auto& e : extras) printed = printed || e.first == k;
            if (!printed)
                return fail("field '" + k + "' does not apply to " +
                            (rope ? "scaling=" + std::string(to_string(c.rope_scaling.type))
                                  : "op " + std::string(to_string(s.op))));
        }
        if (c.head_dim % 2 == 0 && c.head_dim > 0)
            if (auto bad = rope_config_problem(c)) return fail(bad->first + ": " + bad->second);
    }
    if (s.model_inputs && s.layer < 0) return fail("inputs=model needs layer=N (a checkpoint's layer)");
    if (info.uses(kPaged)) {
        if (s.kv_lens.empty() || s.kv_lens.size() != s.q_lens.size())
            return fail("kv and q must list the same number (>= 1) of sequences, found " + I(static_cast<int64_t>(s.kv_lens.size())) +
                        " and " + I(static_cast<int64_t>(s.q_lens.size())));
        for (size_t b = 0; b < s.kv_lens.size(); ++b)
            if (s.q_lens[b] > std::max<int64_t>(s.kv_lens[b], 1))
                return fail("sequence " + I(static_cast<int64_t>(b)) + " has more queries (" + I(s.q_lens[b]) +
                            ") than keys (" + I(s.kv_lens[b]) + ")");
        int64_t keys = 0;
        for (int64_t k : s.kv_lens)
            if (__builtin_add_overflow(keys, k, &keys) || keys > kMaxElements) return fail("case too large (its keys)");
        // Bounded as attention's keys and scores are (below): what the float64 reference holds.
        const int64_t row = s.op == Op::mla_attention ? c.kv_lora_rank + c.qk_rope_head_dim : c.n_kv_heads * c.head_dim;
        if (product({pool_pages(s), c.page_size, row}, int64_t{1} << 26) < 0)
            return fail("case too large (pages x P x its row (KV x hd; MLA: dc + dr) past 2^26: its pool of pages)");
        int64_t scores = 0;
        for (size_t b = 0; b < s.kv_lens.size(); ++b) {
            const int64_t sb = product({std::max<int64_t>(s.q_lens[b], 1), std::max<int64_t>(s.kv_lens[b], 1), c.n_heads},
                                       int64_t{1} << 27);
            if (sb < 0 || __builtin_add_overflow(scores, sb, &scores) || scores > (int64_t{1} << 27))
                return fail("case too large (q x kv x H past 2^27: its scores)");
        }
        // MLA's reference maps every key's latent through kv_b_proj.
        if (s.op == Op::mla_attention &&
            product({keys, c.kv_lora_rank, c.n_heads, c.qk_nope_head_dim + c.v_head_dim}, int64_t{1} << 33) < 0)
            return fail("case too large (keys x dc x H x (dn + dv) past 2^33: kv_b_proj over its keys)");
        batch_totals(s);
        if (s.T < 1) return fail("the batch has no query (q lists only zeros)");
    }
    if (!info.uses(kHeads)) c.n_kv_heads = c.n_heads;  // heads in x only (rope, qk_norm): no kv heads
    if (c.n_heads % c.n_kv_heads != 0)
        return fail("H = " + I(c.n_heads) + " must be a multiple of KV = " + I(c.n_kv_heads));
    if (s.prefill > s.T) return fail("prefill = " + I(s.prefill) + " must be <= T = " + I(s.T));
    // Every tensor the case would draw, bounded before anything is drawn.
    const int64_t Q = product({c.n_heads, c.head_dim}, kMaxElements);
    const int64_t KVW = product({c.n_kv_heads, c.head_dim}, kMaxElements);
    if (Q < 0 || KVW < 0) return fail("case too large (heads x head_dim)");
    for (int64_t cols : {c.d_model, Q, c.ffn_dim})
        if (product({s.T, cols}, kMaxElements) < 0) return fail("case too large (T x its widths)");
    if (info.has_dim(Dim::F) && product({c.d_model, c.ffn_dim}, kMaxElements) < 0) return fail("case too large (D x F)");
    if (info.has_dim(Dim::Q) && info.has_dim(Dim::D) && product({c.d_model, Q}, kMaxElements) < 0)
        return fail("case too large (D x heads)");
    if (info.reads("n_experts")) {
        if (c.n_experts_per_tok > c.n_experts)
            return fail("K = " + I(c.n_experts_per_tok) + " must be <= E = " + I(c.n_experts));
        if (c.moe_n_group > 0 && (c.n_experts % c.moe_n_group != 0 || c.moe_topk_group > c.moe_n_group ||
                                  c.moe_topk_group * (c.n_experts / c.moe_n_group) < c.n_experts_per_tok))
            return fail("n_group = " + I(c.moe_n_group) + " must divide E = " + I(c.n_experts) + ", and topk_group = " +
                        I(c.moe_topk_group) + " of its groups (<= n_group) hold K = " + I(c.n_experts_per_tok));
        // The stacked experts are one tensor of a full-size layer: qwen3-30b-a3b's w13 holds 4.0e8 values,
        // gpt-oss-20b's 5.3e8 (the reference converts only the chosen experts, one at a time: BENCHMARKS.md).
        if (product({s.T, c.n_experts}, kMaxElements) < 0 || product({c.d_model, c.n_experts}, kMaxElements) < 0 ||
            product({c.n_experts, c.d_model, 2, std::max<int64_t>(c.moe_ffn_dim, 1)}, kMaxExpertElements) < 0 ||
            product({c.d_model, 2, std::max<int64_t>(c.moe_shared_ffn_dim, 1)}, kMaxElements) < 0)
            return fail("case too large (its experts)");
    }
    // Attention's keys and scores: what the float64 reference holds at once.
    // Measured (scalar, 2 cores): S x KV x hd = 2^26 took 4.1 GB and 43 s, T x
    // S x H = 2^27 took 5.6 GB and 21 s; 2^28 keys took 12 GB and ran past a
    // minute. A drawn case is far below either (tens of keys); a checkpoint's
    // rows at full size (64 of them) too.
    if (s.op == Op::attention && product({s.S, KVW}, int64_t{1} << 26) < 0)
        return fail("case too large (S x KV x hd past 2^26: its keys)");
    if (s.op == Op::attention && product({s.T, s.S, c.n_heads}, int64_t{1} << 27) < 0)
        return fail("case too large (T x S x H past 2^27: its scores)");
    if (info.uses(kRope) || s.op == Op::attention) {
        const int64_t last = std::max(s.pos + s.T, s.kpos + s.S);
        if (last > kMaxCount) return fail("positions past 2^40");
    }
    return s;
}

}  // namespace conform::gen

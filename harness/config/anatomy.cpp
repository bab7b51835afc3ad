#include "config/anatomy.h"

#include "config/options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

namespace conform::config {

namespace {

// "2*T*D*F + 0.5*T*T" → terms. The table below is written in this notation
// so that it reads like the convention in anatomy.h; only these literals
// reach the parser.
Expr ex(const std::string& text) {
    Expr e;
    std::stringstream terms(text);
    std::string term;
    while (std::getline(terms, term, '+')) {
        Term t;
        std::stringstream factors(term);
        std::string f;
        while (std::getline(factors, f, '*')) {
            f.erase(std::remove(f.begin(), f.end(), ' '), f.end());
            if (f.empty()) throw std::logic_error("anatomy table: empty factor in '" + text + "'");
            const bool number = std::isdigit(static_cast<unsigned char>(f[0])) || f[0] == '.' ||
                                (f[0] == '-' && f.size() > 1);
            if (number)
                t.coef *= std::stod(f);
            else
                t.syms.push_back(f);
        }
        e.push_back(t);
    }
    return e;
}

// "H*hd" → {"H", "hd"}
std::vector<std::string> dim(const std::string& text) {
    const Expr e = ex(text);
    if (e.size() != 1 || e[0].coef != 1) throw std::logic_error("anatomy table: a dim is a product of symbols: " + text);
    return e[0].syms;
}

TensorSpec act(const std::string& name, const std::string& rows, const std::string& cols, const std::string& what,
               bool cached = false) {
    TensorSpec t;
    t.name = name;
    t.dims = {dim(rows), dim(cols)};
    t.what = what;
    t.cached = cached;
    return t;
}

TensorSpec weight(const std::string& name, std::vector<std::string> dims, const std::string& what) {
    TensorSpec t;
    t.name = name;
    for (const auto& d : dims) t.dims.push_back(dim(d));
    t.what = what;
    t.weight = true;
    return t;
}

Lane lane(std::vector<std::string> in, std::vector<std::string> weights, std::vector<std::string> out,
          const std::string& flops, const std::string& name = "") {
    return {name, std::move(in), std::move(weights), std::move(out), ex(flops)};
}

OpSpec op(const std::string& name, const std::string& group, const std::string& kind, std::vector<Lane> lanes,
          const std::string& why, const std::string& scope = "layer", const std::string& when = "") {
    return {name, group, kind, scope, when, why, std::move(lanes)};
}

const char* kMatmulWhy =
    "every weight is read once and used by each of the T tokens, so it does 2·T FLOP per weight: about T / "
    "(bytes per element / 2) FLOP per byte";

FormulaTable build() {
    FormulaTable t;
    t.symbols = {{"T", "tokens in this forward", "tokens"},
                 {"C", "tokens already in the KV cache", "context"},
                 {"D", "d_model, the residual stream's width", "d_model"},
                 {"F", "the FFN's hidden width", "ffn_dim"},
                 {"H", "query heads", "n_heads"},
                 {"KV", "key/value heads", "n_kv_heads"},
                 {"hd", "head_dim", "head_dim"},
                 {"rd", "dims of each head RoPE rotates", "rotary_dim"},
                 {"L", "layers", "layers"},
                 {"V", "vocabulary", "vocab"},
                 {"es", "bytes per element (weights, activations, KV cache)", "bytes_per_element"},
                 {"qk", "1 with QK-norm, else 0", "qk_norm"},
                 {"bias", "1 with q, k and v projection biases (Qwen2), else 0", "qkv_bias"},
                 {"W", "the sliding window, keys a query sees (0: none)", "sliding_window"},
                 {"nowin", "1 without a sliding window, else 0", "sliding_window", true},
                 {"untied", "1 when the LM head has its own weights, 0 when tied to the embedding", "tie_embeddings",
                  true}};
    // Under a window a query at position p sees min(W, p + 1) keys: the
    // chunk's queries sit at C .. C + T - 1, so pairs = Σ min(W, n) for n in
    // C + 1 .. S, which is Σ n up to m = min(S, max(C, W)) and W for each n
    // past it. Without a window W stands in as S (Winf), and every term
    // reduces to the causal count T·C + T(T + 1)/2.
    t.derived = {{"S", ex("C + T"), "tokens of the sequence after this forward"},
                 {"Winf", ex("W + nowin*S"), "the window, or S without one"},
                 {"Wc", ex("max(C,Winf)"), "max(C, Winf)"},
                 {"m", ex("min(S,Wc)"), "the last position whose queries see every earlier key, plus 1"},
                 {"pairs", ex("0.5*m*m + 0.5*m + -0.5*C*C + -0.5*C + S*W + -1*m*W"),
                  "(query, key) pairs under the causal mask and the window"},
                 {"Wm1", ex("Winf + -1"), "the window less the query's own key"},
                 {"Cr", ex("min(C,Wm1)"), "cached keys the chunk's queries see: all C, or W - 1 under a window"}};

    t.tensors = {
        act("x", "T", "D", "the residual stream into the block"),
        weight("attn_norm.w", {"D"}, "attention RMSNorm weight"),
        act("attn_in", "T", "D", "RMSNorm(x)"),
        weight("wq", {"D", "H*hd"}, "query projection"),
        weight("wk", {"D", "KV*hd"}, "key projection"),
        weight("wv", {"D", "KV*hd"}, "value projection"),
        weight("bq", {"H*hd"}, "query projection bias"),
        weight("bk", {"KV*hd"}, "key projection bias"),
        weight("bv", {"KV*hd"}, "value projection bias"),
        act("q", "T", "H*hd", "queries, H heads"),
        act("k", "T", "KV*hd", "keys, KV heads"),
        act("v", "T", "KV*hd", "values, KV heads (appended to the cache)", true),
        weight("q_norm.w", {"hd"}, "per-head RMSNorm weight on q"),
        weight("k_norm.w", {"hd"}, "per-head RMSNorm weight on k"),
        act("q_rot", "T", "H*hd", "queries rotated"),
        act("k_rot", "T", "KV*hd", "keys rotated (appended to the cache)", true),
        act("k_past", "Cr", "KV*hd", "the cache's keys attention reads: the C earlier tokens', or W - 1 of them"),
        act("v_past", "Cr", "KV*hd", "the cache's values attention reads, as k_past"),
        act("attn", "T", "H*hd", "softmax(q·kᵀ / √hd) · v, per query head"),
        weight("wo", {"H*hd", "D"}, "output projection"),
        act("attn_out", "T", "D", "attention's contribution to the stream"),
        act("h", "T", "D", "x + attention"),
        weight("ffn_norm.w", {"D"}, "FFN RMSNorm weight"),
        act("ffn_in", "T", "D", "RMSNorm(h)"),
        weight("w1", {"D", "F"}, "gate projection"),
        weight("w3", {"D", "F"}, "up projection"),
        act("gate", "T", "F", "ffn_in · w1"),
        act("up", "T", "F", "ffn_in · w3"),
        act("act", "T", "F", "SiLU(gate) · up"),
        weight("w2", {"F", "D"}, "down projection"),
        act("ffn_out", "T", "D", "the FFN's contribution to the stream"),
        act("out", "T", "D", "h + FFN: the block's output"),
        weight("final_norm.w", {"D"}, "final RMSNorm weight"),
        act("final", "T", "D", "RMSNorm of the last block's output"),
        act("embedded", "T", "D", "the tokens' embedding rows"),
        act("logits", "T", "V", "one score per vocabulary entry"),
    };
    TensorSpec embed = weight("embed", {"V", "D"}, "token embedding table");
    embed.read = {dim("T"), dim("D")};
    TensorSpec head = weight("lm_head.w", {"D", "V"}, "LM head (the embedding, transposed, when tied)");
    head.params_factor = "untied";
    t.tensors.push_back(embed);
    t.tensors.push_back(head);

    const char* norm_why = "4 FLOP per element against reading it and writing it back: well under 1 FLOP per byte";
    t.ops = {
        // h = x + attn(rmsnorm(x)) @ wo
        op("attn_norm", "norm", "norm", {lane({"x"}, {"attn_norm.w"}, {"attn_in"}, "4*T*D")}, norm_why),
        op("q_proj", "attention", "matmul", {lane({"attn_in"}, {"wq"}, {"q"}, "2*T*D*H*hd")}, kMatmulWhy),
        op("k_proj", "attention", "matmul", {lane({"attn_in"}, {"wk"}, {"k"}, "2*T*D*KV*hd")}, kMatmulWhy),
        op("v_proj", "attention", "matmul", {lane({"attn_in"}, {"wv"}, {"v"}, "2*T*D*KV*hd")}, kMatmulWhy),
        op("qkv_bias", "attention", "elementwise",
           {lane({"q"}, {"bq"}, {"q"}, "T*H*hd", "q"), lane({"k"}, {"bk"}, {"k"}, "T*KV*hd", "k"),
            lane({"v"}, {"bv"}, {"v"}, "T*KV*hd", "v")},
           "one add per element read and written back: a fraction of a FLOP per byte (fused into the projection "
           "by most kernels)",
           "layer", "bias"),
        op("qk_norm", "attention", "norm",
           {lane({"q"}, {"q_norm.w"}, {"q"}, "4*T*H*hd", "q"), lane({"k"}, {"k_norm.w"}, {"k"}, "4*T*KV*hd", "k")},
           norm_why, "layer", "qk"),
        op("rope", "attention", "rope",
           {lane({"q"}, {}, {"q_rot"}, "3*T*H*rd", "q"), lane({"k"}, {}, {"k_rot"}, "3*T*KV*rd", "k")},
           "3 FLOP per rotated element read and written once: a fraction of a FLOP per byte, whatever T is"),
        op("attention", "attention", "attention",
           {lane({"q_rot", "k_rot", "v", "k_past", "v_past"}, {}, {"attn"}, "4*hd*H*pairs + 5*H*pairs")},
           "each cached K and V byte serves the H/KV query heads of its group for every one of the T queries: "
           "decode (T = 1) reads the whole cache for a few FLOP per byte; a long prefill reuses it T times"),
        op("o_proj", "attention", "matmul", {lane({"attn"}, {"wo"}, {"attn_out"}, "2*T*H*hd*D")}, kMatmulWhy),
        op("residual_attn", "residual", "elementwise", {lane({"x", "attn_out"}, {}, {"h"}, "T*D")},
           "one add per three elements moved: the least intense op of the block"),
        // out = h + w2(silu(w1 n) * w3 n), n = rmsnorm(h)
        op("ffn_norm", "norm", "norm", {lane({"h"}, {"ffn_norm.w"}, {"ffn_in"}, "4*T*D")}, norm_why),
        op("gate_proj (w1)", "ffn", "matmul", {lane({"ffn_in"}, {"w1"}, {"gate"}, "2*T*D*F")}, kMatmulWhy),
        op("up_proj (w3)", "ffn", "matmul", {lane({"ffn_in"}, {"w3"}, {"up"}, "2*T*D*F")}, kMatmulWhy),
        op("silu_mul", "ffn", "elementwise", {lane({"gate", "up"}, {}, {"act"}, "5*T*F")},
           "5 FLOP per output against three elements moved: about 1 FLOP per byte at any T"),
        op("down_proj (w2)", "ffn", "matmul", {lane({"act"}, {"w2"}, {"ffn_out"}, "2*T*F*D")}, kMatmulWhy),
        op("residual_ffn", "residual", "elementwise", {lane({"h", "ffn_out"}, {}, {"out"}, "T*D")},
           "one add per three elements moved: the least intense op of the block"),
        // once per model
        op("final_norm", "", "norm", {lane({"out"}, {"final_norm.w"}, {"final"}, "4*T*D")}, norm_why, "model"),
        op("embedding", "", "lookup", {lane({}, {"embed"}, {"embedded"}, "0")},
           "a lookup: T rows copied, no arithmetic", "apart"),
        op("lm_head", "", "matmul", {lane({"final"}, {"lm_head.w"}, {"logits"}, "2*T*D*V")}, kMatmulWhy, "apart"),
    };
    t.quantities = {
        {"kv_bytes_per_token_layer", ex("2*KV*hd*es"), "K and V of every kv head, one token, one layer"},
        {"kv_bytes_per_token_layer_mha", ex("2*H*hd*es"), "the same with a kv head per query head (no GQA)"},
        {"kv_bytes_per_token_model", ex("2*L*KV*hd*es"), "one token, every layer"},
        {"kv_cache_bytes", ex("2*L*KV*hd*es*min(S,Winf)"),
         "the cache after this forward: C + T tokens, or under a sliding window the last W of them (a ring of W "
         "slots, as HF's sliding-window cache keeps), every layer"},
    };
    return t;
}

const TensorSpec& tensor(const FormulaTable& t, const std::string& name) {
    for (const auto& s : t.tensors)
        if (s.name == name) return s;
    throw std::invalid_argument("anatomy table: unknown tensor '" + name + "'");
}

double elements(const std::vector<std::vector<std::string>>& dims, const Symbols& s) {
    double n = 1;
    for (const auto& d : dims) n *= eval_dims(d, s);
    return n;
}

// What a weight costs to read, and how many parameters it is.
double read_elements(const TensorSpec& w, const Symbols& s) { return elements(w.read.empty() ? w.dims : w.read, s); }
double param_elements(const TensorSpec& w, const Symbols& s) {
    const double n = elements(w.dims, s);
    return w.params_factor.empty() ? n : n * s.at(w.params_factor);
}

bool present(const OpSpec& op, const Symbols& s) {
    if (op.when.empty()) return true;
    auto it = s.find(op.when);
    if (it == s.end()) throw std::invalid_argument("anatomy table: op " + op.name + ": unknown symbol '" + op.when + "'");
    return it->second != 0;
}

OpCost evaluate(const FormulaTable& t, const OpSpec& op, const Symbols& s) {
    OpCost c;
    c.name = op.name;
    c.group = op.group;
    const double es = s.at("es");
    for (const Lane& l : op.lanes) {
        c.flops += eval(l.flops, s);
        double moved = 0;
        for (const auto& n : l.in) moved += elements(tensor(t, n).dims, s);
        for (const auto& n : l.weights) {
            moved += read_elements(tensor(t, n), s);
            c.params += param_elements(tensor(t, n), s);
        }
        for (const auto& n : l.out) {
            const TensorSpec& o = tensor(t, n);
            moved += elements(o.dims, s);
            TensorShape shape{n, {}};
            for (const auto& d : o.dims) shape.dims.push_back(eval_dims(d, s));
            c.outputs.push_back(shape);
        }
        c.bytes += es * moved;
    }
    return c;
}

void add(OpCost& sum, const OpCost& c, double times = 1) {
    sum.params += times * c.params;
    sum.flops += times * c.flops;
    sum.bytes += times * c.bytes;
}

nlohmann::json expr_json(const Expr& e) {
    nlohmann::json a = nlohmann::json::array();
    for (const Term& t : e) {
        nlohmann::json term = nlohmann::json::array({t.coef});
        for (const auto& s : t.syms) term.push_back(s);
        a.push_back(term);
    }
    return a;
}

nlohmann::json dims_json(const std::vector<std::vector<std::string>>& dims) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& d : dims) a.push_back(d);
    return a;
}

// ---- reading the JSON form back (the round trip the test checks) -------------------

[[noreturn]] void bad(const std::string& where, const std::string& what) {
    throw std::invalid_argument("anatomy formulas: " + where + ": " + what);
}

const nlohmann::json& field(const nlohmann::json& j, const std::string& key, const std::string& where) {
    if (!j.is_object() || !j.contains(key)) bad(where, "missing field '" + key + "'");
    return j.at(key);
}

std::string str(const nlohmann::json& j, const std::string& key, const std::string& where) {
    const auto& v = field(j, key, where);
    if (!v.is_string()) bad(where + "." + key, "expected a string, found " + std::string(v.type_name()));
    return v.get<std::string>();
}

bool flag(const nlohmann::json& j, const std::string& key, const std::string& where) {
    const auto& v = field(j, key, where);
    if (!v.is_boolean()) bad(where + "." + key, "expected true or false, found " + std::string(v.type_name()));
    return v.get<bool>();
}

std::vector<std::string> strings(const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) bad(where, "expected an array of names");
    std::vector<std::string> out;
    for (const auto& x : v) {
        if (!x.is_string()) bad(where, "expected names, found " + std::string(x.type_name()));
        out.push_back(x.get<std::string>());
    }
    return out;
}

Expr expr_from(const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) bad(where, "expected an array of terms");
    Expr e;
    for (const auto& term : v) {
        if (!term.is_array() || term.empty() || !term[0].is_number())
            bad(where, "a term is [coefficient, symbol, ...]");
        Term t;
        t.coef = term[0].get<double>();
        for (size_t i = 1; i < term.size(); ++i) {
            if (!term[i].is_string()) bad(where, "a term's symbols are names");
            t.syms.push_back(term[i].get<std::string>());
        }
        e.push_back(t);
    }
    return e;
}

std::vector<std::vector<std::string>> dims_from(const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) bad(where, "expected an array of dims");
    std::vector<std::vector<std::string>> out;
    for (const auto& d : v) out.push_back(strings(d, where));
    return out;
}

std::vector<Named> named_from(const nlohmann::json& v, const std::string& where) {
    if (!v.is_array()) bad(where, "expected an array");
    std::vector<Named> out;
    for (size_t i = 0; i < v.size(); ++i) {
        const std::string w = where + "[" + std::to_string(i) + "]";
        out.push_back({str(v[i], "name", w), expr_from(field(v[i], "terms", w), w + ".terms"), str(v[i], "what", w)});
    }
    return out;
}

}  // namespace

const FormulaTable& formula_table() {
    static const FormulaTable t = build();
    return t;
}

nlohmann::json to_json(const FormulaTable& t) {
    nlohmann::json symbols = nlohmann::json::array();
    for (const Symbol& x : t.symbols)
        symbols.push_back({{"name", x.name}, {"what", x.what}, {"from", x.from}, {"negate", x.negate}});
    auto named = [](const std::vector<Named>& v) {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& n : v) a.push_back({{"name", n.name}, {"terms", expr_json(n.value)}, {"what", n.what}});
        return a;
    };
    nlohmann::json tensors = nlohmann::json::array();
    for (const auto& s : t.tensors) {
        nlohmann::json j = {{"name", s.name}, {"dims", dims_json(s.dims)}, {"what", s.what}, {"weight", s.weight},
                            {"cached", s.cached}};
        if (!s.read.empty()) j["read"] = dims_json(s.read);
        if (!s.params_factor.empty()) j["params_factor"] = s.params_factor;
        tensors.push_back(j);
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& o : t.ops) {
        nlohmann::json lanes = nlohmann::json::array();
        for (const auto& l : o.lanes)
            lanes.push_back({{"name", l.name},
                             {"in", l.in},
                             {"weights", l.weights},
                             {"out", l.out},
                             {"flops", expr_json(l.flops)},
                             {"flops_text", format_expr(l.flops)}});
        ops.push_back({{"name", o.name}, {"group", o.group}, {"kind", o.kind}, {"scope", o.scope}, {"when", o.when},
                       {"why", o.why}, {"lanes", lanes}});
    }
    return {{"schema", "conform-anatomy-formulas/1"},
            {"rules",
             "op bytes = es × (elements of its inputs + weights as read + outputs); params = weight elements × "
             "params_factor; layer = Σ ops of scope layer present (when = a symbol ≠ 0); model = L × layer + Σ ops of "
             "scope model; ops of scope apart are reported alone"},
            {"symbols", symbols},
            {"derived", named(t.derived)},
            {"tensors", tensors},
            {"ops", ops},
            {"quantities", named(t.quantities)}};
}

FormulaTable formula_table_from_json(const nlohmann::json& j) {
    if (!j.is_object()) bad("document", "expected an object");
    if (j.value("schema", "") != "conform-anatomy-formulas/1") bad("schema", "expected conform-anatomy-formulas/1");
    FormulaTable t;
    const auto& symbols = field(j, "symbols", "document");
    if (!symbols.is_array()) bad("symbols", "expected an array");
    for (size_t i = 0; i < symbols.size(); ++i) {
        const std::string w = "symbols[" + std::to_string(i) + "]";
        t.symbols.push_back({str(symbols[i], "name", w), str(symbols[i], "what", w), str(symbols[i], "from", w),
                             flag(symbols[i], "negate", w)});
    }
    t.derived = named_from(field(j, "derived", "document"), "derived");
    const auto& tensors = field(j, "tensors", "document");
    if (!tensors.is_array()) bad("tensors", "expected an array");
    for (size_t i = 0; i < tensors.size(); ++i) {
        const auto& x = tensors[i];
        const std::string w = "tensors[" + std::to_string(i) + "]";
        TensorSpec s;
        s.name = str(x, "name", w);
        s.dims = dims_from(field(x, "dims", w), w + ".dims");
        s.what = str(x, "what", w);
        s.weight = flag(x, "weight", w);
        s.cached = flag(x, "cached", w);
        if (x.contains("read")) s.read = dims_from(x["read"], w + ".read");
        if (x.contains("params_factor")) s.params_factor = str(x, "params_factor", w);
        t.tensors.push_back(s);
    }
    const auto& ops = field(j, "ops", "document");
    if (!ops.is_array()) bad("ops", "expected an array");
    for (size_t i = 0; i < ops.size(); ++i) {
        const auto& x = ops[i];
        const std::string w = "ops[" + std::to_string(i) + "]";
        OpSpec o;
        o.name = str(x, "name", w);
        o.group = str(x, "group", w);
        o.kind = str(x, "kind", w);
        o.scope = str(x, "scope", w);
        o.when = str(x, "when", w);
        o.why = str(x, "why", w);
        const auto& lanes = field(x, "lanes", w);
        if (!lanes.is_array()) bad(w + ".lanes", "expected an array");
        for (size_t k = 0; k < lanes.size(); ++k) {
            const std::string lw = w + ".lanes[" + std::to_string(k) + "]";
            o.lanes.push_back({str(lanes[k], "name", lw), strings(field(lanes[k], "in", lw), lw + ".in"),
                               strings(field(lanes[k], "weights", lw), lw + ".weights"),
                               strings(field(lanes[k], "out", lw), lw + ".out"),
                               expr_from(field(lanes[k], "flops", lw), lw + ".flops")});
        }
        t.ops.push_back(o);
    }
    t.quantities = named_from(field(j, "quantities", "document"), "quantities");
    return t;
}

Symbols symbols(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element, const FormulaTable& t) {
    if (tokens < 1) throw std::invalid_argument("anatomy: tokens must be >= 1, got " + std::to_string(tokens));
    if (context < 0) throw std::invalid_argument("anatomy: context must be >= 0, got " + std::to_string(context));
    nlohmann::json from = config_json(m);
    from["tokens"] = tokens;
    from["context"] = context;
    from["bytes_per_element"] = bytes_per_element;
    Symbols s;
    for (const Symbol& sym : t.symbols) {
        if (!from.contains(sym.from))
            throw std::invalid_argument("anatomy table: symbol " + sym.name + ": no field '" + sym.from + "'");
        const nlohmann::json& v = from[sym.from];
        double x;
        if (v.is_boolean())
            x = v.get<bool>() ? 1 : 0;
        else if (v.is_number())
            x = v.get<double>();
        else
            throw std::invalid_argument("anatomy table: symbol " + sym.name + ": field '" + sym.from + "' is not a number");
        s[sym.name] = sym.negate ? (x != 0 ? 0 : 1) : x;
    }
    for (const Named& n : t.derived) s[n.name] = eval(n.value, s);
    return s;
}

namespace {
// A factor's value: a symbol, or min(a,b) / max(a,b) of two symbols (the
// window's counts need them; the page evaluates them the same way).
double factor(const std::string& name, const Symbols& s) {
    auto value = [&](const std::string& n) {
        auto it = s.find(n);
        if (it == s.end()) throw std::invalid_argument("anatomy table: unknown symbol '" + n + "'");
        return it->second;
    };
    const bool mn = name.rfind("min(", 0) == 0, mx = name.rfind("max(", 0) == 0;
    if (!mn && !mx) return value(name);
    const size_t comma = name.find(',');
    if (comma == std::string::npos || name.back() != ')')
        throw std::invalid_argument("anatomy table: '" + name + "': expected min(a,b) or max(a,b) of two symbols");
    const double a = value(name.substr(4, comma - 4)), b = value(name.substr(comma + 1, name.size() - comma - 2));
    return mn ? std::min(a, b) : std::max(a, b);
}
}  // namespace

double eval(const Expr& e, const Symbols& s) {
    double sum = 0;
    for (const Term& t : e) {
        double p = t.coef;
        for (const auto& name : t.syms) p *= factor(name, s);
        sum += p;
    }
    return sum;
}

double eval_dims(const std::vector<std::string>& dim, const Symbols& s) { return eval({Term{1, dim}}, s); }

std::string format_expr(const Expr& e) {
    std::string out;
    for (const Term& t : e) {
        if (!out.empty()) out += " + ";
        std::string term;
        if (t.coef != 1 || t.syms.empty()) {
            std::ostringstream o;
            o << t.coef;
            term = o.str();
        }
        for (const auto& s : t.syms) term += (term.empty() ? "" : "·") + s;
        out += term;
    }
    return out;
}

Anatomy anatomy(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element,
                const FormulaTable& t) {
    const Symbols s = symbols(m, tokens, context, bytes_per_element, t);
    Anatomy a;
    a.tokens = tokens;
    a.context = context;
    a.bytes_per_element = bytes_per_element;
    a.layer = {"layer", "", 0, 0, 0, {}};
    OpCost once{"model", "", 0, 0, 0, {}};
    for (const OpSpec& op : t.ops) {
        if (!present(op, s)) continue;
        const OpCost c = evaluate(t, op, s);
        if (op.scope == "layer") {
            a.ops.push_back(c);
            add(a.layer, c);
        } else if (op.scope == "model") {
            add(once, c);
        } else if (op.name == "embedding") {
            a.embedding = c;
        } else if (op.name == "lm_head") {
            a.lm_head = c;
        }
    }
    a.model = {"model", "", 0, 0, 0, {}};
    add(a.model, a.layer, s.at("L"));
    add(a.model, once);
    auto quantity = [&](const char* name) {
        for (const Named& q : t.quantities)
            if (q.name == name) return eval(q.value, s);
        throw std::invalid_argument(std::string("anatomy table: no quantity ") + name);
    };
    a.kv_bytes_per_token_layer = quantity("kv_bytes_per_token_layer");
    a.kv_bytes_per_token_layer_mha = quantity("kv_bytes_per_token_layer_mha");
    a.kv_bytes_per_token_model = quantity("kv_bytes_per_token_model");
    a.kv_cache_bytes = quantity("kv_cache_bytes");
    return a;
}

CallCost call_cost(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element,
                   const std::vector<std::string>& parts) {
    const FormulaTable& t = formula_table();
    const Symbols s = symbols(m, tokens, context, bytes_per_element, t);
    const double es = bytes_per_element;

    // The layer's lanes in data-flow order; a tensor written twice (qk_norm
    // normalises q in place) is a new version each time.
    struct Step {
        const OpSpec* op;
        const Lane* lane;
        bool chosen;
    };
    std::vector<Step> steps;
    std::set<std::string> matched;
    for (const OpSpec& op : t.ops) {
        if (op.scope != "layer" || !present(op, s)) continue;
        for (const Lane& l : op.lanes) {
            bool chosen = false;
            for (const auto& p : parts)
                if (p == "layer" || p == op.name || (!l.name.empty() && p == op.name + ":" + l.name)) {
                    chosen = true;
                    matched.insert(p);
                }
            steps.push_back({&op, &l, chosen});
        }
    }
    for (const auto& p : parts)
        if (!matched.count(p))
            throw std::invalid_argument("call_cost: '" + p + "' is not an op or op:lane of this configuration's layer");

    using Version = std::pair<std::string, int>;  // tensor, the step that wrote it (-1: from outside the layer)
    std::map<std::string, int> writer;
    std::set<Version> read_in, read_out;  // versions read by chosen steps / by the others
    std::set<std::string> weights;
    CallCost k;
    for (size_t i = 0; i < steps.size(); ++i) {
        const Step& st = steps[i];
        for (const auto& n : st.lane->in) {
            const int w = writer.count(n) ? writer[n] : -1;
            (st.chosen ? read_in : read_out).insert({n, w});
        }
        if (st.chosen) {
            k.flops += eval(st.lane->flops, s);
            for (const auto& n : st.lane->weights)
                if (weights.insert(n).second) {
                    const double b = es * read_elements(tensor(t, n), s);
                    k.bytes += b;
                    if (st.op->kind == "matmul") k.weight_bytes += b;
                }
        }
        for (const auto& n : st.lane->out) writer[n] = static_cast<int>(i);
    }
    auto chosen_step = [&](int w) { return w >= 0 && steps[static_cast<size_t>(w)].chosen; };
    // In: what the call reads that it did not write.
    for (const auto& [n, w] : read_in)
        if (!chosen_step(w)) k.bytes += es * elements(tensor(t, n).dims, s);
    // Out: what it writes that someone after it reads, that nothing in the
    // layer reads (the block's output), or that goes to the KV cache.
    for (size_t i = 0; i < steps.size(); ++i) {
        if (!steps[i].chosen) continue;
        for (const auto& n : steps[i].lane->out) {
            const Version v{n, static_cast<int>(i)};
            const bool used_inside = read_in.count(v) > 0, used_after = read_out.count(v) > 0;
            if (used_after || !used_inside || tensor(t, n).cached) k.bytes += es * elements(tensor(t, n).dims, s);
        }
    }
    return k;
}

const char* anatomy_convention() {
    return "matmul 2 FLOP per MAC; rmsnorm 4/elt, rope 3/rotated elt, residual 1/elt, silu*mul 5/elt, softmax 5/score; "
           "attention 4*hd FLOP per (query head, visible key); bytes: each op unfused reads inputs and weights once, "
           "writes its output once; KV cache = K and V of every kv head; model = layers + final norm, without "
           "embedding and LM head";
}

std::string si(double v, const std::string& unit) {
    static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
    int p = 0;
    double x = v;
    while (std::fabs(x) >= 1000 && p < 5) {
        x /= 1000;
        ++p;
    }
    char buf[64];
    if (p == 0 && x == std::floor(x))
        std::snprintf(buf, sizeof buf, "%.0f%s%s", x, unit.empty() ? "" : " ", unit.c_str());
    else
        std::snprintf(buf, sizeof buf, "%.1f%s%s%s", x, unit.empty() ? "" : " ", prefixes[p], unit.c_str());
    return buf;
}

}  // namespace conform::config

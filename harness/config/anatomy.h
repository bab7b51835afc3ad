// harness/config/anatomy.h — what one forward of a configuration costs, op by op.
//
// Counted, not measured, under one stated convention (the table header of
// `conform anatomy` repeats it):
//   * a matmul [T, K] @ [K, N]: 2·T·K·N FLOP (one multiply and one add per MAC);
//   * RMSNorm 4 FLOP per element (square, sum, scale, weight), RoPE 3 per rotated
//     element (two products, one sum), a residual add 1, SiLU(g)·u 5 (negate,
//     exp, add, divide, multiply), softmax 5 per score (max, subtract, exp, sum,
//     divide); cos / sin tables not counted;
//   * attention: each of the T queries, at positions context .. context+T-1,
//     scores every key at or before it: P = T·context + T(T+1)/2 pairs,
//     4·hd FLOP per pair and query head (q·k, then p·v);
//   * minimum bytes: each op on its own (unfused) reads its inputs and weights
//     once and writes its output once, every element `bytes` wide (weights,
//     activations and KV cache alike); attention reads each kv head's K and V
//     once for the whole group (GQA's saving);
//   * KV cache: K and V, every kv head, head_dim each: 2·KV·hd·bytes per token
//     per layer (full multi-head attention: 2·H·hd·bytes).
// Model totals are the blocks and the final norm; the embedding and the LM
// head are reported apart (their size is the vocabulary's, not the block's).
//
// The convention is written once, as data: formula_table() lists every op as
// lanes that read named tensors and weights (shapes as products of symbols)
// and a FLOP count (a sum of coefficient × product of symbols). anatomy()
// evaluates that table; `conform anatomy --html` embeds the same table as
// JSON and the page's script evaluates it the same way, so the page and the
// command cannot disagree; call_cost() prices a group of ops run as one call
// (what `conform bench` times) from the same table.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "config/presets.h"

namespace conform::config {

// ---- the table -------------------------------------------------------------------

// coef × Π syms; an Expr is a sum of terms, evaluated left to right.
struct Term {
    double coef = 1;
    std::vector<std::string> syms;
    bool operator==(const Term& o) const { return coef == o.coef && syms == o.syms; }
};
using Expr = std::vector<Term>;

// A tensor an op reads or writes, or a weight. Each dim is a product of symbols.
struct TensorSpec {
    std::string name;
    std::vector<std::vector<std::string>> dims;
    std::string what;
    bool weight = false;
    // What a forward reads of it when not all (the embedding: T of V rows).
    std::vector<std::vector<std::string>> read;
    // Multiplies the parameter count ("untied": the LM head is the embedding's).
    std::string params_factor;
    bool cached = false;  // written into the KV cache: outlives the call that makes it
    bool operator==(const TensorSpec& o) const {
        return name == o.name && dims == o.dims && what == o.what && weight == o.weight && read == o.read &&
               params_factor == o.params_factor && cached == o.cached;
    }
};

// One stream through an op: RoPE rotates q and k, each a lane (bench's rope
// op is the q lane alone).
struct Lane {
    std::string name;                              // "" for an op of one lane, else "q", "k"
    std::vector<std::string> in, weights, out;     // tensor names
    Expr flops;
    bool operator==(const Lane& o) const {
        return name == o.name && in == o.in && weights == o.weights && out == o.out && flops == o.flops;
    }
};

struct OpSpec {
    std::string name;   // "q_proj", "attention", ...
    std::string group;  // "attention" | "ffn" | "norm" | "residual" ("" outside the layer)
    std::string kind;   // "matmul" | "norm" | "rope" | "attention" | "elementwise" | "lookup"
    std::string scope;  // "layer": every block; "model": once (final norm); "apart": embedding, LM head
    std::string when;   // a 0/1 symbol the op needs ("qk"), or "" for always
    std::string why;    // one sentence: where its intensity comes from
    std::vector<Lane> lanes;
    bool operator==(const OpSpec& o) const {
        return name == o.name && group == o.group && kind == o.kind && scope == o.scope && when == o.when &&
               why == o.why && lanes == o.lanes;
    }
};

struct Named {
    std::string name;
    Expr value;
    std::string what;
    bool operator==(const Named& o) const { return name == o.name && value == o.value && what == o.what; }
};

// A base symbol and where its value comes from: a field of the configuration
// as config_json() writes it ("d_model"), or of the forward ("tokens",
// "context", "bytes_per_element"); a boolean is 1 or 0 (`negate`: 0 or 1).
struct Symbol {
    std::string name, what, from;
    bool negate = false;
    bool operator==(const Symbol& o) const {
        return name == o.name && what == o.what && from == o.from && negate == o.negate;
    }
};

struct FormulaTable {
    std::vector<Symbol> symbols;
    std::vector<Named> derived;     // symbols computed from earlier ones, in order (S, pairs)
    std::vector<TensorSpec> tensors;
    std::vector<OpSpec> ops;        // data-flow order
    std::vector<Named> quantities;  // the KV cache's sizes
    bool operator==(const FormulaTable& o) const {
        return symbols == o.symbols && derived == o.derived && tensors == o.tensors && ops == o.ops &&
               quantities == o.quantities;
    }
};

const FormulaTable& formula_table();

// "conform-anatomy-formulas/1": what the page embeds; from_json is its inverse
// (throws std::invalid_argument naming the field on a malformed table).
nlohmann::json to_json(const FormulaTable& t);
FormulaTable formula_table_from_json(const nlohmann::json& j);

using Symbols = std::map<std::string, double>;

// The base symbols (T, C, D, F, H, KV, hd, rd, L, V, es, qk, untied) bound
// through the table from config_json(m) and the forward, then the derived
// ones. Throws std::invalid_argument on T < 1 or context < 0.
Symbols symbols(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element,
                const FormulaTable& t = formula_table());

// Throws std::invalid_argument naming an unknown symbol.
double eval(const Expr& e, const Symbols& s);
double eval_dims(const std::vector<std::string>& dim, const Symbols& s);  // a product of symbols

// "2·T·D·H·hd + 5·T·F" (for people; the JSON carries the terms).
std::string format_expr(const Expr& e);

// ---- evaluated -------------------------------------------------------------------

struct TensorShape {
    std::string name;
    std::vector<double> dims;
};

struct OpCost {
    std::string name;    // "q_proj", "attention", ...
    std::string group;   // "attention" | "ffn" | "norm" | "residual"
    double params = 0;   // weights, in elements
    double flops = 0;
    double bytes = 0;    // minimum bytes moved
    std::vector<TensorShape> outputs;  // what it writes, by tensor name
    double intensity() const { return bytes > 0 ? flops / bytes : 0; }
};

struct Anatomy {
    int64_t tokens = 1;   // T: tokens in the forward
    int64_t context = 0;  // tokens already in the KV cache
    double bytes_per_element = 2;

    std::vector<OpCost> ops;  // one layer's, in data-flow order
    OpCost layer;             // their sum
    OpCost model;             // layers × layer + the final norm
    OpCost embedding;         // vocab × D lookup (T rows read)
    OpCost lm_head;           // D × vocab matmul (params 0 when tied)

    double kv_bytes_per_token_layer = 0;       // 2·KV·hd·bytes
    double kv_bytes_per_token_layer_mha = 0;   // 2·H·hd·bytes: the same model without GQA
    double kv_bytes_per_token_model = 0;       // × layers
    double kv_cache_bytes = 0;                 // after this forward: (context + T) tokens, every layer

    double flops_per_token() const { return model.flops / static_cast<double>(tokens); }
};

// The costs of one forward of T tokens after `context` cached ones, every
// element `bytes_per_element` wide: the table evaluated (another table: the
// test of the JSON round trip). Throws std::invalid_argument on T < 1 or
// context < 0, or a table that names what it does not define.
Anatomy anatomy(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element,
                const FormulaTable& table = formula_table());

// What running some of one layer's ops as a single call costs (`conform
// bench` times ops one call each): FLOPs summed; bytes = the weights read
// plus the tensors that cross the call's boundary — made before it, used
// after it, or written to the KV cache — each once; weight_bytes = the
// matmuls' weights alone. `parts` names ops ("attention") or one lane of an
// op ("rope:q"); "layer" is every op of the layer. Throws
// std::invalid_argument on a part the table does not have.
struct CallCost {
    double flops = 0, bytes = 0, weight_bytes = 0;
};
CallCost call_cost(const ModelConfig& m, int64_t tokens, int64_t context, double bytes_per_element,
                   const std::vector<std::string>& parts);

// The convention above in one line (the JSON's "convention", the page's header).
const char* anatomy_convention();

// 45092864 → "45.1M", 2048 → "2.0K" (SI, one decimal; `unit` appended).
std::string si(double v, const std::string& unit = "");

}  // namespace conform::config

// harness/core/case.h — the unit that flows through the harness.
//
// A case is an op, a configuration, named inputs, and a canonical id that
// reproduces it. Property generators and fixture files both produce cases;
// everything after that (running, comparing, diagnosing, reporting) is the
// same path.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "conform/config.h"
#include "conform/impl.h"
#include "conform/ops.h"
#include "conform/tensor.h"

namespace conform {

// A float64 tensor: references, expected values, metrics inputs.
struct DTensor {
    std::vector<int64_t> shape;
    std::vector<double> data;

    int64_t rows() const { return shape.empty() ? 0 : shape[0]; }
    int64_t cols() const { return shape.size() < 2 ? 1 : shape[1]; }
    int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

using Named = std::map<std::string, Tensor>;     // float32 tensors by schema name
using NamedD = std::map<std::string, DTensor>;   // float64 tensors by schema name

struct Case {
    Op op = Op::rmsnorm;
    BlockConfig config;
    int64_t prefill = 0;  // decode: tokens processed together before one-at-a-time decoding

    // Inputs by their schema names (fixtures/SCHEMA.md): x, weight, q, k, v,
    // w1, w3, w2, attn_norm, wq, ..., stored as [rows, cols]; vectors as [1, n].
    Named inputs;
    // Positions by schema name: positions, q_positions, k_positions.
    std::map<std::string, std::vector<int64_t>> positions;

    // Fixture cases only: the golden outputs ("out" and optional block taps).
    NamedD expected;

    // The activation quantisation the implementation being judged declares
    // for this op (Implementation::activation_quant; none for the reference
    // itself): the truth's low-precision baselines quantise the activations
    // of every weight product so. Not part of the id: the runner sets it per
    // implementation (declared_for), and shrinking keeps it.
    ActQuant act_quant = ActQuant::none;

    std::string id;          // canonical id: op(key=value,...), reproduces the case
    uint64_t seed = 0;       // property cases: the seed the inputs were drawn from
    std::string file;        // fixture cases: file and group the case came from
    std::string group;
    std::string description;

    const Tensor& in(const std::string& name) const;
    const std::vector<int64_t>& pos(const std::string& name) const;
    std::string where() const;  // "file:/group" for fixtures, the id otherwise
};

// c as it is judged for impl: Case::act_quant set to what impl declares for c's op.
inline void declared_for(Case& c, const Implementation& impl) { c.act_quant = impl.activation_quant(c.op); }

// Every cache row a paged_attention batch's sequences own, in batch and key
// order: f(sequence b, row r). The index arrays as the case has them (a
// validated case's are consistent: conform/interface.h PagedIndex).
template <class F>
void for_each_owned_row(const Case& c, F&& f) {
    const std::vector<int64_t>& kvp = c.pos("kv_indptr");
    const std::vector<int64_t>& ids = c.pos("kv_indices");
    const std::vector<int64_t>& last = c.pos("kv_last_page_len");
    const int64_t P = c.config.page_size;
    for (size_t b = 0; b + 1 < kvp.size(); ++b)
        for (int64_t i = kvp[b]; i < kvp[b + 1]; ++i) {
            const int64_t r0 = ids[static_cast<size_t>(i)] * P, used = i + 1 < kvp[b + 1] ? P : last[b];
            for (int64_t r = r0; r < r0 + used; ++r) f(static_cast<int64_t>(b), r);
        }
}

// A Case's tensors as an op's call takes them (OpInfo::invoke), into the
// caller's output buffers: an input or output the case lacks is a null view.
struct CaseCall final : CallTensors {
    const Case& c;
    std::map<std::string, MutView> outputs;

    explicit CaseCall(const Case& cs) : c(cs) {}
    View in(const char* name) override;
    Positions pos(const char* name) override;
    MutView out(const char* name) override;
    int64_t prefill() override { return c.prefill; }
};

// Every input name an op consumes (float tensors and positions), in schema order.
std::vector<std::string> float_inputs(Op op, const BlockConfig& c);
std::vector<std::string> position_inputs(Op op);

// Which config fields an op requires (fixture validation), and those it
// reads that may be absent, meaning off (conform/config.h's `optional`).
std::vector<std::string> required_config(Op op);
std::vector<std::string> optional_config(Op op);

// Output names an op produces: "out" for every op; block also the taps.
std::vector<std::string> output_names(Op op);

// The size of one of the op's dims (conform/op_info.h) in this case: the
// config's where it fixes it, else the first input's that has it; 0 when
// no input has it.
int64_t case_dim(const Case& c, Dim d);

// Fills in the config sizes an op does not read but its inputs imply
// (rmsnorm's d_model, swiglu's ffn_dim, rope's and qk_norm's heads), so that
// an implementation's supports() and the coverage classes see a complete
// config. Call after validate_case.
void complete_config(Case& c);

// Shape of an output ("out" or a block tap) for a case's inputs and config.
std::vector<int64_t> output_shape(const Case& c, const std::string& output);

// head_dim of an output when it has heads (for (token, head, dim) locations), else 0.
int64_t head_dim_of(const Case& c, const std::string& output);

// Checks that the inputs' shapes agree with each other and the config (and a
// fixture's expected values with the op's output shapes, all finite); throws
// InputError naming the field and the expected-vs-found shape.
void validate_case(const Case& c);

// A router's case (moe, moe_route): whether token t's K-th and (K + 1)-th
// choice scores (and its groups', grouped) lie further apart than a float32
// router's arithmetic can move them, with every chosen weight far above
// float32's underflow, and the first token where they do not (-1: none).
// Such a token is a tie an honest kernel may break either way (docs/moe.md):
// the generator draws none.
bool route_clear(const Case& c, int64_t t);
// A kernel's choice for token t (chosen[e] != 0 for each expert it took, E
// entries): "" when it is one an honest program in `dtype` may make — K
// experts, each within what that program's arithmetic can move the scores of
// every expert it left (a near-tie broken the other way) — else why not,
// naming the token, the experts (or groups) and the gap against the bound.
// The judge judges a kernel on the selection it took when this is "".
// `g`: the config the choice is made under (the case's, or a hypothesis's).
std::string route_outside_tie(const Case& c, const BlockConfig& g, DType dtype, int64_t t,
                              const std::vector<uint8_t>& chosen);
int64_t first_route_tie(const Case& c);

// What is wrong with a config's RoPE scaling or rotary_dim, as (field under
// config/, message with the value found), or nullopt when they make a RoPE:
// rotary_dim 0 or even in [2, head_dim]; factor finite and >= 1; llama3 needs
// original_max_position > 0 and 0 < low_freq_factor < high_freq_factor; yarn
// original_max_position > 0, betas > 0 and attention_factor > 0; dynamic
// original_max_position > 0 and a rotary dim > 2; attention_factor is 1 but
// for yarn.
std::optional<std::pair<std::string, std::string>> rope_config_problem(const BlockConfig& c);

// Rounds every float input to dtype (no-op for f32), so an implementation
// running in that dtype and the reference see identical inputs and the
// comparison measures the computation, not the input conversion.
void round_inputs(Case& c, DType dtype);

struct InputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

std::string shape_str(const std::vector<int64_t>& s);

}  // namespace conform

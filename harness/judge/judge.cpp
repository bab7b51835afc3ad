#include "judge/judge.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>

#include "conform/dtype.h"
#include "core/phases.h"

namespace conform {

namespace {

// The output that says which experts a router took: moe's route tap, moe_route's out.
const char* route_output(Op op) { return op == Op::moe ? "route" : "out"; }

constexpr uint32_t kPoisonBits = 0x7FC0DEADu;  // a quiet NaN no arithmetic produces
constexpr uint32_t kSentinelBits = 0x7FA5A5A5u;
constexpr int64_t kGuard = 64;                  // sentinel floats after each buffer

float bits_to_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
uint32_t float_to_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// An output buffer with a guard region behind it.
struct Guarded {
    std::string name;
    int64_t rows = 0, cols = 0;
    std::vector<float> buf;

    Guarded(std::string n, int64_t r, int64_t c) : name(std::move(n)), rows(r), cols(c) {
        buf.assign(static_cast<size_t>(r * c + kGuard), bits_to_float(kSentinelBits));
        std::fill(buf.begin(), buf.begin() + r * c, bits_to_float(kPoisonBits));
    }
    MutView view() { return MutView{buf.data(), rows, cols}; }

    // "" when the contract held, else what broke it.
    std::string check(bool must_be_complete) const {
        for (int64_t i = rows * cols; i < rows * cols + kGuard; ++i)
            if (float_to_bits(buf[i]) != kSentinelBits)
                return "wrote past the end of output '" + name + "' (sentinel " + std::to_string(i - rows * cols) +
                       " after its " + std::to_string(rows * cols) + " elements was overwritten)";
        if (must_be_complete)
            for (int64_t i = 0; i < rows * cols; ++i)
                if (float_to_bits(buf[i]) == kPoisonBits)
                    return "left element " + std::to_string(i) + " of output '" + name + "' " + shape_str({rows, cols}) +
                           " unwritten";
        return "";
    }
    bool touched() const {
        for (int64_t i = 0; i < rows * cols; ++i)
            if (float_to_bits(buf[i]) != kPoisonBits) return true;
        return false;
    }
    DTensor to_d() const {
        DTensor d;
        d.shape = {rows, cols};
        d.data.assign(buf.begin(), buf.begin() + rows * cols);
        return d;
    }
};

}  // namespace

ImplOutputs run_impl(Implementation& impl, const Case& c) {
    ImplOutputs r;
    const BlockConfig& cfg = c.config;
    const auto t0 = std::chrono::steady_clock::now();
    try {
        Support s = impl.supports(c.op, cfg);
        if (!s.ok) throw ImplError("does not support this case: " + s.reason);
        // Every output the op has, poisoned and guarded; the block's taps too
        // (an implementation writes those it materialises).
        std::vector<Guarded> outs;
        CaseCall call(c);
        for (const std::string& name : output_names(c.op)) {
            const std::vector<int64_t> shape = output_shape(c, name);
            outs.emplace_back(name, shape[0], shape[1]);
        }
        for (Guarded& g : outs) call.outputs[g.name] = g.view();
        const TapSet written = call_op(impl, c.op, cfg, call);
        // Only outputs it claims to have written are compared; the rest must be untouched.
        std::vector<Guarded> kept;
        for (Guarded& g : outs) {
            if (wrote(written, g.name))
                kept.push_back(std::move(g));
            else if (g.touched())
                throw ImplError("wrote tap '" + g.name + "' but did not report it as written");
        }
        outs = std::move(kept);
        for (const auto& g : outs) {
            const std::string broke = g.check(true);
            if (!broke.empty()) throw ImplError(broke);
            r.outputs[g.name] = g.to_d();
        }
    } catch (const std::exception& e) {
        r.error = e.what();
        r.outputs.clear();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

namespace {

// The float64 reference of a case; for decode with every tap of the block it
// is (`taps`), which the a-priori bound starts from — without them it would
// compute the block again.
NamedD reference_f64(const Case& c, NamedD* taps, const std::vector<uint8_t>* taken = nullptr) {
    phases::Scope p("reference f64");
    ref::Options o;
    o.decode_taps = c.op == Op::decode;
    o.route_taken = taken;
    NamedD all = ref::run(c, o);
    if (c.op != Op::decode) return all;
    NamedD out{{"out", all.at("out")}};
    *taps = std::move(all);
    return out;
}

// The tolerance model's measured baselines and its a-priori term. `ours`:
// our float64 reference of the case (with a decode case's taps). A router's
// baselines make no choice of their own: they are computed on the truth's
// (a baseline that took the other side of a near-tie would be another
// expert's output, and would excuse any).
void baselines(Truth& t, const Case& c, DType dtype, const NamedD& ours) {
    if (t.route_choice.empty()) t.route_choice = route_choice_of(c, ours);
    measure_baselines(t, c, dtype, {});
    if (c.act_quant != ActQuant::none)
        for (const auto& [name, b] : t.base_library) {
            const auto r = ours.find(name);
            if (r == ours.end() || r->second.data.size() != b.data.size()) continue;
            bool beyond = false;
            for (size_t i = 0; i < b.data.size() && !beyond; ++i)
                beyond = !std::isfinite(b.data[i]) && std::isfinite(r->second.data[i]);
            if (beyond) {
                t.beyond_declared = std::string("the declared ") + to_string(c.act_quant) +
                                    " activations cannot hold this case's: the baseline quantised so is not finite "
                                    "where the reference is" +
                                    (c.act_quant == ActQuant::q8_0
                                         ? " (Q8_0's block scale is an f16, which overflows past an amax of 8.3e6)"
                                         : "");
                break;
            }
        }
    phases::Scope p("a-priori bound");
    t.noise = ref::reduction_noise(c, dtype, &ours);
}

}  // namespace

void measure_baselines(Truth& t, const Case& c, DType dtype, const ref::Variant& v) {
    const std::string d = to_string(dtype);
    const std::vector<uint8_t>* choice = t.route_choice.empty() ? nullptr : &t.route_choice;
    {
        phases::Scope p("baseline " + d + " library order");
        t.base_library = ref::run(c, {ref::precision_of(dtype), ref::Order::library, v, false, c.act_quant, choice});
    }
    {
        phases::Scope p("baseline " + d + " sequential order");
        t.base_sequential =
            ref::run(c, {ref::precision_of(dtype), ref::Order::sequential, v, false, c.act_quant, choice});
    }
}

std::vector<uint8_t> route_choice_of(const Case& c, const NamedD& out) {
    if (!op_info(c.op).uses(kMoeRoute)) return {};
    const auto r = out.find(route_output(c.op));
    if (r == out.end()) return {};
    std::vector<uint8_t> choice(r->second.data.size());
    for (size_t i = 0; i < choice.size(); ++i) choice[i] = r->second.data[i] != 0;
    return choice;
}

Truth reference_truth(const Case& c, DType dtype, const std::vector<uint8_t>* taken) {
    ref::threads_for(c);
    Truth t;
    t.source = taken ? "reference f64 on the kernel's choice of experts" : "reference f64";
    if (taken) t.route_choice = *taken, t.route_given = true;
    NamedD taps;
    t.ref = reference_f64(c, &taps, taken);
    baselines(t, c, dtype, taps.empty() ? t.ref : taps);
    return t;
}

Truth fixture_truth(const Case& c, DType dtype) {
    ref::threads_for(c);
    Truth t;
    t.source = "fixture expected";
    t.ref = c.expected;
    NamedD taps;
    t.base_truth = reference_f64(c, &taps);
    baselines(t, c, dtype, taps.empty() ? t.base_truth : taps);
    return t;
}

std::string input_shapes(const Case& c) {
    std::string s;
    for (const auto& [name, t] : c.inputs) s += (s.empty() ? "" : " ") + name + shape_str(t.shape);
    for (const auto& [name, p] : c.positions) {
        s += " " + name + "[" + std::to_string(p.size()) + "]";
        if (!p.empty()) s += "=" + std::to_string(p.front()) + ".." + std::to_string(p.back());
    }
    return s;
}

namespace {

// Elements whose stored value is an infinity, exactly: -inf by contract
// where a row sees no key (lse, `neg_inf_when_empty`), and a truth beyond
// the dtype's range (an f16 lse of 7e4 stores as +inf: IEEE rounding, what a
// legitimate program gives). There the implementation must give that
// infinity, and the rest of the tensor is judged as any other with those
// elements set to 0 on every side. `broke`: the first element that did not
// ("" when none). nullopt: the tensor has no such element (nothing copied).
struct Exact {
    DTensor ref, out, base_library, base_sequential, base_truth;
    std::string broke;
};
std::optional<Exact> exact_infinities(const DTensor& ref, const DTensor& out, const DTensor& bl, const DTensor& bs,
                                      const DTensor* bt, const std::string& name, int64_t hd, DType dtype,
                                      bool neg_inf_when_empty) {
    auto want = [&](int64_t i) -> double {  // the infinity element i must be, or 0 for none
        const double r = bt ? bt->data[i] : ref.data[i];
        if (neg_inf_when_empty && (ref.data[i] == -INFINITY || r == -INFINITY)) return -INFINITY;
        const double stored = round_to(ref.data[i], dtype);
        return std::isinf(stored) ? stored : 0.0;
    };
    int64_t first = -1;
    for (int64_t i = 0; i < ref.numel() && first < 0; ++i)
        if (want(i) != 0) first = i;
    if (first < 0) return std::nullopt;
    Exact e{ref, out, bl, bs, bt ? *bt : DTensor{}, ""};
    for (int64_t i = first; i < ref.numel(); ++i) {
        const double w = want(i);
        if (w == 0) continue;
        if (out.data[i] != w && e.broke.empty()) {
            std::ostringstream o;
            o << name << " at " << locate(i, ref.cols(), hd).str() << " is " << out.data[i] << ", want " << w
              << (w < 0 && neg_inf_when_empty ? ": the row sees no key (an empty sequence)"
                                              : std::string(": the truth ") + std::to_string(ref.data[i]) +
                                                    " is beyond " + to_string(dtype) + "'s range");
            e.broke = o.str();
        }
        e.ref.data[i] = e.out.data[i] = e.base_library.data[i] = e.base_sequential.data[i] = 0;
        if (bt) e.base_truth.data[i] = 0;
    }
    return e;
}

}  // namespace

namespace {

// Every output against the truth, value by value.
CaseResult judge_values(const Case& c, DType dtype, const NamedD& outputs, const Truth& truth) {
    CaseResult r;
    r.op = c.op;
    r.dtype = dtype;
    r.act_quant = c.act_quant;
    r.case_id = c.id;
    r.file = c.file;
    r.group = c.group;
    r.origin = c.file.empty() ? "property" : "fixture";
    r.shapes = input_shapes(c);
    r.pass = true;
    for (const auto& name : output_names(c.op)) {
        auto t = truth.ref.find(name);
        auto o = outputs.find(name);
        if (t == truth.ref.end() || o == outputs.end()) continue;
        if (o->second.shape != t->second.shape) {
            r.pass = false;
            r.error = "output '" + name + "' has shape " + shape_str(o->second.shape) + ", expected " + shape_str(t->second.shape);
            if (r.first_failing.empty()) r.first_failing = name;
            continue;
        }
        const int64_t hd = head_dim_of(c, name);
        auto bt_it = truth.base_truth.find(name);
        const DTensor* truth_base = bt_it == truth.base_truth.end() ? nullptr : &bt_it->second;
        const std::optional<Exact> empty =
            exact_infinities(t->second, o->second, truth.base_library.at(name), truth.base_sequential.at(name),
                             truth_base, name, hd, dtype, op_info(c.op).output(name)->neg_inf_when_empty);
        const DTensor& ref = empty ? empty->ref : t->second;
        const DTensor& actual = empty ? empty->out : o->second;
        Metrics m = measure(actual.data.data(), ref, hd);
        Baseline b;
        const DTensor& bl = empty ? empty->base_library : truth.base_library.at(name);
        const DTensor& bs = empty ? empty->base_sequential : truth.base_sequential.at(name);
        const DTensor& base_ref = !truth_base ? ref : empty ? empty->base_truth : *truth_base;
        Metrics ml = measure(bl.data.data(), base_ref, hd), ms = measure(bs.data.data(), base_ref, hd);
        b.err_library = ml.max_abs;
        b.err_sequential = ms.max_abs;
        b.nmse = std::max(ml.nmse, ms.nmse);
        const int64_t cols = std::max<int64_t>(1, base_ref.cols());
        b.row.assign(static_cast<size_t>(base_ref.rows()), 0.0);
        for (int64_t i = 0; i < base_ref.numel(); ++i) {
            const double e = std::max(std::abs(bl.data[i] - base_ref.data[i]), std::abs(bs.data[i] - base_ref.data[i]));
            double& r = b.row[static_cast<size_t>(i / cols)];
            if (e > r || std::isnan(e)) r = e;
        }
        const auto nz = truth.noise.find(name);
        Verdict v = judge(c.op, dtype, actual.data.data(), m, b, ref, nz == truth.noise.end() ? nullptr : &nz->second, hd);
        if (empty && !empty->broke.empty() && v.pass) {
            v.pass = false;
            v.decided_by = "nonfinite";
            v.margin = 0;
            v.why = empty->broke;
        }
        if (!v.pass) {
            r.pass = false;
            if (r.first_failing.empty()) r.first_failing = name;
        }
        if (!v.pass && r.error_map.empty()) {  // the first failing tensor, for reports
            r.error_map = error_map(name, actual.data.data(), ref, hd, row_positions_of(c, ref.rows()), v.allowed);
            r.error_map.case_id = c.id;
        }
        r.tensors.push_back({name, v});
    }
    if (r.tensors.empty() && r.error.empty()) {
        r.pass = false;
        r.error = "no output to compare";
    }
    return r;
}

}  // namespace

namespace {

// Each token whose route chooses K experts (its nonzero entries): f(t, row),
// row its E flags, until f returns false. A token with other than K is left
// to the values (its chosen weight may read 0: a fixture's underflow).
// Nothing where the route is missing or not the choice's size.
template <typename F>
void for_each_choice(const Case& c, const BlockConfig& g, const NamedD& outputs, size_t size, F&& f) {
    const auto o = outputs.find(route_output(c.op));
    const int64_t E = g.n_experts;
    if (o == outputs.end() || o->second.data.size() != size || E <= 0) return;
    std::vector<uint8_t> row(static_cast<size_t>(E));
    for (int64_t t = 0; t < static_cast<int64_t>(size) / E; ++t) {
        int64_t n = 0;
        for (int64_t e = 0; e < E; ++e) n += (row[static_cast<size_t>(e)] = o->second.data[static_cast<size_t>(t * E + e)] != 0);
        if (n == g.n_experts_per_tok && !f(t, row)) return;
    }
}

bool same_choice(const std::vector<uint8_t>& choice, int64_t t, const std::vector<uint8_t>& row) {
    return std::equal(row.begin(), row.end(), choice.begin() + t * static_cast<int64_t>(row.size()));
}

// "token t took expert 3 where <whose> 5": the experts row chose that
// choice's token t did not, and those it left.
std::string took(const std::vector<uint8_t>& choice, int64_t t, const std::vector<uint8_t>& row, const char* whose) {
    const int64_t E = static_cast<int64_t>(row.size());
    std::string got, left;
    for (int64_t e = 0; e < E; ++e) {
        const bool mine = choice[static_cast<size_t>(t * E + e)], theirs = row[static_cast<size_t>(e)];
        if (theirs && !mine) got += (got.empty() ? "" : ", ") + std::to_string(e);
        if (mine && !theirs) left += (left.empty() ? "" : ", ") + std::to_string(e);
    }
    return "token " + std::to_string(t) + " took expert " + got + " where " + whose + " " + left;
}

// The first token whose experts are not `choice`'s, in words; "" where every
// token with K has them.
std::string other_choice(const Case& c, const NamedD& outputs, const std::vector<uint8_t>& choice) {
    std::string first;
    for_each_choice(c, c.config, outputs, choice.size(), [&](int64_t t, const std::vector<uint8_t>& row) {
        if (same_choice(choice, t, row)) return true;
        first = took(choice, t, row, "it takes");
        return false;
    });
    return first;
}

// The route fails by the experts it chose, whatever its values: `why`.
void fail_on_selection(const Case& c, CaseResult& r, const std::string& why) {
    const char* name = route_output(c.op);
    for (TensorResult& tr : r.tensors)
        if (tr.name == name) {
            tr.v.pass = false;
            tr.v.decided_by = "selection";
            tr.v.margin = 0;
            tr.v.why = why;
        }
    r.pass = false;
    r.first_failing = name;  // the route comes first in data-flow order
}

}  // namespace

// A router's case: where the kernel's choice of experts (the nonzero entries
// of its route) differs from the one the truth was computed on, each token
// it chose otherwise is checked against the router's margin in the dtype
// (route_outside_tie). A choice an honest program may make (a near-tie taken
// the other way) is judged on that choice: the reference, its baselines and
// its bound computed again on it. One no honest program makes fails on the
// route with the reason. A token with other than K experts is left to the
// values (its chosen weight may read 0: a fixture's underflow).
ChoiceTaken choice_taken(const Case& c, const BlockConfig& g, DType dtype, const NamedD& outputs,
                         const std::vector<uint8_t>& truth_choice) {
    ChoiceTaken r;
    r.choice = truth_choice;
    for_each_choice(c, g, outputs, truth_choice.size(), [&](int64_t t, const std::vector<uint8_t>& row) {
        if (same_choice(r.choice, t, row)) return true;
        const std::string why = route_outside_tie(c, g, dtype, t, row);
        if (!why.empty()) {
            if (r.outside.empty()) r.outside = why;
            return true;
        }
        if (r.took.empty()) r.took = took(r.choice, t, row, "the reference takes") + ", a near-tie in " + to_string(dtype);
        std::copy(row.begin(), row.end(), r.choice.begin() + t * static_cast<int64_t>(row.size()));
        ++r.differ;
        return true;
    });
    return r;
}

// A router's case: where the kernel's choice of experts (the nonzero entries
// of its route) differs from the one the truth was computed on, a choice an
// honest program may make (a near-tie taken the other way) is judged on that
// choice: the reference, its baselines and its bound computed again on it.
// One no honest program makes fails on the route with the reason.
CaseResult judge_case(const Case& c, DType dtype, const NamedD& outputs, const Truth& truth) {
    if (truth.route_choice.empty()) return judge_values(c, dtype, outputs, truth);
    if (truth.route_given) {
        // A truth on a given choice (the kernel's, or a hypothesis's own rule
        // of choosing) holds only for outputs that chose the same: other
        // experts whose weights happen to be as small as the ones it takes
        // (softmax scores of 1e-8) would pass on the values alone, and a
        // hypothesis would then "explain" the faithful choice as well.
        CaseResult r = judge_values(c, dtype, outputs, truth);
        const std::string other = other_choice(c, outputs, truth.route_choice);
        if (!other.empty()) fail_on_selection(c, r, "other experts than the ones this truth is computed on: " + other);
        return r;
    }
    const ChoiceTaken ct = choice_taken(c, c.config, dtype, outputs, truth.route_choice);
    if (!ct.outside.empty()) {
        CaseResult r = judge_values(c, dtype, outputs, truth);
        fail_on_selection(c, r, std::string("an expert no honest ") + to_string(dtype) + " router chooses: " + ct.outside);
        return r;
    }
    if (ct.differ == 0) return judge_values(c, dtype, outputs, truth);
    const Truth forced = reference_truth(c, dtype, &ct.choice);
    CaseResult r = judge_values(c, dtype, outputs, forced);
    r.route_taken = "judged on the experts it chose: " + ct.took +
                    (ct.differ > 1 ? " (and " + std::to_string(ct.differ - 1) + " more tokens)" : "");
    return r;
}

}  // namespace conform

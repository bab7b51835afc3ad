#include "judge/judge.h"

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
NamedD reference_f64(const Case& c, NamedD* taps) {
    phases::Scope p("reference f64");
    ref::Options o;
    o.decode_taps = c.op == Op::decode;
    NamedD all = ref::run(c, o);
    if (c.op != Op::decode) return all;
    NamedD out{{"out", all.at("out")}};
    *taps = std::move(all);
    return out;
}

// The tolerance model's measured baselines and its a-priori term. `ours`:
// our float64 reference of the case (with a decode case's taps).
void baselines(Truth& t, const Case& c, DType dtype, const NamedD& ours) {
    const std::string d = to_string(dtype);
    // Below float32 a router's top-k may honestly take either side of a
    // near-tie, and so may the baselines: a baseline on other experts would
    // excuse anything. Judging such a kernel on the selection it took is not
    // built yet (docs/moe.md); the generator keeps float32's ties out.
    if (op_info(c.op).uses(kMoeRoute) && dtype != DType::f32) {
        t.beyond_declared = "a router below float32 is not judged yet: its top-k may honestly take either side of a "
                            "near-tie, and judging it on the selection it took is not built (docs/moe.md); "
                            "moe_experts takes a route and is judged in every dtype";
        return;
    }
    {
        phases::Scope p("baseline " + d + " library order");
        t.base_library = ref::run(c, {ref::precision_of(dtype), ref::Order::library, {}, false, c.act_quant});
    }
    {
        phases::Scope p("baseline " + d + " sequential order");
        t.base_sequential = ref::run(c, {ref::precision_of(dtype), ref::Order::sequential, {}, false, c.act_quant});
    }
    // A router's near-tie (a fixture's, or duplicated router columns): a
    // float32 router may break it either way, and so may a baseline, which
    // would then excuse any choice. Not judged. The drawn cases hold none
    // (core/case.cpp route_clear); a baseline on other experts than the
    // reference's is the same finding, checked too.
    if (const int64_t tie = first_route_tie(c); tie >= 0) {
        t.beyond_declared = "token " + std::to_string(tie) +
                            "'s expert choice is a near-tie a float32 router may break either way (its K-th and "
                            "(K + 1)-th choice scores within the router's rounding bound): not judged (docs/moe.md)";
        return;
    }
    if (op_info(c.op).uses(kMoeRoute)) {
        const char* route = c.op == Op::moe ? "route" : "out";
        const DTensor& r = ours.at(route);
        for (const NamedD* b : {&t.base_library, &t.base_sequential}) {
            const DTensor& o = b->at(route);
            for (size_t i = 0; i < r.data.size() && t.beyond_declared.empty(); ++i)
                // (a chosen weight below float32's range reads 0 there: chosen still)
                if ((r.data[i] != 0) != (o.data[i] != 0) && !(o.data[i] == 0 && std::fabs(r.data[i]) < 1e-30))
                    t.beyond_declared = "token " + std::to_string(i / static_cast<size_t>(r.cols())) +
                                        "'s expert choice is a near-tie a float32 router may break either way "
                                        "(a float32 baseline chooses expert " +
                                        std::to_string(i % static_cast<size_t>(r.cols())) +
                                        " where the reference does not, or the other way): not judged (docs/moe.md)";
        }
    }
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

Truth reference_truth(const Case& c, DType dtype) {
    ref::threads_for(c);
    Truth t;
    t.source = "reference f64";
    NamedD taps;
    t.ref = reference_f64(c, &taps);
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

CaseResult judge_case(const Case& c, DType dtype, const NamedD& outputs, const Truth& truth) {
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

}  // namespace conform

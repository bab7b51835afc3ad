// Testing hypotheses, and turning what was found into report lines.
#include "diagnose/diagnose.h"

#include "gen/gen.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <fmt/format.h>

namespace conform::diagnose {

std::vector<std::string> Diagnosis::ids() const {
    std::vector<std::string> out;
    for (const auto& m : matches)
        if (std::find(out.begin(), out.end(), m.id) == out.end()) out.push_back(m.id);
    return out;
}

namespace {

std::string sci(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return "non-finite";
    return fmt::format("{:.1e}", v);
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
}

// The reference with one convention changed, as a truth to judge against:
// float64, and the same variant in the dtype in both summation orders (the
// tolerance model's baselines). The a-priori noise term depends only on the
// magnitudes of the reductions, which one convention does not change: the
// faithful case's is used.
//
// The faithful case's float64 reference and a-priori noise, computed once for
// all the hypotheses tried on one case (the noise is the costly part of a
// truth on a large case) — or taken from the truth the gate already built for
// it (prime()), so a failure's diagnosis does not compute them again.
struct Faithful {
    const Case* c = nullptr;
    std::string id;
    const void* data = nullptr;
    DType dtype = DType::f32;
    ActQuant act_quant = ActQuant::none;  // the noise's flip term depends on it
    std::optional<NamedD> ref;
    std::optional<NamedD> taps;  // decode's: the block's taps beside out
    std::optional<std::map<std::string, DTensor>> noise;
};
Faithful& faithful_for(const Case& c, DType dtype) {
    static Faithful memo;
    const void* data = c.inputs.empty() ? nullptr : c.inputs.begin()->second.data.data();
    if (memo.c != &c || memo.id != c.id || memo.data != data || memo.dtype != dtype || memo.act_quant != c.act_quant) {
        memo = Faithful{};
        memo.c = &c, memo.id = c.id, memo.data = data, memo.dtype = dtype, memo.act_quant = c.act_quant;
    }
    return memo;
}
const NamedD& faithful_ref(const Case& c, DType dtype) {
    Faithful& f = faithful_for(c, dtype);
    if (!f.ref) f.ref = ref::run(c);
    return *f.ref;
}
// The faithful reference with every value the a-priori bound starts from:
// decode's with its block's taps, any other op's as it is.
const NamedD& faithful_taps(const Case& c, DType dtype) {
    if (c.op != Op::decode) return faithful_ref(c, dtype);
    Faithful& f = faithful_for(c, dtype);
    if (!f.taps) {
        ref::Options o;
        o.decode_taps = true;
        f.taps = ref::run(c, o);
    }
    return *f.taps;
}
const std::map<std::string, DTensor>& faithful_noise(const Case& c, DType dtype) {
    Faithful& f = faithful_for(c, dtype);
    if (!f.noise) f.noise = ref::reduction_noise(c, dtype, &faithful_taps(c, dtype));
    return *f.noise;
}
// A truth built for this case and dtype: its float64 reference (a fixture's:
// ours, base_truth) and its noise are the faithful ones.
void prime(const Case& c, DType dtype, const Truth* t) {
    if (!t || t->noise.empty()) return;
    const NamedD& ours = t->source == "reference f64" ? t->ref : t->base_truth;
    if (ours.empty()) return;
    Faithful& f = faithful_for(c, dtype);
    if (!f.ref) f.ref = ours;
    if (!f.noise) f.noise = t->noise;
}

// `taken`: a router's choice to compute it on (judge_under), else the variant's own.
Truth variant_truth(const Case& c, DType dtype, const ref::Variant& v, const std::vector<uint8_t>* taken = nullptr) {
    Truth t;
    t.source = "reference f64 with " + v.describe();
    // decode's variant with its block's taps (its outputs are out alone): the
    // a-priori bound starts from them, and whether the variant moved the
    // sizes is asked of them too (a decode's out alone may hide a tap the
    // variant scaled; without them the bound was the faithful block's).
    NamedD taps = ref::run(c, {ref::Precision::f64, ref::Order::library, v, c.op == Op::decode, ActQuant::none, taken});
    if (c.op == Op::decode) {
        t.ref = {{"out", taps.at("out")}};
    } else {
        t.ref = std::move(taps);
    }
    const NamedD& ours = c.op == Op::decode ? taps : t.ref;
    // A router's baselines on the same choice (judge.cpp's baselines()).
    t.route_choice = route_choice_of(c, t.ref);
    t.route_given = true;  // judge_under takes the kernel's choice, under the variant's config
    measure_baselines(t, c, dtype, v);
    // The a-priori bound of a program that computes the variant: the
    // faithful one where the variant's values are of the faithful sizes (the
    // bound follows magnitudes, not which convention made them), else
    // computed from the variant's own float64 values — an RMSNorm that sums
    // nothing scales a block's activations by 1/sqrt(eps), and a bound for
    // the faithful sizes is not one for those.
    const NamedD& faithful = faithful_taps(c, dtype);
    bool resized = false;
    for (const auto& [name, r] : ours) {
        const auto f = faithful.find(name);
        if (f == faithful.end()) continue;
        double mr = 0, mf = 0;
        for (double x : r.data) mr = std::isfinite(x) ? std::max(mr, std::abs(x)) : mr;
        for (double x : f->second.data) mf = std::isfinite(x) ? std::max(mf, std::abs(x)) : mf;
        resized = resized || mr > 4 * mf;
    }
    // A config edit (a twist ignored, a window one wider) is another case's
    // computation: its bound is that case's (a window ignored sums every key,
    // and at magnitude 30 the faithful window's bound is too tight for it).
    if (v.config) {
        Case edited = c;
        edited.config = *v.config;
        t.noise = ref::reduction_noise(edited, dtype, &ours);
    } else if (v.paged_sequences_packed || v.paged_queries_at_start || v.paged_partial_page_dropped ||
               v.window != ref::Variant::Window::as_config) {
        // Other keys summed per sequence (every earlier sequence's, up to
        // thousands more; a window that holds in decode only, every earlier
        // key of a prefill): the bound of that sum.
        t.noise = ref::reduction_noise(c, dtype, &ours, &v);
    } else {
        t.noise = resized ? ref::reduction_noise(c, dtype, &ours) : faithful_noise(c, dtype);
    }
    return t;
}

// A hypothesis that overflows (softmax without the max) predicts non-finite
// values: where the observed output is non-finite at exactly the elements the
// variant is, those elements are set aside — zeroed on every side — and the
// rest is judged as usual. Returns how many were set aside, or -1 when the
// patterns differ (no match possible). (Whose NaN it is: nan_sources_differ.)
int64_t set_aside_nonfinite(NamedD& observed, Truth& t) {
    int64_t total = 0;
    for (auto& [name, o] : observed) {
        auto it = t.ref.find(name);
        if (it == t.ref.end() || it->second.data.size() != o.data.size()) continue;
        std::vector<double>& r = it->second.data;
        int64_t n = 0;
        for (size_t i = 0; i < r.size(); ++i) {
            const bool a = !std::isfinite(o.data[i]), b = !std::isfinite(r[i]);
            if (a != b) return -1;
            n += a;
        }
        if (n == 0) continue;
        for (size_t i = 0; i < r.size(); ++i) {
            if (std::isfinite(r[i])) continue;
            o.data[i] = r[i] = 0;
            for (NamedD* base : {&t.base_library, &t.base_sequential}) {
                auto b = base->find(name);
                if (b != base->end() && i < b->second.data.size()) b->second.data[i] = 0;
            }
        }
        total += n;
    }
    return total;
}

const TensorResult* tensor_of(const CaseResult& r, const std::string& name) {
    for (const auto& t : r.tensors)
        if (t.name == name) return &t;
    return nullptr;
}

// The tensor a failure is described on: the first failing one.
std::string subject_tensor(const CaseResult& failed) {
    if (!failed.first_failing.empty()) return failed.first_failing;
    return failed.tensors.empty() ? "out" : failed.tensors.front().name;
}

// The variant's truth for `observed`: a router judged on the experts it
// took where the variant's config makes them a near-tie (as judge_case does
// under the case's); nullopt where it makes them a choice no honest program
// makes (the variant does not explain them). A variant that changes the
// choice's own rule (the masked groups' fill, a bf16 router) is judged on
// its own choice: the margin (route_outside_tie) knows the config's rules only.
// `own`: the variant's truth on its own choice (variant_truth), computed
// once by the caller and shared by every output judged under the variant.
std::optional<Truth> truth_for(const Case& c, DType dtype, const NamedD& observed, const ref::Variant& v,
                               const Truth& own) {
    if (own.route_choice.empty() || v.moe_group_mask_zero || v.moe_router_bf16) return own;
    const ChoiceTaken ct = choice_taken(c, v.config ? *v.config : c.config, dtype, observed, own.route_choice);
    if (!ct.outside.empty()) return std::nullopt;
    if (ct.differ > 0) return variant_truth(c, dtype, v, &ct.choice);
    return own;
}

bool conforms(const Case& c, DType dtype, NamedD observed, Truth t) {
    return set_aside_nonfinite(observed, t) >= 0 && judge_case(c, dtype, observed, t).pass;
}

// The subject tensor's error under the config (failed) and under the
// hypothesis (jr), and what the hypothesis allows there.
void record_errors(HypothesisMatch& m, const CaseResult& failed, const CaseResult& jr) {
    m.tensor = subject_tensor(failed);
    const TensorResult* before = tensor_of(failed, m.tensor);
    const TensorResult* after = tensor_of(jr, m.tensor);
    m.err_config = before ? before->v.m.max_abs : NAN;
    m.err_hypothesis = after ? after->v.m.max_abs : NAN;
    m.allowed = after ? after->v.allowed : NAN;
}

// Judges observed against one variant; fills m's errors. True when it
// conforms there — and, given the faithful float64 reference, when that does
// not: a convention the case cannot tell from the config's explains nothing
// (on a marginal failure it would "match" by a hair).
// Whether the observed NaNs and the variant's come from different sources
// where both are non-finite: the paged pool's poison on one side, the
// computation's own overflow on the other. The poison (gen::poison_bits)
// survives every float32 operation that propagates a NaN operand, so a
// kernel that read it shows it; LibTorch's float64 reductions do not keep
// payloads, so the variant's NaN is asked again with the poison made finite.
// - The observed NaNs carry no poison, and the variant's come only from
//   reading it: a kernel whose split-KV merge overflows to NaN at the places
//   a last-page overrun would read poison is not that overrun (in float32
//   without an FP8 cache, where the payload reaches the output).
// - An observed NaN carries the poison, and the variant's NaN there is its
//   own (non-finite with the poison made finite too): a kernel that read one
//   slot past its last page at magnitude 30 is not a softmax without its max
//   that overflows at the same elements (issue 53: NaN positions agreeing is
//   not agreement). (A variant that both reads the poison and overflows at
//   an element is not told from one that only overflows: it is not named
//   there, which is no wrong name.)
bool nan_sources_differ(const Case& c, DType dtype, const NamedD& observed, const Truth& t, const ref::Variant& v) {
    if (!op_info(c.op).uses(kPaged)) return false;
    // Where the payload cannot reach the output (an FP8 cache's codes, an
    // output below float32), a NaN without it may still be the poison's.
    const bool payload_kept = dtype == DType::f32 && c.config.kv_cache_dtype == KvCacheDtype::none;
    auto variant_nonfinite = [&](const std::string& name, size_t i) {
        const auto tt = t.ref.find(name);
        return tt != t.ref.end() && i < tt->second.data.size() && !std::isfinite(tt->second.data[i]);
    };
    bool poison_seen = false, shared = false;
    for (const auto& [name, o] : observed)
        for (size_t i = 0; i < o.data.size(); ++i) {
            if (!std::isnan(o.data[i])) continue;
            poison_seen = poison_seen || gen::poison_row(static_cast<float>(o.data[i])).has_value();
            shared = shared || variant_nonfinite(name, i);
        }
    // Only where the variant is non-finite at an observed NaN is the question worth a reference run.
    if (!shared) return false;
    Case finite = c;
    for (const char* pool : op_info(c.op).pools())
        for (float& x : finite.inputs.at(pool).data)
            if (gen::poison_row(x)) x = 0.0f;
    const NamedD r = ref::run(finite, {ref::Precision::f64, ref::Order::library, v});
    auto own_nan = [&](const std::string& name, size_t i) {  // non-finite without the poison too
        const auto it = r.find(name);
        return it != r.end() && i < it->second.data.size() && !std::isfinite(it->second.data[i]);
    };
    bool any_own = false;
    for (const auto& [name, o] : observed)
        for (size_t i = 0; i < o.data.size(); ++i) {
            if (!std::isnan(o.data[i]) || !variant_nonfinite(name, i)) continue;
            const bool own = own_nan(name, i);
            if (own && gen::poison_row(static_cast<float>(o.data[i]))) return true;  // poison seen, overflow predicted
            any_own = any_own || own;
        }
    // No poison seen, and every NaN the variant predicts is the poison's.
    // (Where the kernel read the poison somewhere, a NaN of its that lost
    // the payload may still be the poison's: not told apart.)
    return payload_kept && !poison_seen && !any_own;
}

bool judge_under(const Case& c, DType dtype, const NamedD& observed, const ref::Variant& v, const CaseResult& failed,
                 HypothesisMatch& m, const NamedD* faithful = nullptr) {
    const Truth own = variant_truth(c, dtype, v);
    if (faithful) {
        const std::optional<Truth> tf = truth_for(c, dtype, *faithful, v, own);
        if (tf && conforms(c, dtype, *faithful, *tf)) return false;
    }
    std::optional<Truth> to = truth_for(c, dtype, observed, v, own);
    if (!to) return false;
    Truth& t = *to;
    // Asked before the non-finite elements are set aside (that zeroes them in t).
    const bool other_source = nan_sources_differ(c, dtype, observed, t, v);
    NamedD obs = observed;
    const int64_t aside = set_aside_nonfinite(obs, t);
    if (aside < 0) return false;
    if (aside > 0 && other_source) return false;
    const CaseResult jr = judge_case(c, dtype, obs, t);
    m.change = v.describe();
    m.variant = v;
    record_errors(m, failed, jr);
    if (aside > 0) m.note = fmt::format("non-finite at the same {} elements, the rest within bounds", aside);
    return jr.pass;
}

double max_abs_diff(const DTensor& a, const DTensor& b) {
    if (a.data.size() != b.data.size()) return INFINITY;
    double m = 0;
    for (size_t i = 0; i < a.data.size(); ++i) {
        const double d = std::abs(a.data[i] - b.data[i]);
        if (!(d <= m)) m = std::isnan(d) ? INFINITY : d;
    }
    return m;
}

// theta minimising the error on the failing tensor: a grid on log10(theta)
// over [2, 8], then golden-section search around the best grid point. Shrunk
// cases have small positions, where the error is smooth in log(theta); at
// large positions it oscillates and the fit may find nothing, which is then
// what is reported.
std::optional<HypothesisMatch> fit_theta(const Case& c, DType dtype, const NamedD& observed,
                                         const CaseResult& failed) {
    const std::string tensor = subject_tensor(failed);
    const auto obs = observed.find(tensor);
    if (obs == observed.end()) return std::nullopt;
    auto err_at = [&](double log10_theta) {
        ref::Variant v;
        v.theta = std::pow(10.0, log10_theta);
        const NamedD r = ref::run(c, {ref::Precision::f64, ref::Order::library, v});
        const auto it = r.find(tensor);
        return it == r.end() ? INFINITY : max_abs_diff(obs->second, it->second);
    };
    constexpr double lo = 2.0, hi = 8.0, step = 0.05;
    double best = lo, best_err = INFINITY;
    for (double x = lo; x <= hi + 1e-9; x += step) {
        const double e = err_at(x);
        if (e < best_err) best = x, best_err = e;
    }
    const double phi = (std::sqrt(5.0) - 1) / 2;
    double a = best - step, b = best + step;
    double x1 = b - phi * (b - a), x2 = a + phi * (b - a);
    double f1 = err_at(x1), f2 = err_at(x2);
    for (int i = 0; i < 40; ++i) {
        if (f1 < f2) {
            b = x2, x2 = x1, f2 = f1;
            x1 = b - phi * (b - a), f1 = err_at(x1);
        } else {
            a = x1, x1 = x2, f1 = f2;
            x2 = a + phi * (b - a), f2 = err_at(x2);
        }
    }
    const double fitted = std::pow(10.0, f1 < f2 ? x1 : x2);
    // Within a few percent of the config's base it is not a theta bug, but
    // some other small error in the angles the fit happened to absorb.
    if (std::abs(std::log(fitted / c.config.rope_theta)) < std::log(1.05)) return std::nullopt;
    ref::Variant v;
    v.theta = fitted;
    HypothesisMatch m;
    if (!judge_under(c, dtype, observed, v, failed, m, &faithful_ref(c, dtype))) return std::nullopt;
    const bool is_default = std::abs(fitted / 1e4 - 1) < 0.01;
    m.id = is_default ? "rope_theta_default" : "rope_theta_wrong";
    m.change = fmt::format("rope_theta={:.5g} (fitted)", fitted);
    m.why = is_default ? fmt::format("rope_theta not propagated: RoPE uses the default 10000, the config says {:g}",
                                     c.config.rope_theta)
                       : fmt::format("wrong RoPE base: the output fits theta {:.5g}, the config says {:g}", fitted,
                                     c.config.rope_theta);
    return m;
}

}  // namespace

// Whether the error of `observed` on `tensor` looks like the lower dtype's
// own rounding error on this case (its baseline minus the float64
// reference), not merely fits under its bound: on at least 16 elements, of
// the same size (rms within a factor of 8 either way), not systematic (no
// more correlated with the reference than that dtype's own error is: a scale
// or shift bug is), and not structured (present in at least three rows in
// four and three columns in four at a sixteenth of the lower dtype's own
// error there: a bug confined to a head, a dim band, a position range or a
// tile leaves the other rows or columns at the claimed dtype's accuracy).
// Correlations and shapes on small tensors are noise: those two tests apply
// from 64 elements and 4 rows or columns on.
namespace {

// The share of an error's energy (Σ e²) that one multiplier per group of
// `width` consecutive elements of a row explains (e ≈ α_g · ref on each
// group): near 1 for a logic change that rescales a row or a head (a norm's
// sum missing terms, a sink's weight wrong), about width⁻¹ for independent
// rounding errors.
double proportional_share(const DTensor& err_of, const DTensor& ref, int64_t width) {
    const int64_t R = ref.rows(), C = ref.cols();
    if (width <= 0 || C % width != 0) return 0;
    double explained = 0, total = 0;
    for (int64_t r = 0; r < R; ++r)
        for (int64_t g0 = 0; g0 < C; g0 += width) {
            double er = 0, rr = 0;
            for (int64_t k = g0; k < g0 + width; ++k) {
                const size_t i = static_cast<size_t>(r * C + k);
                const double e = err_of.data[i] - ref.data[i];
                er += e * ref.data[i], rr += ref.data[i] * ref.data[i], total += e * e;
            }
            if (rr > 0) explained += er * er / rr;
        }
    return total > 0 ? explained / total : 0;
}

}  // namespace

std::string unlike_rounding(const DTensor& obs, const DTensor& ref, const DTensor& low, int64_t head_width) {
    const size_t n = ref.data.size();
    if (obs.data.size() != n || low.data.size() != n || n == 0) return "no tensor to compare";
    double se = 0, sl = 0, sr = 0, ser = 0, slr = 0;
    for (size_t i = 0; i < n; ++i) {
        const double e = obs.data[i] - ref.data[i], l = low.data[i] - ref.data[i];
        se += e * e, sl += l * l, sr += ref.data[i] * ref.data[i], ser += e * ref.data[i], slr += l * ref.data[i];
    }
    if (!(sl > 0)) return "the lower dtype makes no error on this case";
    const double ratio = std::sqrt(se / sl);
    if (!(ratio <= 8 && ratio >= 1.0 / 8))
        return fmt::format("its error is {:.3g}x the lower dtype's own (rms), not its size", ratio);
    // On a handful of elements any small error "has the size" of rounding (a
    // softmax scale off by hd^0.05 on a 4-element output did): too little to
    // name a precision by.
    if (n < 16) return fmt::format("{} elements are too few to tell rounding from a small logic error", n);
    // A row or a head rescaled (an RMSNorm's sum without its tail, a sink's
    // weight off): the error is the output times one factor per group, which
    // rounding of its size never is. Measured against the lower dtype's own
    // share on this case: with few elements per group rounding fits some too.
    const int64_t C = ref.cols();
    auto rescaled = [&]() -> std::string {
        for (int64_t width : {C, head_width})
            if (width >= 2 && width <= C && (width == C || head_width < C)) {
                const double share = proportional_share(obs, ref, width), own = proportional_share(low, ref, width);
                if (share > 0.9 && share > own + 0.3)
                    return fmt::format("{:.0f}% of its error is the output rescaled per {} (the lower dtype's own: "
                                       "{:.0f}%): a logic change, not rounding",
                                       100 * share, width == C ? "row" : fmt::format("group of {} columns", width),
                                       100 * own);
            }
        return "";
    };
    if (n < 64) return rescaled();
    // Rounding to a coarser grid is not always unbiased (a bf16 GEMM's error
    // here followed the reference at 0.62): measured against the lower
    // dtype's own correlation on this case, not against zero.
    const double corr = se > 0 && sr > 0 ? ser / std::sqrt(se * sr) : 0;
    const double own = sl > 0 && sr > 0 ? slr / std::sqrt(sl * sr) : 0;
    if (std::abs(corr) > std::abs(own) + 0.3)
        return fmt::format("its error follows the reference (correlation {:.2f}, the lower dtype's own {:.2f}): "
                           "systematic, not rounding",
                           corr, own);
    if (std::string r = rescaled(); !r.empty()) return r;
    const int64_t R = ref.rows();
    auto spread = [&](bool by_row) {
        const int64_t groups = by_row ? R : C;
        if (groups < 4) return 1.0;
        int64_t seen = 0;
        for (int64_t g = 0; g < groups; ++g) {
            double me = 0, ml = 0;
            for (int64_t k = 0; k < (by_row ? C : R); ++k) {
                const size_t i = static_cast<size_t>(by_row ? g * C + k : k * C + g);
                me = std::max(me, std::abs(obs.data[i] - ref.data[i]));
                ml = std::max(ml, std::abs(low.data[i] - ref.data[i]));
            }
            seen += me >= ml / 16;
        }
        return static_cast<double>(seen) / static_cast<double>(groups);
    };
    for (bool by_row : {true, false})
        if (const double s = spread(by_row); s < 0.75)
            return fmt::format("its error is confined to {:.0f}% of the {}: structured, not rounding", 100 * s,
                               by_row ? "rows" : "columns");
    return "";
}

namespace {

// A precision below the one an implementation claims: its dtype, or its
// declared activation quantisation (Case::act_quant), made coarser.
struct Lower {
    DType dtype;
    ActQuant act_quant;
    std::string what;  // "computed in bf16", "activations quantised to q8_0"
};

// Below the claim, the likelier first: the activations of an op with weight
// products quantised more coarsely than declared (none < q8_0 < q8_k: a
// llama.cpp-style kernel that does not say so), then bf16 and f16.
std::vector<Lower> lower_precisions(const Case& c, DType dtype) {
    std::vector<Lower> out;
    if (has_weight_products(c.op))
        for (ActQuant q : {ActQuant::q8_0, ActQuant::q8_k})
            if (act_quant_block(q) > act_quant_block(c.act_quant))
                out.push_back({dtype, q, std::string("activations quantised to ") + to_string(q) + " before each weight product"});
    for (DType lower : {DType::bf16, DType::f16})
        if (unit_roundoff(lower) > unit_roundoff(dtype))
            out.push_back({lower, c.act_quant, std::string("computed in ") + to_string(lower)});
    return out;
}

// The truth at a lower precision (a copy of the case where the declaration changes).
Truth truth_at(const Case& c, const Lower& l) {
    if (l.act_quant == c.act_quant) return reference_truth(c, l.dtype);
    Case other = c;
    other.act_quant = l.act_quant;
    return reference_truth(other, l.dtype);
}

// (Grouped by head: an attention output's columns are its heads'.)
std::string unlike_truths_rounding(const Case& c, const Truth& t, const NamedD& observed, const std::string& tensor) {
    const auto o = observed.find(tensor), r = t.ref.find(tensor), l = t.base_library.find(tensor);
    if (o == observed.end() || r == t.ref.end() || l == t.base_library.end()) return "no " + tensor + " to compare";
    return unlike_rounding(o->second, r->second, l->second, c.config.head_dim);
}

}  // namespace

std::string unlike_rounding(const Case& c, DType lower, const NamedD& observed, const std::string& tensor) {
    return unlike_truths_rounding(c, reference_truth(c, lower), observed, tensor);
}

bool explained_by_precision(const Case& c, DType dtype, const NamedD& observed, const std::string& tensor,
                            bool of_its_kind) {
    bool non_finite = false;  // in the output: a lower precision past its range gives that too
    if (const auto o = observed.find(tensor); o != observed.end())
        for (double v : o->second.data) non_finite = non_finite || !std::isfinite(v);
    for (const Lower& l : lower_precisions(c, dtype)) {
        const Truth t = truth_at(c, l);
        // Not judged at that precision (a router below float32, Q8_0's f16
        // block scale overflowing): it cannot name the case, but where the
        // output too is non-finite the case does not rule it out either.
        if (!t.beyond_declared.empty()) {
            if (!of_its_kind && non_finite) return true;
            continue;
        }
        if (!judge_case(c, l.dtype, observed, t).pass) continue;
        if (!of_its_kind || unlike_truths_rounding(c, t, observed, tensor).empty()) return true;
    }
    return false;
}

namespace {

// Below the claimed dtype: the output conforms to the reference computed in
// bf16 or f16 (their baselines, their bounds) but not in the dtype the
// implementation claims — it stores or multiplies in less than it says —
// and its error is that dtype's kind of error (unlike_rounding: its size,
// unsystematic, everywhere). Only for a failure far from marginal (err over
// 16 times its bound on the failing tensor): an honest float32 program never
// comes near that, and a lower precision's rounding is thousands of times
// the bound. Adds the match to d (the first lower dtype that explains it);
// true if found.
bool precision_downgrade(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed, Diagnosis& d) {
    const TensorResult* worst = tensor_of(failed, subject_tensor(failed));
    if (!worst || !(worst->v.err > 16.0 * worst->v.allowed)) return false;
    const std::string claim = c.act_quant == ActQuant::none
                                  ? std::string(to_string(dtype))
                                  : fmt::format("{} with {} activations", to_string(dtype), to_string(c.act_quant));
    // Of the lower precisions that explain the output, the one whose
    // baseline it is nearest to: a kernel that quantises as Q8_0 does
    // computes Q8_0's baseline but for its summation order (Q8_K's, 1.4 times
    // coarser, and bf16's would pass too), and a bf16 GEMM's output is bf16's
    // baseline but for its order (it passes under Q8_0's truth as well: its
    // error is smaller). Every rung is tried: up to four truths, and only for
    // an error 16 times its bound.
    struct Found {
        Lower l;
        CaseResult jr;
        double distance;
    };
    std::optional<Found> best;
    const std::string tensor = subject_tensor(failed);
    for (const Lower& l : lower_precisions(c, dtype)) {
        ++d.tried;
        const Truth t = truth_at(c, l);
        if (!t.beyond_declared.empty()) continue;  // not judged at that precision (a router below float32)
        CaseResult jr = judge_case(c, l.dtype, observed, t);
        if (!jr.pass) continue;
        if (!unlike_truths_rounding(c, t, observed, tensor).empty()) continue;
        double distance = 0;
        const auto o = observed.find(tensor), r = t.ref.find(tensor), b = t.base_library.find(tensor);
        if (o != observed.end() && r != t.ref.end() && b != t.base_library.end()) {
            double ob = 0, br = 0;
            for (size_t i = 0; i < r->second.data.size(); ++i) {
                ob += std::pow(o->second.data[i] - b->second.data[i], 2);
                br += std::pow(b->second.data[i] - r->second.data[i], 2);
            }
            distance = br > 0 ? std::sqrt(ob / br) : 0;
        }
        if (!best || distance < best->distance) best = Found{l, std::move(jr), distance};
    }
    if (!best) return false;
    {
        const Lower& l = best->l;
        const CaseResult& jr = best->jr;
        HypothesisMatch m;
        m.id = "precision_downgrade";
        m.change = l.what;
        m.why = l.act_quant != c.act_quant
                    ? fmt::format("the output is the accuracy of {} activations, not of {}: the implementation "
                                  "quantises the activations of its weight products more coarsely than it declares "
                                  "(Implementation::activation_quant; a worker's hello: activation_quant)",
                                  to_string(l.act_quant), claim)
                    : fmt::format("the output is {}'s accuracy, not {}'s: something (a GEMM, a stored intermediate) "
                                  "runs in {} in an implementation that claims {}",
                                  to_string(l.dtype), claim, to_string(l.dtype), claim);
        record_errors(m, failed, jr);
        d.matches.push_back(m);
    }
    return true;
}

std::string match_line(const HypothesisMatch& m) {
    std::string s = fmt::format("{}: matches {} (max err {} vs {} under the config, on {}) — {}", m.id, m.change,
                                sci(m.err_hypothesis), sci(m.err_config), m.tensor, m.why);
    if (!m.note.empty()) s += " [" + m.note + "]";
    return s;
}

// Whether some hypothesis of this case with the id `id` (a mechanism a
// poisoned row's read suggests) reproduces the output (true where the case
// has none: the read is then the whole evidence).
bool reproduces(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed, const std::string& id,
                const NamedD& faithful) {
    bool reproduced = true;
    for (const Hypothesis& h : hypotheses(c)) {
        if (h.id != id) continue;
        HypothesisMatch m;
        reproduced = judge_under(c, dtype, observed, h.variant, failed, m, &faithful);
        if (reproduced) break;
    }
    return reproduced;
}

}  // namespace

bool conforms_under(const Case& c, DType dtype, const NamedD& observed, const Hypothesis& h) {
    const std::optional<Truth> t = truth_for(c, dtype, observed, h.variant, variant_truth(c, dtype, h.variant));
    return t && conforms(c, dtype, observed, *t);
}

bool explains(const Case& c, DType dtype, const NamedD& observed, const Hypothesis& h) {
    HypothesisMatch m;
    return judge_under(c, dtype, observed, h.variant, CaseResult{}, m, &faithful_ref(c, dtype));
}

Diagnosis diagnose(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed, const Truth* truth) {
    Diagnosis d;
    prime(c, dtype, truth);
    const NamedD& faithful = faithful_ref(c, dtype);
    if (auto traced = poison_trace(c, observed)) {
        // The row it read is a fact, and always said. The mechanism that row
        // suggests (a last page read past its length) is named only where its
        // own reference reproduces the output: a kernel that reads one slot
        // too many reads the same row.
        ++d.tried;
        if (reproduces(c, dtype, observed, failed, traced->id, faithful)) {
            d.matches.push_back(*traced);
        } else {
            const std::string& why = traced->why;
            d.findings.push_back(fmt::format("{} ({}); not {}: its reference does not reproduce the output",
                                             why.substr(0, why.find(". ")), traced->note, traced->id));
        }
    }
    // (Other mechanisms that read the same row are tried too: a case where
    // they coincide names them all, for a later case to tell apart.)
    for (const Hypothesis& h : hypotheses(c)) {
        if (!d.matches.empty() && h.id == d.matches.front().id) continue;
        ++d.tried;
        HypothesisMatch m;
        m.id = h.id;
        m.why = h.why;
        if (judge_under(c, dtype, observed, h.variant, failed, m, &faithful)) d.matches.push_back(m);
    }
    // A fitted theta (a free parameter: it absorbs other angle errors too) is
    // tried only where RoPE's own output is seen to diverge: the rope op, or
    // a block whose q_rot or k_rot fails — never on decode's out alone, where
    // a wrong q·k product would "fit" some theta.
    bool rope = c.op == Op::rope;
    if (const TensorResult* q = tensor_of(failed, "q_rot")) {
        const TensorResult* k = tensor_of(failed, "k_rot");
        rope = !(q->v.pass && k && k->v.pass);
    }
    if (d.matches.empty() && rope) {
        ++d.tried;
        if (auto m = fit_theta(c, dtype, observed, failed)) d.matches.push_back(*m);
    }
    // Below the claimed dtype (precision_downgrade says when it is tried).
    if (d.matches.empty()) precision_downgrade(c, dtype, observed, failed, d);
    return d;
}

Diagnosis recheck(const Case& c, DType dtype, const NamedD& observed, const CaseResult& failed,
                  const std::vector<HypothesisMatch>& earlier, const Truth* truth) {
    Diagnosis d;
    if (earlier.empty()) return d;
    prime(c, dtype, truth);
    const NamedD& faithful = faithful_ref(c, dtype);
    auto named = [&](const std::string& id) {
        return std::any_of(earlier.begin(), earlier.end(), [&](const HypothesisMatch& m) { return m.id == id; });
    };
    if (auto traced = poison_trace(c, observed); traced && named(traced->id)) {
        // The earlier bug, where the row this one read suggests it and its
        // reference reproduces the output here too (as diagnose() asks);
        // else the other earlier bugs are tried (another mechanism reads
        // the same row: a sequence one key too long).
        ++d.tried;
        if (reproduces(c, dtype, observed, failed, traced->id, faithful)) {
            d.matches.push_back(*traced);
            return d;
        }
    }
    auto try_variant = [&](const std::string& id, const std::string& why, const ref::Variant& v) {
        ++d.tried;
        HypothesisMatch m;
        m.id = id;
        m.why = why;
        if (judge_under(c, dtype, observed, v, failed, m, &faithful)) d.matches.push_back(m);
    };
    // This case's own hypotheses of those ids (a theta "ten times the
    // config's" is another value on another config)...
    for (const Hypothesis& h : hypotheses(c))
        if (named(h.id)) try_variant(h.id, h.why, h.variant);
    // ...else the very conventions that matched (a fitted theta is not in
    // the catalogue; a fixed wrong base is the same base on every case).
    // (Not a config edit: it is the earlier case's config, its sizes too,
    // and this case's own edits of that id were tried above.)
    if (d.matches.empty())
        for (const HypothesisMatch& e : earlier)
            if (e.id != "precision_downgrade" && !e.variant.faithful() && !e.variant.config)
                try_variant(e.id, e.why, e.variant);
    if (d.matches.empty() && named("precision_downgrade")) precision_downgrade(c, dtype, observed, failed, d);
    return d;
}

void explain(CaseResult& r, const Evidence& failing, Implementation* impl, const std::string& subject) {
    if (!r.pass && !r.error.empty() && failing.c) {
        if (auto m = name_contract_error(*failing.c, r.error)) {
            r.hypotheses = {*m};
            r.hypotheses_tried = 1;
            r.diagnosis.push_back(match_line(*m));
        }
        return;
    }
    if (r.pass || !r.error.empty() || !failing.c || !failing.observed || !failing.truth) return;
    if (failing.truth->source != "reference f64") {
        // Judged against a fixture's expected values: when the output agrees
        // with our reference, the file is what is wrong, and the `reference`
        // row's diagnosis says how it was produced.
        const Case& c = *failing.c;
        if (judge_case(c, r.dtype, *failing.observed, reference_truth(c, r.dtype)).pass) {
            r.diagnosis.push_back(fmt::format("{} conforms to the reference under the config: it is the fixture's "
                                              "expected values that disagree with the reference (see the "
                                              "`reference` row for how they were produced)",
                                              subject));
            return;
        }
    }
    annotate(r, diagnose(*failing.c, r.dtype, *failing.observed, r, failing.truth), failing, impl, subject);
}

bool explain_as_earlier(CaseResult& r, const Evidence& failing, const std::vector<const CaseResult*>& earlier) {
    if (r.pass || !r.error.empty() || !failing.c || !failing.observed) return false;
    for (const CaseResult* e : earlier) {
        if (e->hypotheses.empty()) continue;
        const Diagnosis d = recheck(*failing.c, r.dtype, *failing.observed, r, e->hypotheses, failing.truth);
        if (d.matches.empty()) continue;
        const auto ids = d.ids();
        r.same_as = e->case_id;
        r.hypotheses = d.matches;
        r.hypotheses_tried = d.tried;
        r.diagnosis.push_back(fmt::format("same bug as case {}: {} explain{} this case too (checked here, not shrunk "
                                          "or diagnosed again; --diagnose all does)",
                                          e->case_id, join(ids), ids.size() == 1 ? "s" : ""));
        for (const auto& m : d.matches) r.diagnosis.push_back(match_line(m));
        return true;
    }
    for (const CaseResult* e : earlier) {
        if (!e->hypotheses.empty() || !e->error.empty() || e->first_failing != r.first_failing) continue;
        r.same_as = e->case_id;
        r.diagnosis.push_back(fmt::format("like case {}: it fails first at {} too, where no single-convention change "
                                          "explained that case; not diagnosed again (--diagnose all does)",
                                          e->case_id, r.first_failing.empty() ? "out" : r.first_failing));
        return true;
    }
    return false;
}

void annotate(CaseResult& r, const Diagnosis& d, const Evidence& failing, Implementation* impl,
              const std::string& subject, const std::vector<std::string>& notes) {
    const Case& c = *failing.c;
    r.hypotheses = d.matches;
    r.hypotheses_tried = d.tried;
    r.localisation = localise(c, r.dtype, *failing.observed, *failing.truth, r, impl);

    // ---- report lines ----
    auto& lines = r.diagnosis;
    lines.insert(lines.end(), notes.begin(), notes.end());
    const auto ids = d.ids();
    // Several names that no case tried tells apart are not a diagnosis: they
    // are said as one alternative, before the evidence for each.
    if (ids.size() > 1) {
        std::string alternatives;
        for (size_t i = 0; i < ids.size(); ++i)
            alternatives += (i == 0 ? "" : i + 1 == ids.size() ? " or " : ", ") + ids[i];
        // The same convention change under each name (renorm_missing and
        // topk_softmax_over_all on a softmax router): no case can tell them apart.
        bool same = !d.matches.empty();
        for (const auto& m : d.matches) same = same && m.change == d.matches.front().change;
        if (same)
            lines.push_back(fmt::format("one function under {} names: {} ({}: no case tells them apart)", ids.size(),
                                        alternatives, d.matches.front().change));
        else
            lines.push_back(fmt::format("equivalent on every case tried: {} (a case that tells them apart needs more "
                                        "tokens, positions or heads)",
                                        alternatives));
    }
    for (const auto& f : d.findings) lines.push_back("found: " + f);
    for (const auto& m : d.matches) lines.push_back(match_line(m));
    if (d.matches.empty())
        lines.push_back(fmt::format("no single-convention change explains this failure of {} ({} hypotheses tried)",
                                    subject, d.tried));
    const Localisation& l = r.localisation;
    if (!l.first_divergence.empty()) {
        std::string s = "first divergence at " + l.first_divergence;
        if (!l.conforming.empty()) s += "; " + join(l.conforming) + (l.conforming.size() == 1 ? " conforms" : " conform");
        if (!l.walked.empty()) s += (l.conforming.empty() ? ": " : " (") + l.walked + (l.conforming.empty() ? "" : ")");
        lines.push_back(s);
    }
    if (!l.tensor.empty()) {
        std::string s = "in " + l.tensor + ": worst at " + l.worst;
        for (const auto& p : l.patterns) s += "; " + p;
        lines.push_back(s);
    }
}

}  // namespace conform::diagnose

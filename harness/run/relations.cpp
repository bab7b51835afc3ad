#include "run/relations.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <numeric>

#include "core/phases.h"
#include "core/rng.h"
#include "compare/tolerance.h"
#include "gen/gen.h"

namespace conform::run {

namespace {

struct Batch {
    const std::vector<int64_t>& qo;
    const std::vector<int64_t>& kvp;
    const std::vector<int64_t>& ids;
    const std::vector<int64_t>& last;
    explicit Batch(const Case& c)
        : qo(c.pos("qo_indptr")), kvp(c.pos("kv_indptr")), ids(c.pos("kv_indices")), last(c.pos("kv_last_page_len")) {}
    int64_t size() const { return static_cast<int64_t>(last.size()); }
    int64_t q_len(int64_t b) const { return qo[b + 1] - qo[b]; }
    int64_t kv_len(int64_t b, int64_t P) const {
        const int64_t n = kvp[b + 1] - kvp[b];
        return n == 0 ? 0 : (n - 1) * P + last[b];
    }
};

// A case with the same cache and the given sequences of c, in that order.
Derived with_sequences(const Case& c, const std::vector<int64_t>& order) {
    const Batch in(c);
    Derived d{c, {}};
    auto& qo = d.c.positions["qo_indptr"];
    auto& kvp = d.c.positions["kv_indptr"];
    auto& ids = d.c.positions["kv_indices"];
    auto& last = d.c.positions["kv_last_page_len"];
    qo = {0};
    kvp = {0};
    ids.clear();
    last.clear();
    const Tensor& q = c.in("q");
    Tensor nq(0, q.cols());
    nq.shape = {0, q.cols()};
    for (int64_t b : order) {
        for (int64_t r = in.qo[b]; r < in.qo[b + 1]; ++r) {
            d.rows.push_back(r);
            nq.data.insert(nq.data.end(), q.data.begin() + r * q.cols(), q.data.begin() + (r + 1) * q.cols());
        }
        qo.push_back(qo.back() + in.q_len(b));
        ids.insert(ids.end(), in.ids.begin() + in.kvp[b], in.ids.begin() + in.kvp[b + 1]);
        kvp.push_back(static_cast<int64_t>(ids.size()));
        last.push_back(in.last[b]);
    }
    nq.shape[0] = static_cast<int64_t>(d.rows.size());
    d.c.inputs["q"] = std::move(nq);
    return d;
}

uint32_t bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

// Ulps between two floats of one sign (the distance on the ordered integer line).
int64_t ulps(float a, float b) {
    auto ordered = [](float f) {
        const int32_t i = static_cast<int32_t>(bits(f));
        return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
    };
    return std::llabs(ordered(a) - ordered(b));
}

struct Relation {
    const char* id;
    std::string what;  // the derived run, in words
    Derived d;
};

}  // namespace

Derived sequence_alone(const Case& c, int64_t b) { return with_sequences(c, {b}); }

std::pair<Derived, Derived> sequence_chunked(const Case& c, int64_t b, int64_t first) {
    const Batch in(c);
    const int64_t P = c.config.page_size, q_len = in.q_len(b);
    const int64_t n = in.kvp[b + 1] - in.kvp[b], kv = n == 0 ? 0 : (n - 1) * P + in.last[b];
    // Before: the sequence as it was when its first `first` new tokens were
    // its last ones: q_len - first keys fewer, on as many of its pages as they need.
    Derived before = with_sequences(c, {b});
    const int64_t kv_before = kv - (q_len - first), pages_before = (kv_before + P - 1) / P;
    auto& ids = before.c.positions["kv_indices"];
    ids.resize(static_cast<size_t>(pages_before));
    before.c.positions["kv_indptr"] = {0, pages_before};
    before.c.positions["kv_last_page_len"] = {pages_before == 0 ? 0 : kv_before - (pages_before - 1) * P};
    before.c.positions["qo_indptr"] = {0, first};
    Tensor& q = before.c.inputs["q"];
    q.data.resize(static_cast<size_t>(first * q.cols()));
    q.shape[0] = first;
    before.rows.resize(static_cast<size_t>(first));
    // After: the rest of its queries over all its keys.
    Derived after = with_sequences(c, {b});
    after.c.positions["qo_indptr"] = {0, q_len - first};
    Tensor& qa = after.c.inputs["q"];
    qa.data.erase(qa.data.begin(), qa.data.begin() + first * qa.cols());
    qa.shape[0] = q_len - first;
    after.rows.erase(after.rows.begin(), after.rows.begin() + first);
    return {std::move(before), std::move(after)};
}

Derived poison_finite(const Case& c) {
    Derived d{c, {}};
    d.rows.resize(static_cast<size_t>(c.in("q").rows()));
    std::iota(d.rows.begin(), d.rows.end(), int64_t{0});
    for (const char* name : {"k_cache", "v_cache"}) {
        Tensor& t = d.c.inputs[name];
        for (size_t i = 0; i < t.data.size(); ++i)
            if (auto row = gen::poison_row(t.data[i])) t.data[i] = (*row % 2 ? -1e30f : 1e30f);
    }
    return d;
}

Derived batch_reversed(const Case& c) {
    std::vector<int64_t> order(static_cast<size_t>(Batch(c).size()));
    std::iota(order.rbegin(), order.rend(), int64_t{0});
    return with_sequences(c, order);
}

Derived pages_relocated(const Case& c, uint64_t seed) {
    const int64_t P = c.config.page_size, W = c.in("k_cache").cols(), pages = c.in("k_cache").rows() / P;
    std::vector<int64_t> to(static_cast<size_t>(pages));
    std::iota(to.begin(), to.end(), int64_t{0});
    Rng r{seed * 0x9E3779B97F4A7C15ull + 77};
    for (int64_t i = pages - 1; i > 0; --i) std::swap(to[static_cast<size_t>(i)], to[static_cast<size_t>(r.below(i + 1))]);
    Derived d{c, {}};
    d.rows.resize(static_cast<size_t>(c.in("q").rows()));
    std::iota(d.rows.begin(), d.rows.end(), int64_t{0});
    for (const char* name : {"k_cache", "v_cache"}) {
        const Tensor& from = c.in(name);
        Tensor& dst = d.c.inputs[name];
        for (int64_t p = 0; p < pages; ++p)
            for (int64_t o = 0; o < P; ++o) {
                const int64_t src = p * P + o, row = to[static_cast<size_t>(p)] * P + o;
                for (int64_t j = 0; j < W; ++j) {
                    const float v = from.data[static_cast<size_t>(src * W + j)];
                    // Poison names the row it sits in, there too.
                    dst.data[static_cast<size_t>(row * W + j)] = gen::poison_row(v) ? gen::poison(row) : v;
                }
            }
    }
    for (int64_t& id : d.c.positions["kv_indices"]) id = to[static_cast<size_t>(id)];
    return d;
}

std::vector<CaseResult> check_relations(Implementation& impl, const std::string& name, const Case& c, DType dtype,
                                        const NamedD& outputs, const Truth& truth) {
    std::vector<CaseResult> out;
    if (!op_info(c.op).uses(kPaged)) return out;
    phases::Scope scope("relations " + name);
    const Batch batch(c);
    std::vector<Relation> rel;
    // At most three sequences alone (the first, the middle and the last with queries): each costs a run.
    std::vector<int64_t> with_queries;
    for (int64_t b = 0; b < batch.size(); ++b)
        if (batch.q_len(b) > 0) with_queries.push_back(b);
    if (batch.size() > 1)
        for (size_t k : {size_t{0}, with_queries.size() / 2, with_queries.size() - 1}) {
            if (with_queries.empty()) break;
            const int64_t b = with_queries[std::min(k, with_queries.size() - 1)];
            bool seen = false;
            for (const auto& r : rel) seen = seen || r.what == fmt::format("sequence {} alone", b);
            if (!seen) rel.push_back({"batch_alone", fmt::format("sequence {} alone", b), sequence_alone(c, b)});
        }
    rel.push_back({"pages_relocated", "its pages moved elsewhere in the pool", pages_relocated(c, c.seed)});
    if (batch.size() > 1) rel.push_back({"batch_permuted", "the batch in reverse order", batch_reversed(c)});
    // The last sequence with two queries or more, in two calls: all but its
    // last query (a chunked prefill's first chunk), then its last query over
    // the whole cache (the next chunk, or a decode step).
    for (int64_t b = batch.size() - 1; b >= 0; --b) {
        if (batch.q_len(b) < 2 || batch.kv_len(b, c.config.page_size) < batch.q_len(b)) continue;
        auto [before, after] = sequence_chunked(c, b, batch.q_len(b) - 1);
        rel.push_back({"chunked", fmt::format("sequence {}'s queries but the last, over its keys but the last", b),
                       std::move(before)});
        rel.push_back({"chunked", fmt::format("sequence {}'s last query alone, over all its keys", b), std::move(after)});
        break;
    }
    rel.push_back({"poison_finite", "the rows no sequence owns holding +-1e30 instead of NaN", poison_finite(c)});
    rel.push_back({"repeat", "run again", Derived{c, {}}});
    rel.back().d.rows.resize(static_cast<size_t>(c.in("q").rows()));
    std::iota(rel.back().d.rows.begin(), rel.back().d.rows.end(), int64_t{0});

    const bool bitwise = impl.batch_invariant(c.op);
    const double k = op_info(c.op).tolerance.k;
    // One result per relation id: its derived runs together.
    std::map<std::string, CaseResult> by_id;
    std::vector<std::string> order;
    for (Relation& r : rel) {
        CaseResult& res = by_id[r.id];
        if (res.case_id.empty()) {
            order.push_back(r.id);
            res.impl = name + " relations";
            res.op = c.op;
            res.dtype = dtype;
            res.case_id = c.id;
            res.origin = "relation";
            res.pass = true;
            res.shapes = input_shapes(c);
            res.diagnosis.push_back(fmt::format("relation {}: {}", r.id,
                                                bitwise ? "bitwise (the implementation declares batch invariance)"
                                                        : "within twice the case's tolerance"));
        }
        if (!res.pass) continue;  // its first break is reported
        const ImplOutputs o = run_impl(impl, r.d.c);
        res.seconds += o.seconds;
        if (!o.error.empty()) {
            res.pass = false;
            res.error = r.what + ": " + o.error;
            continue;
        }
        for (const auto& [tname, t] : outputs) {
            const DTensor& got = o.outputs.at(tname);
            const DTensor& ref = truth.ref.at(tname);
            const DTensor* noise = truth.noise.count(tname) ? &truth.noise.at(tname) : nullptr;
            const int64_t cols = t.cols();
            Verdict v;
            v.pass = true;
            v.decided_by = "relation";
            v.k = k;
            v.margin = std::numeric_limits<double>::infinity();
            double worst = -1;
            for (size_t dr = 0; dr < r.d.rows.size(); ++dr) {
                const int64_t orow = r.d.rows[dr];
                for (int64_t j = 0; j < cols; ++j) {
                    const size_t ia = static_cast<size_t>(orow * cols + j), ib = dr * static_cast<size_t>(cols) + j;
                    const float a = static_cast<float>(t.data[ia]), b = static_cast<float>(got.data[ib]);
                    double allowed = 0;
                    if (!bitwise) {
                        const double bl = std::abs(truth.base_library.at(tname).data[ia] - ref.data[ia]);
                        const double bs = std::abs(truth.base_sequential.at(tname).data[ia] - ref.data[ia]);
                        allowed = 2 * (k * std::max(bl, bs) + std::max(rounding_floor(ref.data[ia], dtype),
                                                                         noise ? noise->data[ia] : 0.0));
                    }
                    const bool same = bits(a) == bits(b) || (!bitwise && std::abs(double(a) - double(b)) <= allowed);
                    const double diff = std::isnan(a) != std::isnan(b) ? INFINITY : std::abs(double(a) - double(b));
                    if (same && !(diff > worst)) continue;
                    if (same) {
                        worst = diff;
                        v.err = diff;
                        v.allowed = allowed;
                        continue;
                    }
                    v.pass = false;
                    v.err = diff;
                    v.allowed = allowed;
                    v.margin = diff > 0 ? allowed / diff : 0;
                    v.at = locate(static_cast<int64_t>(ia), cols, head_dim_of(c, tname));
                    v.why = fmt::format("{} broken: {} at {} is {} in the batch, {} with {} ({} ulps apart{})", r.id,
                                        tname, v.at.str(), a, b, r.what, ulps(a, b),
                                        bitwise ? "; the implementation declares batch invariance, so bit for bit"
                                                : fmt::format(", allowed {:.3g}", allowed));
                    dr = r.d.rows.size();
                    break;
                }
            }
            if (v.pass && v.err > 0) v.margin = v.allowed / v.err;
            TensorResult tr{tname, v};
            auto existing = std::find_if(res.tensors.begin(), res.tensors.end(),
                                         [&](const TensorResult& x) { return x.name == tname; });
            if (existing == res.tensors.end()) res.tensors.push_back(tr);
            else if (!v.pass || v.err > existing->v.err) *existing = tr;
            if (!v.pass) {
                res.pass = false;
                if (res.first_failing.empty()) res.first_failing = tname;
                res.diagnosis.push_back(v.why);
            }
        }
    }
    for (const auto& id : order) out.push_back(std::move(by_id[id]));
    return out;
}

}  // namespace conform::run

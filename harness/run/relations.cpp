#include "run/relations.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <map>
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

// The case itself, each row its own.
Derived all_rows(const Case& c) {
    Derived d{c, {}};
    d.rows.resize(static_cast<size_t>(c.in("q").rows()));
    std::iota(d.rows.begin(), d.rows.end(), int64_t{0});
    return d;
}

// A permutation of the pool's pages from the seed: page p moves to to[p].
std::vector<int64_t> page_moves(int64_t pages, uint64_t seed) {
    std::vector<int64_t> to(static_cast<size_t>(pages));
    std::iota(to.begin(), to.end(), int64_t{0});
    Rng r{seed * 0x9E3779B97F4A7C15ull + 77};
    for (int64_t i = pages - 1; i > 0; --i) std::swap(to[static_cast<size_t>(i)], to[static_cast<size_t>(r.below(i + 1))]);
    return to;
}

// c with each sequence's pages where `to` moves them (the caches, if c has
// them, are not moved: move_pages).
Derived with_pages_moved(const Case& c, const std::vector<int64_t>& to) {
    Derived d = all_rows(c);
    for (int64_t& id : d.c.positions["kv_indices"]) id = to[static_cast<size_t>(id)];
    return d;
}

// Poison bits a change re-tagged that were not poison_bits(row) of the row
// they sat in (a drawn pool has none), by their index before the change:
// put back as they were once the change is undone.
using Foreign = std::vector<std::pair<size_t, uint32_t>>;

// In place: page p's rows to page to[p], following each cycle of the
// permutation with one page in hand. Poison names the row it sits in, there
// too: each poison element moved is re-tagged with its new row.
void move_pages(Tensor& t, const std::vector<int64_t>& to, int64_t P, Foreign* foreign) {
    const int64_t W = t.cols(), span = P * W, n = static_cast<int64_t>(to.size());
    std::vector<float> carry(static_cast<size_t>(span)), next(static_cast<size_t>(span));
    std::vector<char> done(static_cast<size_t>(n), 0);
    auto page = [&](int64_t p) { return t.data.data() + p * span; };
    for (int64_t start = 0; start < n; ++start) {
        if (done[static_cast<size_t>(start)]) continue;
        std::copy_n(page(start), span, carry.data());
        int64_t from = start;
        do {
            const int64_t dst = to[static_cast<size_t>(from)];
            std::copy_n(page(dst), span, next.data());
            float* out = page(dst);
            for (int64_t o = 0; o < P; ++o)
                for (int64_t j = 0; j < W; ++j) {
                    const int64_t i = o * W + j;
                    uint32_t b;
                    std::memcpy(&b, &carry[static_cast<size_t>(i)], 4);
                    if (gen::is_poison_bits(b)) {
                        if (foreign && b != gen::poison_bits(from * P + o))
                            foreign->push_back({static_cast<size_t>(from * span + i), b});
                        b = gen::poison_bits(dst * P + o);
                    }
                    std::memcpy(out + i, &b, 4);
                }
            std::swap(carry, next);
            done[static_cast<size_t>(dst)] = 1;
            from = dst;
        } while (from != start);
    }
}

// What poison_to_finite changed, for its undo: the rows that were poison
// whole (every row no sequence owns, in a drawn pool), and any other
// element that was.
struct Finite {
    std::vector<int64_t> rows;
    std::vector<size_t> elements;
};

// In place: every poison element as ±1e30 (by the row it names).
void poison_to_finite(Tensor& t, Finite* changed, Foreign* foreign) {
    const int64_t W = t.cols();
    for (int64_t r = 0; r < t.rows(); ++r) {
        float* row = t.data.data() + r * W;
        int64_t n = 0;
        for (int64_t j = 0; j < W; ++j) {
            uint32_t b;
            std::memcpy(&b, &row[j], 4);
            if (!gen::is_poison_bits(b)) continue;
            ++n;
            if (foreign && b != gen::poison_bits(r)) foreign->push_back({static_cast<size_t>(r * W + j), b});
            if (changed) changed->elements.push_back(static_cast<size_t>(r * W + j));
            row[j] = (b & gen::kPoisonRowBits) % 2 ? -1e30f : 1e30f;
        }
        if (changed && n == W) {  // the row whole: one entry, not W
            changed->elements.resize(changed->elements.size() - static_cast<size_t>(W));
            changed->rows.push_back(r);
        }
    }
}

// The pool set aside while a case's relations run: a derived case copies
// c's queries and index arrays, never its caches (a serving batch's are
// GBs, and fresh pages cost more than the kernel's call). Each call borrows
// them (Lent); the two relations that change them (pages_relocated,
// poison_finite) change them in place for their call and undo it (Changed).
// c is as it was once this is gone.
struct Aside {
    Case& c;
    std::map<std::string, Tensor> pools;  // the op's cache tensors (OpInfo::pools), by name
    explicit Aside(Case& cc) : c(cc) {
        for (const char* name : op_info(c.op).pools()) {
            pools[name] = std::move(c.inputs.at(name));
            c.inputs.erase(name);
        }
    }
    ~Aside() {
        for (auto& [name, t] : pools) c.inputs[name] = std::move(t);
    }
    Aside(const Aside&) = delete;
    Aside& operator=(const Aside&) = delete;
};
struct Lent {
    Aside& a;
    Case& to;
    Lent(Aside& aa, Case& t) : a(aa), to(t) {
        for (auto& [name, p] : a.pools) to.inputs[name] = std::move(p);
    }
    ~Lent() {
        for (auto& [name, p] : a.pools) {
            p = std::move(to.inputs.at(name));
            to.inputs.erase(name);
        }
    }
    Lent(const Lent&) = delete;
    Lent& operator=(const Lent&) = delete;
};

// What a relation does to the caches for its call: one of the two, never
// both (the undo puts foreign poison back by its index before the change).
struct PoolChange {
    std::vector<int64_t> moves;  // pages_relocated: page p to moves[p]
    bool finite = false;         // poison_finite
};
struct Changed {
    Aside& a;
    const PoolChange& ch;
    int64_t P;
    std::map<std::string, Foreign> foreign;  // per pool
    std::map<std::string, Finite> changed;
    Changed(Aside& aa, const PoolChange& c, int64_t page_size) : a(aa), ch(c), P(page_size) {
        for (auto& [name, t] : a.pools) {
            if (!ch.moves.empty()) move_pages(t, ch.moves, P, &foreign[name]);
            if (ch.finite) poison_to_finite(t, &changed[name], &foreign[name]);
        }
    }
    ~Changed() {
        for (auto& [name, t] : a.pools) {
            if (!ch.moves.empty()) {
                std::vector<int64_t> back(ch.moves.size());
                for (size_t p = 0; p < back.size(); ++p) back[static_cast<size_t>(ch.moves[p])] = static_cast<int64_t>(p);
                move_pages(t, back, P, nullptr);
            }
            const int64_t W = t.cols();
            for (int64_t r : changed[name].rows) std::fill_n(t.data.data() + r * W, W, gen::poison(r));
            for (size_t i : changed[name].elements) t.data[i] = gen::poison(static_cast<int64_t>(i) / W);
            for (const auto& [i, b] : foreign[name]) std::memcpy(&t.data[i], &b, 4);
        }
    }
    Changed(const Changed&) = delete;
    Changed& operator=(const Changed&) = delete;
};

struct Relation {
    const char* id;
    std::string what;  // the derived run, in words
    Derived d;         // without the caches (Aside)
    PoolChange change;
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
    Derived d = all_rows(c);
    for (const char* name : op_info(c.op).pools()) poison_to_finite(d.c.inputs[name], nullptr, nullptr);
    return d;
}

Derived batch_reversed(const Case& c) {
    std::vector<int64_t> order(static_cast<size_t>(Batch(c).size()));
    std::iota(order.rbegin(), order.rend(), int64_t{0});
    return with_sequences(c, order);
}

Derived pages_relocated(const Case& c, uint64_t seed) {
    const std::vector<const char*> pools = op_info(c.op).pools();
    const std::vector<int64_t> to = page_moves(c.in(pools.at(0)).rows() / c.config.page_size, seed);
    Derived d = with_pages_moved(c, to);
    for (const char* name : pools) move_pages(d.c.inputs[name], to, c.config.page_size, nullptr);
    return d;
}

std::vector<CaseResult> check_relations(Implementation& impl, const std::string& name, Case& c, DType dtype,
                                        const NamedD& outputs, const Truth& truth) {
    std::vector<CaseResult> out;
    if (!op_info(c.op).uses(kPaged)) return out;
    phases::Scope scope("relations " + name);
    const int64_t pool_pages = c.in(op_info(c.op).pools().at(0)).rows() / c.config.page_size;
    const std::string shapes = input_shapes(c);
    Aside aside(c);
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
            if (!seen) rel.push_back({"batch_alone", fmt::format("sequence {} alone", b), sequence_alone(c, b), {}});
        }
    {
        PoolChange moved;
        moved.moves = page_moves(pool_pages, c.seed);
        Derived d = with_pages_moved(c, moved.moves);
        rel.push_back({"pages_relocated", "its pages moved elsewhere in the pool", std::move(d), std::move(moved)});
    }
    if (batch.size() > 1) rel.push_back({"batch_permuted", "the batch in reverse order", batch_reversed(c), {}});
    // The last sequence with two queries or more, in two calls: all but its
    // last query (a chunked prefill's first chunk), then its last query over
    // the whole cache (the next chunk, or a decode step).
    for (int64_t b = batch.size() - 1; b >= 0; --b) {
        if (batch.q_len(b) < 2 || batch.kv_len(b, c.config.page_size) < batch.q_len(b)) continue;
        auto [before, after] = sequence_chunked(c, b, batch.q_len(b) - 1);
        rel.push_back({"chunked", fmt::format("sequence {}'s queries but the last, over its keys but the last", b),
                       std::move(before), {}});
        rel.push_back({"chunked", fmt::format("sequence {}'s last query alone, over all its keys", b), std::move(after), {}});
        break;
    }
    {
        PoolChange finite;
        finite.finite = true;
        rel.push_back({"poison_finite", "the rows no sequence owns holding +-1e30 instead of NaN", all_rows(c), finite});
    }
    rel.push_back({"repeat", "run again", all_rows(c), {}});

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
            res.shapes = shapes;
            res.diagnosis.push_back(fmt::format("relation {}: {}", r.id,
                                                bitwise ? "bitwise (the implementation declares batch invariance)"
                                                        : "within twice the case's tolerance"));
        }
        if (!res.pass) continue;  // its first break is reported
        ImplOutputs o;
        {
            Changed changed(aside, r.change, c.config.page_size);
            Lent lent(aside, r.d.c);
            o = run_impl(impl, r.d.c);
        }
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

// paged_attention's relations: each is checked by run/relations.cpp on the
// implementation alone, and each catches a kernel that breaks it while every
// one of its outputs is within tolerance of the truth (so judging alone
// passes it). The kernels below are scalar with a last-bit difference that
// depends on what must not matter: the batch's size, where the pages are,
// a sequence's place in the batch, or the call count.
#include <catch2/catch.hpp>

#include <cstring>

#include "gen/gen.h"
#include "helpers.h"
#include "run/relations.h"
#include "scalar/scalar.h"

using namespace conform;

namespace {

// Scalar's paged attention, one sequence at a time, whose lse is rounded a
// little differently when `rule` says so: the same function, a last bit apart.
template <class Rule>
struct Reordered : scalar::ScalarImpl {
    Rule rule;
    int calls = 0;
    explicit Reordered(Rule r) : ScalarImpl("reordered"), rule(r) {}
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        ++calls;
        const int64_t B = idx.kv_last_page_len.n;
        // Run each sequence on its own, reversed or not, and scatter its rows.
        for (int64_t b = 0; b < B; ++b) {
            const int64_t q0 = idx.qo_indptr[b], n = idx.qo_indptr[b + 1] - q0;
            if (n == 0) continue;
            const int64_t zero_one[2] = {0, n};
            const int64_t pages = idx.kv_indptr[b + 1] - idx.kv_indptr[b];
            std::vector<int64_t> ids(idx.kv_indices.data + idx.kv_indptr[b], idx.kv_indices.data + idx.kv_indptr[b + 1]);
            const int64_t kvp[2] = {0, pages};
            const int64_t last = idx.kv_last_page_len[b];
            const PagedIndex one{{zero_one, 2}, {kvp, 2}, {ids.data(), pages}, {&last, 1}};
            scalar::PagedRules r;
            // lse one rounding further along: the same to the last bit or one ulp off.
            if (rule(b, B, pages ? ids[0] : 0, calls, n)) r.lse_scale = 1.0 + std::ldexp(1.0, -23);
            scalar::paged_attention({q.row(q0), n, q.cols}, k_cache, v_cache, one, p, {out.row(q0), n, out.cols},
                                    {lse.row(q0), n, lse.cols}, r);
        }
    }
};
// Scalar's result, then a "row max" over every sequence's last page whole,
// padding included, folded with std::max: NaN never wins a comparison, so
// only a finite value in the padding moves it, and then the output.
struct PaddedMax : scalar::ScalarImpl {
    PaddedMax() : ScalarImpl("padded_max") {}
    void paged_attention(View q, View k_cache, View v_cache, const PagedIndex& idx, const PagedAttentionParams& p,
                         MutView out, MutView lse) override {
        scalar::paged_attention(q, k_cache, v_cache, idx, p, out, lse);
        for (int64_t b = 0; b < idx.kv_last_page_len.n; ++b) {
            if (idx.kv_indptr[b + 1] == idx.kv_indptr[b]) continue;
            const int64_t page = idx.kv_indices[idx.kv_indptr[b + 1] - 1];
            float m = 0.0f;
            for (int64_t r = page * p.page_size; r < (page + 1) * p.page_size; ++r)
                for (int64_t j = 0; j < k_cache.cols; ++j) m = std::max(m, std::abs(k_cache.row(r)[j]));
            if (m > 1e20f)
                for (int64_t t = idx.qo_indptr[b]; t < idx.qo_indptr[b + 1]; ++t) lse.row(t)[0] += 1.0f;
        }
    }
};

// Every input and index array of a and b the same, bit for bit.
bool same_bits(const Case& a, const Case& b) {
    if (a.positions != b.positions || a.inputs.size() != b.inputs.size()) return false;
    for (const auto& [name, t] : a.inputs) {
        const auto it = b.inputs.find(name);
        if (it == b.inputs.end() || it->second.shape != t.shape ||
            std::memcmp(t.data.data(), it->second.data.data(), t.data.size() * sizeof(float)) != 0)
            return false;
    }
    return true;
}

template <class Rule>
std::unique_ptr<Implementation> reordered(Rule r) {
    return std::make_unique<Reordered<Rule>>(r);
}

std::map<std::string, bool> relations_of(Implementation& impl, const std::string& id) {
    std::string err;
    Case c = gen::materialize(*gen::parse_case_id(id, &err));
    const ImplOutputs out = run_impl(impl, c);
    REQUIRE(out.error.empty());
    const Truth t = reference_truth(c, DType::f32);
    const CaseResult r = judge_case(c, DType::f32, out.outputs, t);
    REQUIRE(r.pass);  // within tolerance: only a relation can catch it
    std::map<std::string, bool> held;
    const Case before = c;
    for (const CaseResult& rr : run::check_relations(impl, "x", c, DType::f32, out.outputs, t)) {
        INFO(test::explain(rr));
        held[rr.diagnosis.front().substr(9, rr.diagnosis.front().find(':') - 9)] = rr.pass;
    }
    REQUIRE(same_bits(c, before));  // the caches lent, changed in place and restored
    return held;
}

const char* kBatch = "paged_attention(H=4,KV=2,hd=8,P=5,kv=0/3/10/11,q=1/3/2/11,mag=1,outliers=0,seed=7)";

}  // namespace

TEST_CASE("scalar and simd keep every relation bit for bit", "[relations][paged]") {
    for (const char* name : {"scalar", "simd"}) {
        auto impl = test::make(name);
        REQUIRE(impl->batch_invariant(Op::paged_attention));
        const auto held = relations_of(*impl, kBatch);
        CHECK(held.size() == 6);
        for (const auto& [id, ok] : held) {
            INFO(name << " " << id);
            CHECK(ok);
        }
    }
}

TEST_CASE("each relation catches a kernel that breaks it alone", "[relations][paged]") {
    // Rounding that depends on the batch's size: only 'alone' sees it.
    auto by_size = reordered([](int64_t, int64_t B, int64_t, int, int64_t) { return B > 1; });
    auto held = relations_of(*by_size, kBatch);
    CHECK_FALSE(held.at("batch_alone"));
    CHECK(held.at("pages_relocated"));
    CHECK(held.at("batch_permuted"));
    CHECK(held.at("repeat"));
    // On where its pages are (its first page's id odd): only relocation.
    auto by_page = reordered([](int64_t, int64_t, int64_t first_page, int, int64_t) { return first_page % 2 == 1; });
    held = relations_of(*by_page, kBatch);
    CHECK_FALSE(held.at("pages_relocated"));
    CHECK(held.at("batch_alone"));
    CHECK(held.at("repeat"));
    // On its place in the batch counted from the end (alone it is last, as
    // sequence 3 is in the batch): only the permutation.
    auto by_place = reordered([](int64_t b, int64_t B, int64_t, int, int64_t) { return b == B - 2; });
    held = relations_of(*by_place, kBatch);
    CHECK_FALSE(held.at("batch_permuted"));
    CHECK(held.at("pages_relocated"));
    CHECK(held.at("repeat"));
    // On the call count: only the repeat.
    // On how many queries a sequence brings in one call (a decode step's
    // path differs from a prefill's): only the chunked call sees it.
    auto by_queries = reordered([](int64_t, int64_t, int64_t, int, int64_t q_len) { return q_len == 1; });
    held = relations_of(*by_queries, kBatch);
    CHECK_FALSE(held.at("chunked"));
    CHECK(held.at("batch_alone"));
    CHECK(held.at("pages_relocated"));
    CHECK(held.at("batch_permuted"));
    CHECK(held.at("poison_finite"));
    CHECK(held.at("repeat"));
    // A kernel whose row max runs over its last page whole, padding
    // included, with std::max (NaN drops out of it): NaN poison cannot show
    // it, huge finite values can.
    PaddedMax padded;
    held = relations_of(padded, kBatch);
    CHECK_FALSE(held.at("poison_finite"));
    CHECK(held.at("batch_alone"));
    CHECK(held.at("chunked"));
    CHECK(held.at("repeat"));
    // On the call count (every call after the first): the repeat, and with it every other re-run.
    auto by_call = reordered([](int64_t, int64_t, int64_t, int calls, int64_t) { return calls > 1; });
    held = relations_of(*by_call, kBatch);
    CHECK_FALSE(held.at("repeat"));
}

TEST_CASE("derived batches keep each row's sequence and poison their new rows", "[relations][paged]") {
    std::string err;
    const Case c = gen::materialize(*gen::parse_case_id(kBatch, &err));
    const run::Derived alone = run::sequence_alone(c, 2);
    validate_case(alone.c);
    CHECK(alone.rows == std::vector<int64_t>{4, 5});
    const run::Derived moved = run::pages_relocated(c, 3);
    validate_case(moved.c);
    const Tensor& k = moved.c.in("k_cache");
    for (size_t i = 0; i < k.data.size(); ++i)
        if (auto row = gen::poison_row(k.data[i])) REQUIRE(*row == static_cast<int64_t>(i) / k.cols());
    const run::Derived rev = run::batch_reversed(c);
    validate_case(rev.c);
    CHECK(rev.rows.front() == 6);  // sequence 3's first query row comes first
}

TEST_CASE("a case's relations leave it as it was, poison that names another row included", "[relations][paged]") {
    // A pool whose poison does not name the row it sits in (a case built by
    // hand, not drawn): relocation re-tags what it moves, and the undo must
    // still give back these bits, not the canonical ones.
    std::string err;
    Case c = gen::materialize(*gen::parse_case_id(kBatch, &err));
    Tensor& k = c.inputs.at("k_cache");
    size_t foreign = 0;
    for (size_t i = 0; i < k.data.size(); i += 7)
        if (gen::poison_row(k.data[i])) {
            k.data[i] = -gen::poison(static_cast<int64_t>(i) + 3);  // another row, and the sign set
            ++foreign;
        }
    REQUIRE(foreign > 10);
    auto impl = test::make("scalar");
    const ImplOutputs out = run_impl(*impl, c);
    REQUIRE(out.error.empty());
    const Truth t = reference_truth(c, DType::f32);
    const Case before = c;
    const auto results = run::check_relations(*impl, "scalar", c, DType::f32, out.outputs, t);
    CHECK(results.size() == 6);
    CHECK(same_bits(c, before));
}

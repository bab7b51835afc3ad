// Isolation (harness/plugin/isolate.h): a call in a child process comes back
// bitwise identical when the implementation behaves, and as a precise error
// when it crashes, exits, hangs, throws or writes outside its outputs.
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <unistd.h>

#include "gen/gen.h"
#include "plugin/isolate.h"
#include "registry.h"
#include "judge/judge.h"

using namespace conform;

namespace {

std::unique_ptr<Implementation> scalar() {
    ImplOptions o;
    return find_implementation("scalar")->create(o);
}

// The scalar implementation, except that rmsnorm also writes `offset`
// elements from the start of its output (0 = a correct rmsnorm).
class Stray final : public Implementation {
   public:
    explicit Stray(int64_t offset) : inner_(scalar()), offset_(offset) {}
    std::string name() const override { return "stray"; }
    DType dtype() const override { return DType::f32; }
    Support supports(Op op, const BlockConfig& c) const override { return inner_->supports(op, c); }
    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override {
        inner_->rmsnorm(x, w, p, out);
        if (offset_ != 0) out.data[offset_] = 1.0f;
    }
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override { inner_->rope(x, pos, p, out); }
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override { inner_->qk_norm(x, w, p, out); }
    void attention(View q, View k, View v, Positions qp, Positions kp, const AttentionParams& p, MutView out) override {
        inner_->attention(q, k, v, qp, kp, p, out);
    }
    void swiglu(View x, View w1, View w3, View w2, MutView out) override { inner_->swiglu(x, w1, w3, w2, out); }
    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        return inner_->block(x, w, pos, c, out);
    }
    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        inner_->decode(x, w, pos, prefill, c, out);
    }

   private:
    std::unique_ptr<Implementation> inner_;
    int64_t offset_;
};

Case small_rmsnorm() {
    gen::CaseSpec s;
    s.op = Op::rmsnorm;
    s.T = 2;
    s.d_model = 8;
    s.seed = 7;
    return gen::materialize(s);
}

}  // namespace

TEST_CASE("a child's result, exception, signal, exit and hang come back as such", "[plugin][isolate]") {
    using isolate::ChildResult;
    auto r = isolate::run_in_child([] { return std::string("fine"); }, 10);
    CHECK(r.kind == ChildResult::returned);
    CHECK(r.text == "fine");

    r = isolate::run_in_child([]() -> std::string { throw ImplError("rope: x must be [T, n*hd]"); }, 10);
    CHECK(r.kind == ChildResult::threw);
    CHECK(r.text == "rope: x must be [T, n*hd]");

    r = isolate::run_in_child([]() -> std::string { std::raise(SIGSEGV); return ""; }, 10);
    REQUIRE(r.kind == ChildResult::crashed);
    CHECK(r.code == SIGSEGV);
    CHECK(isolate::describe(r, "rope", 10).find("crashed with signal 11 (SIGSEGV) in rope") == 0);

    r = isolate::run_in_child([]() -> std::string { std::exit(3); }, 10);
    REQUIRE(r.kind == ChildResult::exited);
    CHECK(r.code == 3);

    const auto t0 = std::chrono::steady_clock::now();
    r = isolate::run_in_child([]() -> std::string { for (;;) pause(); }, 0.3);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(r.kind == ChildResult::timed_out);
    CHECK(waited < 5);
    CHECK(isolate::describe(r, "block", 0.3) == "timed out after 0.3 s in block and was killed");
}

TEST_CASE("isolated, an implementation's outputs and taps are bitwise its in-process ones", "[plugin][isolate]") {
    auto plain = scalar();
    auto iso = isolate::isolated(scalar());
    for (Op op : {Op::rmsnorm, Op::rope, Op::attention, Op::block, Op::decode})
        for (int i = 0; i < 3; ++i) {
            const Case c = gen::materialize(gen::draw(op, 20261129, i));
            const ImplOutputs a = run_impl(*plain, c), b = run_impl(*iso, c);
            INFO(c.id);
            REQUIRE(a.error.empty());
            REQUIRE(b.error.empty());
            REQUIRE(a.outputs.size() == b.outputs.size());
            for (const auto& [name, t] : a.outputs) {
                INFO(name);
                REQUIRE(b.outputs.count(name));
                CHECK(t.shape == b.outputs.at(name).shape);
                CHECK(t.data == b.outputs.at(name).data);
            }
        }
}

TEST_CASE("isolated, writes outside an output are reported, near by sentinel and far by a fault", "[plugin][isolate]") {
    const Case c = small_rmsnorm();
    const int64_t n = c.in("x").numel();

    CHECK(run_impl(*isolate::isolated(std::make_unique<Stray>(0)), c).error.empty());

    const ImplOutputs past = run_impl(*isolate::isolated(std::make_unique<Stray>(n + 3)), c);
    CHECK(past.error == "wrote past the end of output 'out' (sentinel 3 after its " + std::to_string(n) +
                            " elements was overwritten)");

    const ImplOutputs before = run_impl(*isolate::isolated(std::make_unique<Stray>(-2)), c);
    CHECK(before.error == "wrote before the start of output 'out' (element -2 was overwritten)");

    // Past the output's page, into the no-access page behind it.
    const int64_t page_floats = sysconf(_SC_PAGESIZE) / static_cast<int64_t>(sizeof(float));
    const ImplOutputs far = run_impl(*isolate::isolated(std::make_unique<Stray>(page_floats + 8)), c);
    CHECK(far.error.find("crashed with signal 11 (SIGSEGV) in rmsnorm") == 0);
}

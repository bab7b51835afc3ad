// Per op: the scalar implementation against the LibTorch reference on
// property-generated cases (RapidCheck shrinks any counterexample).
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include "gen/gen.h"
#include "helpers.h"

using namespace conform;

namespace {

void scalar_conforms(Op op) {
    auto impl = test::make("scalar");
    rc::prop(std::string("scalar ") + to_string(op) + " conforms", [&] {
        const gen::CaseSpec spec = *gen::spec_gen(op);
        const Case c = gen::materialize(spec);
        validate_case(c);
        const CaseResult r = test::check(*impl, c);
        RC_LOG() << test::explain(r);
        RC_ASSERT(r.error.empty());
        RC_ASSERT(r.pass);
    });
}

}  // namespace

TEST_CASE("scalar rmsnorm vs reference", "[rmsnorm][scalar]") { scalar_conforms(Op::rmsnorm); }
TEST_CASE("scalar rope vs reference", "[rope][scalar]") { scalar_conforms(Op::rope); }
TEST_CASE("scalar qk_norm vs reference", "[qk_norm][scalar]") { scalar_conforms(Op::qk_norm); }
TEST_CASE("scalar attention vs reference", "[attention][scalar]") { scalar_conforms(Op::attention); }
TEST_CASE("scalar swiglu vs reference", "[swiglu][scalar]") { scalar_conforms(Op::swiglu); }
TEST_CASE("scalar block vs reference", "[block][scalar]") { scalar_conforms(Op::block); }
TEST_CASE("scalar decode vs reference", "[decode][scalar]") { scalar_conforms(Op::decode); }

// Long reductions at real widths: the tolerance model must accept an honest
// one-accumulator loop (its error is ~9x OpenBLAS's at K = 5632).
TEST_CASE("scalar swiglu at tinyllama width conforms", "[swiglu][scalar][long]") {
    gen::CaseSpec s;
    s.op = Op::swiglu;
    s.T = 4;
    s.config.d_model = 2048;
    s.config.ffn_dim = 5632;
    s.seed = 7;
    auto impl = test::make("scalar");
    const CaseResult r = test::check(*impl, gen::materialize(s));
    INFO(test::explain(r));
    REQUIRE(r.pass);
}

TEST_CASE("scalar rmsnorm at width 8192 conforms", "[rmsnorm][scalar][long]") {
    gen::CaseSpec s;
    s.op = Op::rmsnorm;
    s.T = 8;
    s.config.d_model = 8192;
    s.outliers = 3;
    s.seed = 11;
    auto impl = test::make("scalar");
    const CaseResult r = test::check(*impl, gen::materialize(s));
    INFO(test::explain(r));
    REQUIRE(r.pass);
}

// Case selection: --params, sharding, the trap dimensions, the progress line.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "run/select.h"

using namespace conform;
using namespace conform::select;

// --params' matcher against std::regex's ECMAScript search, on patterns where
// std::regex is safe: every pattern, every text, the same answer.
TEST_CASE("the linear-time matcher agrees with std::regex", "[select]") {
    const std::vector<std::string> texts = {
        "rope(T=7,n=3,hd=16,layout=neox,theta=500000,pos=4090,mag=1,outliers=0,seed=12)",
        "attention(T=1,S=1,H=3,KV=1,hd=6,qpos=4016,kpos=4016,softcap=3,mag=1,outliers=0,seed=6082169)",
        "moe(T=2,D=8,E=4,K=2,scoring=sigmoid,n_group=2,topk_group=1,mag=1,seed=3)",
        "rope-x.h5:/neox rope(T=3,n=2,hd=8,layout=interleaved,theta=500000,pos=9000)",
        "", "a", "aaab", "ab_c-d.e", "x\ty"};
    const std::vector<std::string> patterns = {
        "layout=interleaved", "theta=500000\\b", "theta=5\\d+", "^rope\\(", "seed=12\\)$", "\\bpos=4\\d{3}\\b",
        "T=[0-9]+,S=1", "[^,]*=sigmoid", "(neox|interleaved),theta", "(?:mag=1,){1,2}out", "a*", "a+b", "^a?$",
        "x.y", "[a-c-]+d", "[\\w.]+e$", "\\d{2,}", "K=[2-4]", "E=4,K=2,(scoring=(softmax|sigmoid))?", "^$",
        "\\s", "\\S+", "\\D", "\\W", "o{2}", "o{1,}", "(a|ab)(c|bcd)", "hd=(6|16),", "\\Bope", ".*:/", "[.]h5",
        "^rope\\((?!.*positions=)", "(?=.*seed=12\\))T=7", "K=(?!2)", "(?!.*interleaved)theta=500000", "a(?=b)",
        "(?=(?!x)\\w)\\w+=neox", "^(?!$)"};
    for (const auto& p : patterns) {
        const std::regex re(p, std::regex::ECMAScript);
        const Pattern ours(p);
        for (const auto& t : texts) {
            INFO("pattern " << p << " on '" << t << "'");
            CHECK(ours.search(t) == std::regex_search(t, re));
        }
    }
}

// What std::regex cannot bound: exponential backtracking and a recursive
// compiler. Refusals name the reason; matching stays linear.
TEST_CASE("the matcher refuses what needs backtracking and bounds nesting", "[select]") {
    const std::string as(5000, 'a');
    CHECK_FALSE(Pattern("(a*)*b").search(as));   // std::regex: exponential in the a's
    CHECK(Pattern("(a|aa)*$").search(as));
    CHECK_FALSE(Pattern("(x+x+)+y").search(std::string(3000, 'x')));
    CHECK_THAT(regex_problem(std::string(30000, '(') + "a" + std::string(30000, ')')),
               Catch::Matchers::Contains("characters, more than 4096"));
    CHECK_THAT(regex_problem(std::string(100, '(') + "a" + std::string(100, ')')),
               Catch::Matchers::Contains("groups nested deeper than 64"));
    CHECK(regex_problem(std::string(60, '(') + "a" + std::string(60, ')')).empty());
    CHECK_THAT(regex_problem("(a)\\1"), Catch::Matchers::Contains("back-reference"));
    CHECK_THAT(regex_problem("(?<=a)b"), Catch::Matchers::Contains("lookbehind"));
    CHECK_THAT(regex_problem("(?=a)*"), Catch::Matchers::Contains("a quantifier after an assertion"));
    CHECK_THAT(regex_problem("(a{1000}){1000}"), Catch::Matchers::Contains("more than 20000 steps"));
    CHECK_THAT(regex_problem("[a-"), Catch::Matchers::Contains("unclosed '['"));
    CHECK_THAT(regex_problem("*a"), Catch::Matchers::Contains("nothing to repeat"));
    CHECK_THAT(regex_problem("a)"), Catch::Matchers::Contains("unmatched ')' at character 2"));
    CHECK_THAT(regex_problem("\\q"), Catch::Matchers::Contains("unknown escape"));
}

TEST_CASE("params filter matches property ids and fixture descriptions", "[select]") {
    const ParamFilter none;
    REQUIRE_FALSE(none.active());
    REQUIRE(none.matches("anything"));
    const ParamFilter inter("layout=interleaved");
    REQUIRE(inter.matches("rope(T=1,n=1,hd=4,layout=interleaved,theta=10000,pos=0,mag=1,outliers=0,seed=3)"));
    REQUIRE_FALSE(inter.matches("rope(T=1,n=1,hd=4,layout=neox,theta=10000,pos=0,mag=1,outliers=0,seed=3)"));
    REQUIRE_THROWS_AS(ParamFilter("theta=(5"), PatternError);
    REQUIRE_FALSE(regex_problem("theta=(5").empty());
    REQUIRE(regex_problem("theta=5\\d+").empty());

    // A fixture case is described with its op's id keys, from its config and inputs.
    Case c;
    c.op = Op::rope;
    c.id = "rope-x.h5:/neox";
    c.file = "dir/rope-x.h5";
    c.group = "neox";
    c.config.head_dim = 8;
    c.config.rope_layout = RopeLayout::interleaved;
    c.config.rope_theta = 500000;
    c.inputs["x"] = Tensor(3, 16);
    c.positions["positions"] = {9000, 9001, 9002};
    const std::string text = params_text(c);
    INFO(text);
    REQUIRE(text == "rope-x.h5:/neox rope(T=3,n=2,hd=8,layout=interleaved,theta=500000,pos=9000)");
    REQUIRE(ParamFilter("theta=500000").matches(text));
    REQUIRE(max_position(c) == 9002);
    c.config.rope_scaling.type = RopeScalingType::llama3;
    c.config.rope_scaling.factor = 8;
    c.config.rope_scaling.original_max_position = 8192;
    REQUIRE(ParamFilter("scaling=llama3").matches(params_text(c)));
}

TEST_CASE("shard specs: INDEX/TOTAL, env and flag agreeing, else refused", "[select]") {
    std::string err;
    auto s = parse_shard("1/3", &err);
    REQUIRE(s);
    REQUIRE(s->index == 1);
    REQUIRE(s->total == 3);
    for (const char* bad : {"3/3", "0/0", "-1/2", "a/2", "1", "1/", "/2", "1/2/3", " 1/2", "1.0/2"}) {
        INFO(bad);
        REQUIRE_FALSE(parse_shard(bad, &err));
        REQUIRE_FALSE(err.empty());
    }
    REQUIRE(resolve_shard("", nullptr, nullptr, &err)->total == 1);
    REQUIRE(resolve_shard("", "2", "4", &err)->index == 2);
    REQUIRE(resolve_shard("2/4", "2", "4", &err)->total == 4);
    REQUIRE_FALSE(resolve_shard("1/4", "2", "4", &err));
    REQUIRE(err.find("disagrees") != std::string::npos);
    REQUIRE_FALSE(resolve_shard("", "2", nullptr, &err));
    REQUIRE(err.find("together") != std::string::npos);
    REQUIRE_FALSE(resolve_shard("", "4", "4", &err));
    REQUIRE(err.find("TEST_SHARD_INDEX=4") != std::string::npos);
}

TEST_CASE("shards are disjoint and their union is the whole selection", "[select]") {
    for (Op op : {Op::rope, Op::block}) {
        const PropertySelection all = select_property({op, 7, {}}, 60, ParamFilter(), Shard{});
        REQUIRE(all.picks.size() == 60);
        for (int i = 0; i < 60; ++i)
            REQUIRE(all.picks[i].index == i);  // no filter: case i is draw i
        std::multiset<int> seen;
        for (int k = 0; k < 4; ++k) {
            const PropertySelection part = select_property({op, 7, {}}, 60, ParamFilter(), Shard{k, 4});
            REQUIRE(part.matched == 60);
            for (const auto& p : part.picks) {
                REQUIRE(shard_of(p.id, 4) == k);
                seen.insert(p.index);
            }
        }
        REQUIRE(seen.size() == 60);
        REQUIRE(std::set<int>(seen.begin(), seen.end()).size() == 60);
    }
}

TEST_CASE("params filter draws until N cases match, and says how many it drew", "[select]") {
    const PropertySelection s = select_property({Op::rope, 3, {}}, 25, ParamFilter("theta=500000,"), Shard{});
    REQUIRE(s.picks.size() == 25);
    REQUIRE(s.matched == 25);
    REQUIRE(s.drawn > 25);
    for (const auto& p : s.picks) {
        REQUIRE(p.spec.config.rope_theta == 500000.0);
        REQUIRE(p.id == gen::canonical_id(gen::draw(Op::rope, 3, p.index)));  // replayable by its draw index
    }
    const PropertySelection never = select_property({Op::rmsnorm, 3, {}}, 5, ParamFilter("layout="), Shard{});
    REQUIRE(never.matched == 0);
    REQUIRE(never.drawn == kMaxDraws);
}

TEST_CASE("trap classes of a case", "[select]") {
    gen::CaseSpec s;
    s.op = Op::block;
    s.T = 3;
    s.config.d_model = 32;
    s.config.ffn_dim = 40;
    s.config.head_dim = 6;
    s.config.n_heads = 4;
    s.config.n_kv_heads = 1;
    s.config.rope_layout = RopeLayout::interleaved;
    s.config.rope_theta = 2e6;
    s.config.qk_norm = true;
    s.pos = 32766;
    const auto cls = classes_of(gen::materialize(s));
    const auto& dims = dimensions();
    auto named = [&](const std::string& dim) {
        std::vector<std::string> out;
        for (size_t d = 0; d < dims.size(); ++d)
            if (dims[d].name == dim)
                for (int k : cls[d])
                    out.push_back(dims[d].classes[k]);
        return out;
    };
    REQUIRE(named("layout") == std::vector<std::string>{"interleaved"});
    REQUIRE(named("theta") == std::vector<std::string>{">=1e6"});
    REQUIRE(named("max position") == std::vector<std::string>{">=32768"});  // 32766 + 2
    REQUIRE(named("qk_norm") == std::vector<std::string>{"on"});
    REQUIRE(named("heads") == std::vector<std::string>{"MQA"});
    REQUIRE(named("widths") == std::vector<std::string>{"<8", "tail", "x16"});  // hd 6, F 40, D 32
    REQUIRE(named("rope scaling") == std::vector<std::string>{"none"});
    REQUIRE(named("rotary dims") == std::vector<std::string>{"whole head"});
    {
        gen::CaseSpec p = s;
        p.config.rotary_dim = 4;  // of head_dim 6
        const auto pc = classes_of(gen::materialize(p));
        for (size_t d = 0; d < dims.size(); ++d)
            if (dims[d].name == "rotary dims") REQUIRE(pc[d] == std::vector<int>{1});
    }

    s.op = Op::rmsnorm;
    s.config.d_model = 24;
    const auto r = classes_of(gen::materialize(s));
    for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].name == "norm (1 + w)") REQUIRE(r[d] == std::vector<int>{0});  // off
        else if (dims[d].name != "widths") REQUIRE(r[d].empty());  // n/a for rmsnorm
    }
}

TEST_CASE("progress line: done/total, failures, elapsed, ETA", "[select]") {
    REQUIRE(progress_text(0, 700, 0, 0.0) == "[  0/700]   0%  0 failed  0:00 elapsed  ETA -:--");
    REQUIRE(progress_text(350, 700, 2, 30.0) == "[350/700]  50%  2 failed  0:30 elapsed  ETA 0:30");
    REQUIRE(progress_text(100, 700, 0, 65.0) == "[100/700]  14%  0 failed  1:05 elapsed  ETA 6:30");
    REQUIRE(progress_text(1, 2, 1, 3700.0) == "[1/2]  50%  1 failed  1:01:40 elapsed  ETA 1:01:40");
    REQUIRE(progress_text(2, 2, 0, 5.0).find("ETA 0:00") != std::string::npos);

    std::ostringstream off;
    {
        Progress p(off, false, 10);
        p.update(5, 1);
        p.finish();
    }
    REQUIRE(off.str().empty());  // not a terminal: nothing at all
    std::ostringstream on;
    Progress p(on, true, 3);
    p.update(1, 0);
    p.update(2, 0);  // within 100 ms of the last: skipped
    p.update(3, 1);  // the last one always shows
    p.finish();
    const std::string out = on.str();
    REQUIRE(out.find("[1/3]") != std::string::npos);
    REQUIRE(out.find("[2/3]") == std::string::npos);
    REQUIRE(out.find("[3/3]") != std::string::npos);
    REQUIRE(out.size() >= 4);
    REQUIRE(out.substr(out.size() - 4) == "\r\033[K");  // cleared at the end
}

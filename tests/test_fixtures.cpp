// Fixture files: the schema round trip, atomic writes, refusals, golden data,
// presets, and the two acceptance checks that need the reference — a golden
// file computed with the other RoPE layout fails for `reference` and for
// `scalar`, and a shrunk failure saved by --save-failures replays.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "config/presets.h"
#include "gen/gen.h"
#include "h5/fixture.h"
#include "run/golden.h"
#include "helpers.h"
#include "reference/reference.h"

using namespace conform;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed afterwards.
struct TempDir {
    fs::path path;
    TempDir() {
        static int n = 0;
        path = fs::temp_directory_path() / ("conform-fixture-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

h5::FixtureCase golden(const gen::CaseSpec& spec, const std::string& group) {
    h5::FixtureCase fc;
    fc.c = gen::materialize(spec);
    fc.c.group = group;
    fc.c.expected = h5::golden_expected(fc.c);
    return fc;
}

// The fixture-case judgement of the gate: an implementation against the file,
// and our float64 reference against the file with the float32 bounds.
CaseResult judge_impl(Implementation& impl, const Case& c) {
    ImplOutputs out = run_impl(impl, c);
    REQUIRE(out.error.empty());
    return judge_case(c, DType::f32, out.outputs, fixture_truth(c, DType::f32));
}
CaseResult judge_reference(const Case& c) {
    const Truth t = fixture_truth(c, DType::f32);
    return judge_case(c, DType::f32, t.base_truth, t);
}

gen::CaseSpec rope_spec(RopeLayout layout) {
    gen::CaseSpec s;
    s.op = Op::rope;
    s.T = 4;
    s.config.n_heads = s.config.n_kv_heads = 2;
    s.config.head_dim = 16;
    s.config.rope_layout = layout;
    s.config.rope_theta = 500000;
    s.pos = 8190;
    s.seed = 3;
    return s;
}

gen::CaseSpec block_spec(Op op, RopeLayout layout) {
    gen::CaseSpec s;
    s.op = op;
    s.T = 5;
    s.config.d_model = 24;
    s.config.n_heads = 4;
    s.config.n_kv_heads = 2;
    s.config.head_dim = 8;
    s.config.ffn_dim = 40;
    s.config.rope_layout = layout;
    s.config.rope_theta = 1e6;
    s.config.qk_norm = true;
    s.config.norm_eps = 1e-6;
    s.pos = 9000;
    s.prefill = op == Op::decode ? 2 : 0;
    s.seed = 11;
    return s;
}

}  // namespace

TEST_CASE("a fixture round-trips every op bit for bit", "[fixtures][h5]") {
    TempDir dir;
    std::vector<h5::FixtureCase> cases;
    for (Op op : kAllOps)
        for (int i = 0; i < 2; ++i) {
            h5::FixtureCase fc = golden(gen::draw(op, 99, i), std::string(to_string(op)) + "_" + std::to_string(i));
            fc.c.description = "drawn case " + std::to_string(i);
            fc.attrs["seed"] = int64_t(99);
            cases.push_back(std::move(fc));
        }
    const std::string path = dir / "all.h5";
    h5::write_fixture(path, cases, false);

    for (bool guarded : {false, true}) {
        const std::vector<Case> back = guarded ? h5::read_fixture(path) : h5::read_fixture_in_process(path);
        REQUIRE(back.size() == cases.size());
        std::map<std::string, const Case*> by_group;
        for (const auto& c : back) by_group[c.group] = &c;
        for (const auto& fc : cases) {
            const Case& want = fc.c;
            INFO(want.group << " " << want.id);
            REQUIRE(by_group.count(want.group));
            const Case& got = *by_group[want.group];
            CHECK(got.op == want.op);
            CHECK(got.file == path);
            CHECK(got.id == "all.h5:/" + want.group);
            CHECK(got.where() == path + ":/" + want.group);
            CHECK(got.description == want.description);
            CHECK(got.prefill == want.prefill);
            for (const auto& name : float_inputs(want.op, want.config)) {
                CHECK(got.in(name).shape == want.in(name).shape);
                CHECK(test::same_bits(got.in(name).data, want.in(name).data));
            }
            for (const auto& name : position_inputs(want.op)) CHECK(got.pos(name) == want.pos(name));
            REQUIRE(got.expected.size() == want.expected.size());
            for (const auto& [name, t] : want.expected) {
                CHECK(got.expected.at(name).shape == t.shape);
                CHECK(got.expected.at(name).data == t.data);
            }
            // The fields the op requires come back; the sizes it implies are filled in.
            const BlockConfig &a = got.config, &b = want.config;
            for (const auto& f : required_config(want.op)) {
                INFO(f);
                if (f == "d_model") CHECK(a.d_model == b.d_model);
                if (f == "n_heads") CHECK(a.n_heads == b.n_heads);
                if (f == "n_kv_heads") CHECK(a.n_kv_heads == b.n_kv_heads);
                if (f == "head_dim") CHECK(a.head_dim == b.head_dim);
                if (f == "ffn_dim") CHECK(a.ffn_dim == b.ffn_dim);
                if (f == "page_size") CHECK(a.page_size == b.page_size);
                if (f == "rope_layout") CHECK(a.rope_layout == b.rope_layout);
                if (f == "rope_theta") CHECK(a.rope_theta == b.rope_theta);
                if (f == "qk_norm") CHECK(a.qk_norm == b.qk_norm);
                if (f == "norm_eps") CHECK(a.norm_eps == b.norm_eps);
            }
            if (want.op == Op::rope || want.op == Op::qk_norm) CHECK(a.n_heads == want.in("x").cols() / a.head_dim);
            if (want.op == Op::swiglu)
                CHECK((a.d_model == b.d_model && a.ffn_dim == b.ffn_dim && a.hidden_act == b.hidden_act));
        }
    }
}

TEST_CASE("the golden outputs are the float64 reference, every tap for block", "[fixtures][golden]") {
    const Case block = gen::materialize(block_spec(Op::block, RopeLayout::neox));
    const NamedD g = h5::golden_expected(block);
    CHECK(g.size() == kAllTaps.size());
    const NamedD r = ref::run(block, {});
    for (const auto& [name, t] : g) CHECK(t.data == r.at(name).data);
    const NamedD d = h5::golden_expected(gen::materialize(block_spec(Op::decode, RopeLayout::neox)));
    CHECK(d.size() == 1);
    CHECK(d.count("out"));
}

TEST_CASE("writes are atomic and never overwrite without force", "[fixtures][h5]") {
    TempDir dir;
    const std::string path = dir / "sub/dir/f.h5";  // parent directories are created
    h5::FixtureCase fc = golden(rope_spec(RopeLayout::neox), "a");
    h5::write_fixture(path, {fc}, false);
    const auto size = fs::file_size(path);

    fc.c.group = "b";
    CHECK_THROWS_AS(h5::write_fixture(path, {fc}, false), InputError);
    CHECK_THROWS_WITH(h5::write_fixture(path, {fc}, false), Catch::Contains("exists (use --force"));
    CHECK(h5::read_fixture(path).at(0).group == "a");  // untouched
    CHECK(fs::file_size(path) == size);

    h5::write_fixture(path, {fc}, true);
    CHECK(h5::read_fixture(path).at(0).group == "b");

    // Nothing half-written is left behind, and a directory walk never sees a temporary.
    int entries = 0;
    for (const auto& e : fs::directory_iterator(fs::path(path).parent_path())) {
        (void)e;
        ++entries;
    }
    CHECK(entries == 1);
    CHECK(h5::fixture_files(dir.path.string()) == std::vector<std::string>{path});
}

TEST_CASE("the writer refuses what the reader would refuse", "[fixtures][h5]") {
    TempDir dir;
    h5::FixtureCase fc = golden(rope_spec(RopeLayout::neox), "a");
    SECTION("NaN in an input") {
        fc.c.inputs["x"].data[3] = NAN;
        CHECK_THROWS_WITH(h5::write_fixture(dir / "x.h5", {fc}, false), Catch::Contains("inputs/x: non-finite"));
    }
    SECTION("expected of the wrong shape") {
        fc.c.expected["out"].shape = {4, 16};
        fc.c.expected["out"].data.resize(64);
        CHECK_THROWS_WITH(h5::write_fixture(dir / "x.h5", {fc}, false), Catch::Contains("expected/out: expected shape [4,32]"));
    }
    SECTION("no expected values") {
        fc.c.expected.clear();
        CHECK_THROWS_WITH(h5::write_fixture(dir / "x.h5", {fc}, false), Catch::Contains("no golden outputs"));
    }
    SECTION("two cases with one name") {
        CHECK_THROWS_WITH(h5::write_fixture(dir / "x.h5", {fc, fc}, false), Catch::Contains("two cases named 'a'"));
    }
    CHECK_FALSE(fs::exists(dir / "x.h5"));
}

TEST_CASE("files that are not fixtures are refused with the file named", "[fixtures][h5]") {
    TempDir dir;
    {
        std::ofstream(dir / "text.h5") << "this is not HDF5\n";
    }
    CHECK_THROWS_WITH(h5::read_fixture(dir / "text.h5"), Catch::StartsWith(dir / "text.h5") && Catch::Contains("not an HDF5 file"));
    CHECK_THROWS_WITH(h5::read_fixture(dir / "missing.h5"), Catch::Contains("no such file"));
    CHECK_THROWS_WITH(h5::read_fixture(dir.path.string()), Catch::Contains("not a regular file"));
    CHECK_THROWS_AS(h5::fixture_files(dir / "nowhere"), InputError);

    // Truncated: the header survives, the rest does not.
    h5::write_fixture(dir / "good.h5", {golden(rope_spec(RopeLayout::neox), "a")}, false);
    fs::copy_file(dir / "good.h5", dir / "cut.h5");
    fs::resize_file(dir / "cut.h5", fs::file_size(dir / "good.h5") / 2);
    CHECK_THROWS_WITH(h5::read_fixture(dir / "cut.h5"), Catch::StartsWith(dir / "cut.h5"));
    CHECK_THROWS_AS(h5::read_fixture(dir / "cut.h5"), InputError);

    // The walker: sorted, recursive, *.h5 and *.hdf5 only, hidden files skipped.
    fs::create_directories(dir.path / "z");
    fs::copy_file(dir / "good.h5", dir / "z/b.hdf5");
    fs::copy_file(dir / "good.h5", dir / ".hidden.h5");
    {
        std::ofstream(dir / "notes.txt") << "x";
    }
    CHECK(h5::fixture_files(dir.path.string()) ==
          std::vector<std::string>{dir / "cut.h5", dir / "good.h5", dir / "text.h5", dir / "z/b.hdf5"});
}

TEST_CASE("a fixture computed with the other RoPE layout fails for reference and scalar", "[fixtures][rope]") {
    auto impl = test::make("scalar");
    for (gen::CaseSpec spec : {rope_spec(RopeLayout::neox), rope_spec(RopeLayout::interleaved),
                               block_spec(Op::block, RopeLayout::neox), block_spec(Op::decode, RopeLayout::interleaved)}) {
        Case c = gen::materialize(spec);
        INFO(c.id);
        c.file = "in-memory.h5";
        c.group = "case";

        // The faithful golden file: both conform.
        c.expected = h5::golden_expected(c);
        CHECK(judge_reference(c).pass);
        CHECK(judge_impl(*impl, c).pass);

        // Expected values computed under the other pairing.
        ref::Variant other;
        other.layout = spec.config.rope_layout == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
        NamedD wrong = ref::run(c, {ref::Precision::f64, ref::Order::library, other});
        c.expected.clear();
        for (const auto& n : output_names(c.op)) c.expected[n] = wrong.at(n);
        const CaseResult r = judge_reference(c);
        const CaseResult s = judge_impl(*impl, c);
        CHECK_FALSE(r.pass);
        CHECK_FALSE(s.pass);
        // For the block the first tap to fail is a rotated one, not the output.
        if (c.op == Op::block) {
            CHECK((r.first_failing == "q_rot" || r.first_failing == "k_rot"));
            CHECK((s.first_failing == "q_rot" || s.first_failing == "k_rot"));
        }
    }
}

namespace {

// The scalar implementation with RoPE's pairing swapped: a wrong
// implementation defined here, so saving failures is tested whatever
// mutants the registry holds.
class SwappedRope : public Implementation {
   public:
    SwappedRope() : inner_(test::make("scalar")) {}
    std::string name() const override { return "test_swapped_rope"; }
    DType dtype() const override { return DType::f32; }
    Support supports(Op op, const BlockConfig& c) const override { return inner_->supports(op, c); }
    void rmsnorm(View x, View w, const RmsNormParams& p, MutView out) override { inner_->rmsnorm(x, w, p, out); }
    void rope(View x, Positions pos, const RopeParams& p, MutView out) override {
        RopeParams q = p;
        q.layout = p.layout == RopeLayout::neox ? RopeLayout::interleaved : RopeLayout::neox;
        inner_->rope(x, pos, q, out);
    }
    void qk_norm(View x, View w, const QkNormParams& p, MutView out) override { inner_->qk_norm(x, w, p, out); }
    void attention(View q, View k, View v, Positions qp, Positions kp, const AttentionParams& p, MutView out) override {
        inner_->attention(q, k, v, qp, kp, p, out);
    }
    void swiglu(View x, View w1, View w3, View w2, const SwigluParams& p, MutView out) override {
        inner_->swiglu(x, w1, w3, w2, p, out);
    }
    TapSet block(View x, const BlockWeights& w, Positions pos, const BlockConfig& c, BlockOutputs& out) override {
        return inner_->block(x, w, pos, c, out);
    }
    void decode(View x, const BlockWeights& w, Positions pos, int64_t prefill, const BlockConfig& c,
                MutView out) override {
        inner_->decode(x, w, pos, prefill, c, out);
    }

   private:
    std::unique_ptr<Implementation> inner_;
};

}  // namespace

TEST_CASE("a shrunk failure saved as a fixture replays", "[fixtures][save-failures]") {
    TempDir dir;
    SwappedRope wrong;
    auto scalar = test::make("scalar");
    const uint64_t seed = 20261129;
    auto fails = [&](const gen::CaseSpec& s) {
        Case c = gen::materialize(s);
        try {
            validate_case(c);
        } catch (const InputError&) {
            return false;
        }
        ImplOutputs out = run_impl(wrong, c);
        return !out.error.empty() || !judge_case(c, DType::f32, out.outputs, reference_truth(c, DType::f32)).pass;
    };
    int index = 0;
    while (index < 100 && !fails(gen::draw(Op::rope, seed, index))) ++index;
    REQUIRE(index < 100);  // a swapped pairing fails within the first draws
    const gen::Shrunk sh = gen::shrink(Op::rope, seed, index, fails);
    const Case small = gen::materialize(sh.spec);
    INFO(small.id);
    CHECK(sh.steps > 0);

    const std::string path = h5::save_failure(dir.path.string(), small, {wrong.name(), DType::f32, seed, sh.steps, "out", ""}, false);
    CHECK(fs::path(path).filename().string() == h5::failure_file_name(small.id, wrong.name()));
    CHECK(h5::fixture_replay_command(wrong.name(), path, h5::kFailureGroup, DType::f32) ==
          "build/conform --impl test_swapped_rope --fixtures '" + path + "' --fixture-case 'failure' --cases 0");
    CHECK_THROWS_WITH(h5::save_failure(dir.path.string(), small, {wrong.name(), DType::f32, seed, sh.steps, "out", ""}, false),
                      Catch::Contains("exists"));

    const std::vector<Case> back = h5::read_fixture(path);
    REQUIRE(back.size() == 1);
    const Case& c = back[0];
    CHECK(c.group == "failure");
    CHECK(c.inputs.at("x").data == small.inputs.at("x").data);
    CHECK(c.description.find("test_swapped_rope") != std::string::npos);

    // Replayed: the implementation that failed still fails; the correct one
    // and our reference pass the very same file.
    CHECK_FALSE(judge_impl(wrong, c).pass);
    CHECK(judge_impl(*scalar, c).pass);
    CHECK(judge_reference(c).pass);
}

TEST_CASE("presets carry the checkpoints' numbers", "[fixtures][presets]") {
    for (const char* name : {"llama2-7b", "llama3-8b", "qwen3-8b", "mistral-7b", "tinyllama-1.1b"}) REQUIRE(config::find_preset(name));
    CHECK(config::find_preset("gpt-5") == nullptr);

    const BlockConfig q = config::find_preset("qwen3-8b")->config;
    CHECK((q.n_heads == 32 && q.n_kv_heads == 8 && q.head_dim == 128 && q.qk_norm && q.rope_theta == 1e6 &&
           q.norm_eps == 1e-6 && q.rope_layout == RopeLayout::neox));
    const BlockConfig l = config::find_preset("llama3-8b")->config;
    CHECK((l.d_model == 4096 && l.ffn_dim == 14336 && l.rope_theta == 5e5 && l.n_kv_heads == 8 && !l.qk_norm));
    CHECK(config::find_preset("llama2-7b")->config.n_kv_heads == 32);  // MHA
    CHECK(config::find_preset("tinyllama-1.1b")->config.head_dim == 64);

    const BlockConfig s = config::scale_down(l, 64);
    CHECK((s.d_model == 64 && s.ffn_dim == 224));
    CHECK((s.n_heads == l.n_heads && s.n_kv_heads == l.n_kv_heads && s.head_dim == l.head_dim &&
           s.rope_theta == l.rope_theta && s.norm_eps == l.norm_eps));
    CHECK(config::scale_down(config::find_preset("llama2-7b")->config, 1000).ffn_dim == 12);  // rounded up
    CHECK_THROWS(config::scale_down(l, 0));

    // Every preset is a valid block: heads divide, head_dim is even.
    for (const auto& p : config::presets()) {
        INFO(p.name);
        const BlockConfig& c = p.config;
        CHECK(c.n_heads % c.n_kv_heads == 0);
        CHECK(c.head_dim % 2 == 0);
        CHECK(c.rope_theta > 1);
    }
}

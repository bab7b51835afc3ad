// Configurations: the presets, Hugging Face config.json import (defaults,
// RoPE scaling, refusals), the override flags, and the anatomy's arithmetic.
#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "config/presets.h"
#include "gen/gen.h"

using namespace conform;
using namespace conform::config;

namespace {

const std::string kConfigs = std::string(CONFORM_SOURCE_DIR) + "/fixtures/configs/";

bool has_line(const std::vector<std::string>& lines, const std::string& part) {
    for (const auto& l : lines)
        if (l.find(part) != std::string::npos) return true;
    return false;
}

// The message a bad config throws.
std::string refusal(const std::string& text) {
    try {
        parse_hf_config(text, "x.json");
    } catch (const ConfigError& e) {
        return e.what();
    }
    return "(accepted)";
}

// Parses the command line with the configuration flags and resolves it.
ModelConfig resolve_args(std::vector<std::string> args) {
    CLI::App app;
    ConfigOptions o;
    add_config_options(app, o);
    args.insert(args.begin(), "conform");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return resolve_config(o);
}

const char* kMinimalLlama = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
                                "num_attention_heads": 16, "intermediate_size": 5632, "num_hidden_layers": 4)";

}  // namespace

TEST_CASE("each preset's config.json loads to the preset", "[config]") {
    for (const auto& p : presets()) {
        INFO(p.name);
        const ModelConfig m = load_hf_config(kConfigs + p.name + ".json");
        const BlockConfig &a = m.block, &b = p.config;
        CHECK(a.d_model == b.d_model);
        CHECK(a.n_heads == b.n_heads);
        CHECK(a.n_kv_heads == b.n_kv_heads);
        CHECK(a.head_dim == b.head_dim);
        CHECK(a.ffn_dim == b.ffn_dim);
        CHECK(a.rope_theta == b.rope_theta);
        CHECK(a.norm_eps == b.norm_eps);
        CHECK(a.qk_norm == b.qk_norm);
        CHECK(a.rope_layout == b.rope_layout);
        CHECK(a.rotary() == b.rotary());
        CHECK(a.rope_scaling == b.rope_scaling);
        CHECK(m.layers == p.layers);
        CHECK(m.vocab == p.vocab);
        CHECK(m.max_position == p.max_position);
        CHECK(m.tie_embeddings == p.tie_embeddings);
    }
}

TEST_CASE("Llama 3.1's llama3 scaling and Qwen3's QK-norm come from their files", "[config]") {
    const ModelConfig l = load_hf_config(kConfigs + "llama3.1-8b.json");
    CHECK(l.architecture == "LlamaForCausalLM");
    CHECK(l.block.rope_scaling.type == RopeScalingType::llama3);
    CHECK(l.block.rope_scaling.factor == 8);
    CHECK(l.block.rope_scaling.low_freq_factor == 1);
    CHECK(l.block.rope_scaling.high_freq_factor == 4);
    CHECK(l.block.rope_scaling.original_max_position == 8192);
    CHECK(l.block.rope_layout == RopeLayout::neox);
    CHECK_FALSE(l.block.qk_norm);
    // head_dim is absent from Llama's file: hidden_size / num_attention_heads, said so.
    CHECK(l.block.head_dim == 128);
    CHECK(has_line(l.defaults, "head_dim: absent, took 128"));

    const ModelConfig q = load_hf_config(kConfigs + "qwen3-8b.json");
    CHECK(q.block.qk_norm);
    CHECK(q.block.head_dim == 128);
    CHECK(q.block.rope_scaling.type == RopeScalingType::none);
    CHECK(q.defaults.empty());
}

TEST_CASE("absent fields take the architecture's HF defaults, and say so", "[config]") {
    const ModelConfig m = parse_hf_config(std::string(kMinimalLlama) + "}", "x.json");
    CHECK(m.block.n_kv_heads == 16);   // num_attention_heads
    CHECK(m.block.head_dim == 128);    // 2048 / 16
    CHECK(m.block.norm_eps == 1e-6);   // LlamaConfig's, not 1e-5
    CHECK(m.block.rope_theta == 10000);
    CHECK(m.max_position == 2048);
    CHECK(m.vocab == 32000);
    CHECK(has_line(m.defaults, "num_key_value_heads: absent, took 16"));
    CHECK(has_line(m.defaults, "rms_norm_eps: absent, took 1e-06 (LlamaConfig's default)"));
    CHECK(has_line(m.defaults, "rope_theta: absent"));
    CHECK_FALSE(has_line(m.defaults, "hidden_size: absent"));

    // Qwen3Config's head_dim default is 128 whatever hidden_size is; its q/k are normed.
    const ModelConfig q = parse_hf_config(R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 512,
                                              "num_attention_heads": 8, "num_key_value_heads": 2})", "q.json");
    CHECK(q.block.head_dim == 128);
    CHECK(q.block.qk_norm);
    CHECK(q.block.ffn_dim == 22016);
    CHECK(has_line(q.defaults, "head_dim: absent, took 128 (Qwen3Config's default)"));

    // No architecture at all: Llama's conventions, and the report says so.
    const ModelConfig a = parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 4})", "a.json");
    CHECK(has_line(a.defaults, "architecture: absent"));
    CHECK(a.block.rope_layout == RopeLayout::neox);
}

TEST_CASE("rope_scaling: rope_type or the legacy type, null, default; HF's defaults resolved", "[config]") {
    const std::string base = kMinimalLlama;
    auto with = [&](const std::string& scaling) {
        return parse_hf_config(base + ", \"max_position_embeddings\": 4096, \"rope_scaling\": " + scaling + "}", "s.json");
    };
    CHECK(with("null").block.rope_scaling.type == RopeScalingType::none);
    CHECK(with(R"({"rope_type": "default"})").block.rope_scaling.type == RopeScalingType::none);

    const ModelConfig lin = with(R"({"type": "linear", "factor": 2.0})");
    CHECK(lin.block.rope_scaling.type == RopeScalingType::linear);
    CHECK(lin.block.rope_scaling.factor == 2);

    const ModelConfig dyn = with(R"({"type": "dynamic", "factor": 4})");
    CHECK(dyn.block.rope_scaling.type == RopeScalingType::dynamic);
    CHECK(dyn.block.rope_scaling.original_max_position == 4096);

    const ModelConfig yarn = with(R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024})");
    const RopeScaling& y = yarn.block.rope_scaling;
    CHECK(y.type == RopeScalingType::yarn);
    CHECK(y.original_max_position == 1024);
    CHECK(y.beta_fast == 32);
    CHECK(y.beta_slow == 1);
    CHECK(y.attention_factor == Approx(0.1 * std::log(4.0) + 1.0).epsilon(1e-15));
    CHECK(has_line(yarn.defaults, "rope_scaling.attention_factor: absent"));
    // No original context in rope_scaling: max_position_embeddings.
    CHECK(with(R"({"rope_type": "yarn", "factor": 2.0})").block.rope_scaling.original_max_position == 4096);
    // DeepSeek-style mscale / mscale_all_dim.
    const double ms = with(R"({"rope_type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.5})")
                          .block.rope_scaling.attention_factor;
    CHECK(ms == Approx((0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1)));
    CHECK(with(R"({"rope_type": "yarn", "factor": 4, "attention_factor": 1.5})").block.rope_scaling.attention_factor == 1.5);

    // llama3 without original_max_position_embeddings: max_position_embeddings, reported.
    const ModelConfig l3 = with(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4})");
    CHECK(l3.block.rope_scaling.original_max_position == 4096);
    CHECK(has_line(l3.defaults, "rope_scaling.original_max_position_embeddings: absent, took max_position_embeddings"));

    // partial_rotary_factor: the first head_dim * f dims rotate.
    const ModelConfig p = parse_hf_config(base + ", \"partial_rotary_factor\": 0.5}", "p.json");
    CHECK(p.block.rotary_dim == 64);
    CHECK(p.block.rotary() == 64);
}

TEST_CASE("bad configs are refused naming the file and the field", "[config]") {
    const std::string base = kMinimalLlama;
    auto scaling = [&](const std::string& s) { return refusal(base + ", \"rope_scaling\": " + s + "}"); };

    CHECK_THAT(refusal("{\"hidden_size\": 4096,"), Catch::Contains("x.json: not valid JSON"));
    CHECK_THAT(refusal("[1, 2]"), Catch::Contains("x.json: (top level): expected a JSON object"));
    CHECK_THAT(refusal(R"({"hidden_size": "4096"})"), Catch::Contains("x.json: hidden_size: expected an integer, found \"4096\""));
    CHECK_THAT(refusal(R"({"hidden_size": -1})"), Catch::Contains("x.json: hidden_size: expected a positive integer"));
    CHECK_THAT(refusal(R"({"hidden_size": 100, "num_attention_heads": 3})"),
               Catch::Contains("x.json: head_dim: absent, and hidden_size 100 is not a multiple"));
    CHECK_THAT(refusal(R"({"num_attention_heads": 32, "num_key_value_heads": 5})"),
               Catch::Contains("x.json: num_key_value_heads (kv heads): expected a divisor of num_attention_heads 32, found 5"));
    CHECK_THAT(refusal(R"({"rms_norm_eps": 0})"), Catch::Contains("x.json: rms_norm_eps: expected a positive number"));
    CHECK_THAT(refusal(R"({"hidden_act": "gelu"})"), Catch::Contains("x.json: hidden_act: expected \"silu\""));
    CHECK_THAT(refusal(base + ", \"partial_rotary_factor\": 1.5}"), Catch::Contains("x.json: partial_rotary_factor"));
    CHECK_THAT(refusal(R"({"head_dim": 7})"), Catch::Contains("x.json: head_dim: RoPE rotates pairs"));

    CHECK_THAT(scaling(R"({"rope_type": "longrope", "short_factor": [1], "long_factor": [1]})"),
               Catch::Contains("x.json: rope_scaling.rope_type: 'longrope' is not supported"));
    CHECK_THAT(scaling(R"({"type": "su", "factor": 2})"), Catch::Contains("x.json: rope_scaling.type: 'su' is not supported"));
    CHECK_THAT(scaling(R"({"rope_type": "banana"})"), Catch::Contains("rope_scaling.rope_type: 'banana'"));
    CHECK_THAT(scaling(R"({"rope_type": 3})"), Catch::Contains("x.json: rope_scaling.rope_type: expected a string"));
    CHECK_THAT(scaling(R"({"rope_type": "linear"})"), Catch::Contains("x.json: rope_scaling.factor: missing"));
    CHECK_THAT(scaling(R"({"rope_type": "llama3", "factor": 8, "high_freq_factor": 4})"),
               Catch::Contains("x.json: rope_scaling.low_freq_factor: missing"));
    CHECK_THAT(scaling(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 4})"),
               Catch::Contains("x.json: rope_scaling.high_freq_factor: expected > low_freq_factor"));
    CHECK_THAT(scaling(R"({"rope_type": "linear", "factor": "2"})"), Catch::Contains("x.json: rope_scaling.factor: expected a number"));
    CHECK_THAT(scaling("[1]"), Catch::Contains("x.json: rope_scaling: expected an object or null"));

    CHECK_THROWS_WITH(load_hf_config("/nonexistent/config.json"), Catch::Contains("/nonexistent/config.json: cannot open"));
}

TEST_CASE("the order: a preset, then a config file, then each flag", "[config]") {
    const ModelConfig p = resolve_args({"--preset", "tinyllama-1.1b", "--kv-heads", "8", "--theta", "5e5"});
    CHECK(p.block.n_kv_heads == 8);
    CHECK(p.block.rope_theta == 5e5);
    CHECK(p.block.d_model == 2048);
    CHECK(has_line(p.overrides, "--kv-heads 8 (was 4)"));

    const ModelConfig f = resolve_args({"--preset", "llama2-7b", "--config", kConfigs + "qwen3-0.6b.json",
                                        "--layers", "2", "--layout", "interleaved", "--qk-norm", "0"});
    CHECK(f.block.d_model == 1024);  // the file replaced the preset
    CHECK(f.layers == 2);
    CHECK(f.block.rope_layout == RopeLayout::interleaved);
    CHECK_FALSE(f.block.qk_norm);

    CHECK(resolve_args({}).name.empty());  // nothing given
    CHECK_THROWS_WITH(resolve_args({"--preset", "gpt-5"}), Catch::Contains("--preset: unknown preset 'gpt-5'"));
    CHECK_THROWS_WITH(resolve_args({"--preset", "llama3-8b", "--kv-heads", "5"}),
                      Catch::Contains("num_key_value_heads (kv heads): expected a divisor"));
    CHECK_THROWS_WITH(resolve_args({"--preset", "llama3-8b", "--layout", "diagonal"}),
                      Catch::Contains("--layout: expected neox or interleaved"));
    CHECK_THROWS_WITH(resolve_args({"--theta", "1e6"}), Catch::Contains("--d-model: missing"));
}

TEST_CASE("anatomy: TinyLlama-shaped with 8 kv heads", "[config][anatomy]") {
    ModelConfig m = find_preset("tinyllama-1.1b")->model();
    m.block.n_kv_heads = 8;
    const Anatomy a = anatomy(m, 1, 0, 2.0);
    // 2048·(2048 + 512 + 512 + 2048) + 3·2048·5632 + 2·2048
    CHECK(a.layer.params == 45092864.0);
    CHECK(si(a.layer.params) == "45.1M");
    CHECK(a.model.params == 22 * 45092864.0 + 2048);
    CHECK(si(a.model.params) == "992.0M");
    CHECK(a.kv_bytes_per_token_layer == 2048);       // 2 · 8 · 64 · 2 B
    CHECK(a.kv_bytes_per_token_layer_mha == 8192);   // 2 · 32 · 64 · 2 B
    CHECK(si(a.layer.flops) == "90.2M");
    CHECK(si(a.flops_per_token()) == "2.0G");
    // The matmuls are 2 FLOP per weight at T = 1; the rest is small.
    CHECK(a.layer.flops == Approx(2 * (45092864.0 - 4096)).epsilon(1e-3));
    // Intensity grows with T: about T FLOP per weight byte in fp16.
    double last = 0;
    for (int64_t t : {1, 4, 16, 64, 256}) {
        const Anatomy b = anatomy(m, t, 0, 2.0);
        CHECK(b.layer.intensity() > last);
        last = b.layer.intensity();
        CHECK(b.layer.flops / (b.layer.params * 2) == Approx(static_cast<double>(t)).epsilon(0.05 + 0.001 * t));
    }
    CHECK(anatomy(m, 1, 0, 2.0).layer.intensity() == Approx(1.0).epsilon(0.01));
    // A decode step after a cache reads it: more attention FLOPs and bytes.
    CHECK(anatomy(m, 1, 1000, 2.0).layer.flops > a.layer.flops);
    CHECK(anatomy(m, 1, 1000, 2.0).kv_cache_bytes == 1001 * 22 * 2048.0);
}

TEST_CASE("a pinned configuration fixes every drawn case's conventions and sizes", "[config][gen]") {
    BlockConfig c = load_hf_config(kConfigs + "llama3.1-8b.json").block;
    c = scale_down(c, 16);
    c.rope_layout = RopeLayout::interleaved;
    for (Op op : kAllOps)
        for (int i = 0; i < 30; ++i) {
            const gen::CaseSpec s = gen::draw(gen::Stream{op, 7, c}, i);
            INFO(gen::canonical_id(s));
            const OpInfo& info = op_info(op);
            if (info.uses(kRope)) {
                CHECK(s.layout == RopeLayout::interleaved);
                CHECK(s.theta == 5e5);
                CHECK(s.scaling == c.rope_scaling);
                CHECK(s.rotary_dim == 0);
            }
            if (info.reads("head_dim")) CHECK(s.head_dim == 128);
            if (info.uses(kHeads)) CHECK((s.n_heads == 32 && s.n_kv_heads == 8));
            if (info.has_dim(Dim::D)) CHECK(s.d_model == 256);
            if (info.has_dim(Dim::F)) CHECK(s.ffn_dim == 896);
            // The id alone rebuilds the pinned case, without the pin.
            CHECK(gen::canonical_id(*gen::parse_case_id(gen::canonical_id(s))) == gen::canonical_id(s));
        }
    // Shrinking stays inside the configuration.
    const gen::Shrunk sh = gen::shrink(gen::Stream{Op::block, 7, c}, 3, [](const gen::CaseSpec&) { return true; });
    CHECK(sh.spec.head_dim == 128);
    CHECK(sh.spec.scaling == c.rope_scaling);
    // An unpinned stream of the same seed draws freely.
    bool other = false;
    for (int i = 0; i < 30; ++i) other = other || gen::draw(Op::rope, 7, i).head_dim != 128;
    CHECK(other);
}

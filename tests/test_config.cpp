// Configurations: the presets, Hugging Face config.json import (defaults,
// RoPE scaling, refusals), the override flags, and the anatomy's arithmetic.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/anatomy.h"
#include "config/hf_config.h"
#include "config/options.h"
#include "config/presets.h"
#include "gen/gen.h"
#include "report/anatomy_html.h"

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
ModelConfig resolve_args(std::vector<std::string> args, bool validate = true) {
    CLI::App app;
    ConfigOptions o;
    add_config_options(app, o);
    args.insert(args.begin(), "conform");
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    app.parse(static_cast<int>(argv.size()), argv.data());
    return resolve_config(o, {}, validate);
}

const char* kMinimalLlama = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 2048,
                                "num_attention_heads": 16, "intermediate_size": 5632, "num_hidden_layers": 4)";

}  // namespace

TEST_CASE("Mixtral, Qwen2-MoE and Qwen3-MoE: their experts read as the moe ops compute them, defaults said", "[config]") {
    const ModelConfig q3 = parse_hf_config(R"({"model_type": "qwen3_moe"})", "x.json");
    CHECK(q3.block.n_experts == 128);
    CHECK(q3.block.n_experts_per_tok == 8);
    CHECK(q3.block.moe_ffn_dim == 768);
    CHECK_FALSE(q3.block.moe_norm_topk_prob);
    CHECK(q3.block.qk_norm);
    CHECK(q3.block.moe_shared_ffn_dim == 0);
    CHECK_THAT(q3.ffn_unmodelled, Catch::Contains("a mixture of 128 experts, 8 per token") &&
                                      Catch::Contains("the top 8 as they are"));
    CHECK(std::count(q3.defaults.begin(), q3.defaults.end(), "norm_topk_prob: absent, took false (Qwen3MoeConfig's default)") == 1);
    const ModelConfig q2 = parse_hf_config(R"({"model_type": "qwen2_moe", "norm_topk_prob": true})", "x.json");
    CHECK(q2.block.n_experts == 60);
    CHECK(q2.block.moe_norm_topk_prob);
    CHECK(q2.block.moe_shared_ffn_dim == 5632);
    CHECK(q2.block.moe_shared_gate);
    CHECK(q2.block.qkv_bias);
    const ModelConfig mx = parse_hf_config(R"({"model_type": "mixtral", "intermediate_size": 512, "decoder_sparse_step": 2})",
                                           "x.json");
    CHECK(mx.block.n_experts == 8);
    CHECK(mx.block.n_experts_per_tok == 2);
    CHECK(mx.block.moe_ffn_dim == 512);  // Mixtral's experts are intermediate_size wide
    CHECK(mx.block.moe_norm_topk_prob);  // always renormalised
    CHECK(std::none_of(mx.notes.begin(), mx.notes.end(), [](const std::string& n) {
        return n.find("decoder_sparse_step") != std::string::npos;  // Qwen's field only
    }));
    const ModelConfig sparse = parse_hf_config(R"({"model_type": "qwen3_moe", "mlp_only_layers": [0, 3]})", "x.json");
    CHECK(std::any_of(sparse.notes.begin(), sparse.notes.end(),
                      [](const std::string& n) { return n.find("some layers are dense") != std::string::npos; }));
}

TEST_CASE("DeepSeek-V3 and OLMoE: their experts read as the moe ops compute them, their attention refused", "[config]") {
    // (DeepSeek-V3's latent attention is read for mla_attention: the next test.)
    const ModelConfig v3 = parse_hf_config(R"({"model_type": "deepseek_v3"})", "x.json");
    const BlockConfig& d = v3.block;
    CHECK(d.n_experts == 256);
    CHECK(d.n_experts_per_tok == 8);
    CHECK(d.moe_ffn_dim == 2048);
    CHECK(d.moe_scoring == MoeScoring::sigmoid);
    CHECK(d.moe_selection_bias);
    CHECK(d.moe_n_group == 8);
    CHECK(d.moe_topk_group == 4);
    CHECK(d.moe_group_score == MoeGroupScore::top2_sum);
    CHECK(d.moe_norm_topk_prob);
    CHECK(d.moe_routed_scaling_factor == 2.5);
    CHECK(d.moe_shared_ffn_dim == 2048);
    CHECK_FALSE(d.moe_shared_gate);
    CHECK(std::count(v3.defaults.begin(), v3.defaults.end(), "routed_scaling_factor: absent, took 2.5 (DeepseekV3Config's default)") == 1);
    CHECK_THAT(v3.attention_unmodelled, Catch::Contains("multi-head latent attention"));
    // Which ops run: the FFN's and the norm; not the attention's, nor the block's.
    for (Op op : {Op::moe, Op::moe_route, Op::moe_experts, Op::rmsnorm, Op::mla_attention})
        CHECK(unmodelled_for(v3, op).empty());
    for (Op op : {Op::rope, Op::qk_norm, Op::attention, Op::paged_attention, Op::block, Op::decode})
        CHECK_THAT(unmodelled_for(v3, op), Catch::Contains("runs the attention") || Catch::Contains("runs the FFN"));
    CHECK_THAT(unmodelled_for(v3, Op::attention), Catch::Contains("x.json's attention is multi-head latent attention"));
    // A router V3's class does not compute (V2's softmax, its greedy top-k) is refused, not run as V3's.
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "scoring_func": "softmax"})", "x.json"),
                      Catch::Contains("x.json: scoring_func: expected \"sigmoid\"") && Catch::Contains("found \"softmax\""));
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "topk_method": "greedy"})", "x.json"),
                      Catch::Contains("x.json: topk_method: expected \"noaux_tc\""));
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "n_group": 7})", "x.json"),
                      Catch::Contains("x.json: n_group: expected a divisor of n_routed_experts = 256"));
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "topk_group": 9})", "x.json"),
                      Catch::Contains("x.json: topk_group: expected a positive integer <= 8"));
    const ModelConfig v3_plain = parse_hf_config(R"({"model_type": "deepseek_v3", "routed_scaling_factor": 1.0, "n_shared_experts": 0})", "x.json");
    CHECK(v3_plain.block.moe_routed_scaling_factor == 0.0);  // 1: none
    CHECK(v3_plain.block.moe_shared_ffn_dim == 0);
    // Hostile values of the two: named, with what was found.
    for (const char* bad : {"0", "-2.5", "\"2.5\"", "[2.5]", "-1e300"}) {
        INFO(bad);
        CHECK_THROWS_WITH(
            parse_hf_config(std::string(R"({"model_type": "deepseek_v3", "routed_scaling_factor": )") + bad + "}", "x.json"),
            Catch::Contains("x.json: routed_scaling_factor: expected"));
    }
    // A number past double's range is the JSON reader's to refuse, with the file's name (it threw bare).
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "routed_scaling_factor": 1e400})", "x.json"),
                      Catch::Contains("x.json: not valid JSON") && Catch::Contains("1e400"));
    for (const char* bad : {"-1", "65", "1.5", "\"1\"", "true", "1e30"}) {
        INFO(bad);
        CHECK_THROWS_WITH(parse_hf_config(std::string(R"({"model_type": "deepseek_v3", "n_shared_experts": )") + bad + "}", "x.json"),
                          Catch::Contains("x.json: n_shared_experts: expected"));
    }

    const ModelConfig ol = parse_hf_config(R"({"model_type": "olmoe"})", "x.json");
    CHECK(ol.block.n_experts == 64);
    CHECK(ol.block.n_experts_per_tok == 8);
    CHECK(ol.block.moe_ffn_dim == 2048);  // OLMoE's experts are intermediate_size wide
    CHECK(ol.block.moe_scoring == MoeScoring::softmax);
    CHECK_FALSE(ol.block.moe_norm_topk_prob);
    CHECK(std::count(ol.defaults.begin(), ol.defaults.end(), "norm_topk_prob: absent, took false (OlmoeConfig's default)") == 1);
    CHECK_THAT(ol.attention_unmodelled, Catch::Contains("over all heads together"));
    CHECK(unmodelled_for(ol, Op::moe).empty());
    CHECK_FALSE(unmodelled_for(ol, Op::rope).empty());

    // Llama 4's text model: the top 1 of 16 by logit, weighted by its sigmoid on the expert's input, a shared expert.
    const ModelConfig l4 = parse_hf_config(R"({"model_type": "llama4_text", "attention_chunk_size": 8192,
                                               "no_rope_layers": [1, 1, 1, 0], "num_hidden_layers": 4})", "x.json");
    CHECK(l4.block.n_experts == 16);
    CHECK(l4.block.n_experts_per_tok == 1);
    CHECK(l4.block.moe_scoring == MoeScoring::sigmoid);
    CHECK_FALSE(l4.block.moe_norm_topk_prob);
    CHECK(l4.block.moe_weight_on_input);
    CHECK(l4.block.moe_ffn_dim == 8192);
    CHECK(l4.block.moe_shared_ffn_dim == 8192);
    CHECK_FALSE(l4.block.moe_shared_gate);
    CHECK_THAT(unmodelled_for(l4, Op::block), Catch::Contains("runs the FFN"));
    CHECK_THAT(unmodelled_for(l4, Op::attention), Catch::Contains("L2-normed"));
    CHECK(unmodelled_for(l4, Op::moe_route).empty());
}

TEST_CASE("DeepSeek-V3's latent attention: its widths and its YaRN scale read, its op offered to MLA models only", "[config]") {
    const ModelConfig v3 = load_hf_config(kConfigs + "deepseek-v3.json");
    const BlockConfig& d = v3.block;
    CHECK(d.kv_lora_rank == 512);
    CHECK(d.qk_nope_head_dim == 128);
    CHECK(d.qk_rope_head_dim == 64);
    CHECK(d.v_head_dim == 128);
    // DeepseekV3Attention: softmax_scale = 192^-1/2 * mscale^2, mscale = 0.1 * mscale_all_dim * ln(40) + 1.
    const double mscale = 0.1 * std::log(40.0) + 1.0;
    CHECK(d.attn_scale == Approx(mscale * mscale / std::sqrt(192.0)).epsilon(1e-15));
    CHECK(d.attn_scale == Approx(0.1352337788608801).epsilon(1e-12));
    CHECK_THAT(describe(d), Catch::Contains("kv_lora_rank=512 qk_nope_head_dim=128 qk_rope_head_dim=64 v_head_dim=128"));
    // Without YaRN, or with mscale_all_dim 0, the scale is (dn + dr)^-1/2: the twist off.
    CHECK(parse_hf_config(R"({"model_type": "deepseek_v3"})", "x.json").block.attn_scale == 0);
    CHECK(parse_hf_config(R"({"model_type": "deepseek_v3", "rope_scaling": {"type": "yarn", "factor": 40,
        "original_max_position_embeddings": 4096, "mscale_all_dim": 0}})", "x.json").block.attn_scale == 0);
    const ModelConfig half = parse_hf_config(R"({"model_type": "deepseek_v3", "rope_scaling": {"type": "yarn",
        "factor": 4, "original_max_position_embeddings": 4096, "mscale": 0.707, "mscale_all_dim": 0.707}})", "x.json");
    const double m4 = 0.1 * 0.707 * std::log(4.0) + 1.0;
    CHECK(half.block.attn_scale == Approx(m4 * m4 / std::sqrt(192.0)).epsilon(1e-15));
    // Each width bounded, named.
    for (const char* key : {"kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"})
        for (const char* bad : {"0", "-3", "5000", "1.5", "\"512\""}) {
            INFO(key << " = " << bad);
            CHECK_THROWS_WITH(parse_hf_config(std::string(R"({"model_type": "deepseek_v3", ")") + key + "\": " + bad + "}", "x.json"),
                              Catch::Contains(std::string("x.json: ") + key));
        }
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "deepseek_v3", "num_attention_heads": 4096, "num_key_value_heads": 4096, "head_dim": 64, "hidden_size": 4096, "v_head_dim": 129})", "x.json"),
                      Catch::Contains("num_attention_heads * (qk_nope_head_dim + v_head_dim)"));
    // The op is offered where the model has latent attention, and to widths given as flags.
    CHECK(unmodelled_for(find_preset("deepseek-v3")->model(), Op::mla_attention).empty());
    CHECK_THAT(unmodelled_for(find_preset("llama3-8b")->model(), Op::mla_attention),
               Catch::Contains("llama3-8b has none (its attention is multi-head"));
    CHECK_THAT(unmodelled_for(find_preset("deepseek-v3")->model(), Op::paged_attention),
               Catch::Contains("--op mla_attention runs it"));
    CHECK(unmodelled_for(ModelConfig{}, Op::mla_attention).empty());
    const ModelConfig flags = resolve_args({"--heads", "4", "--kv-lora-rank", "16", "--qk-nope-head-dim", "8",
                                            "--qk-rope-head-dim", "4", "--v-head-dim", "6"}, false);
    CHECK((flags.block.kv_lora_rank == 16 && flags.block.qk_nope_head_dim == 8 && flags.block.qk_rope_head_dim == 4 &&
           flags.block.v_head_dim == 6));
    CHECK(unmodelled_for(flags, Op::mla_attention).empty());
    // Flags without the widths: a model with none (the flags named), not one drawn at zero widths.
    CHECK_THAT(unmodelled_for(resolve_args({"--heads", "4", "--d-model", "64"}, false), Op::mla_attention),
               Catch::Contains("custom has none") && Catch::Contains("--kv-lora-rank"));
    CHECK_THROWS_WITH(resolve_args({"--preset", "deepseek-v3", "--v-head-dim", "0"}),
                      Catch::Contains("--v-head-dim: expected a positive integer, found 0"));
    CHECK_THROWS_WITH(resolve_args({"--preset", "deepseek-v3", "--kv-lora-rank", "9000"}),
                      Catch::Contains("kv_lora_rank: expected a positive integer <= 4096, found 9000"));
}

TEST_CASE("a pinned latent attention draws the model's widths, its batches cut to what the reference can hold", "[config][gen]") {
    const BlockConfig c = scale_down(find_preset("deepseek-v3")->config, 32);
    int64_t most = 0;
    for (int i = 0; i < 40; ++i) {
        const gen::CaseSpec s = gen::draw(gen::Stream{Op::mla_attention, 7, c, nullptr}, i);
        INFO(gen::canonical_id(s));
        CHECK((s.config.kv_lora_rank == 512 && s.config.qk_nope_head_dim == 128 && s.config.qk_rope_head_dim == 64 &&
               s.config.v_head_dim == 128));
        CHECK((s.config.n_heads == 128 && s.config.n_kv_heads == 128));
        CHECK(s.config.attn_scale == c.attn_scale);
        int64_t keys = 0;
        for (int64_t k : s.kv_lens) keys += k;
        CHECK(keys * 512 * 128 * 256 <= (int64_t{1} << 31));
        most = std::max(most, keys);
        CHECK(gen::canonical_id(*gen::parse_case_id(gen::canonical_id(s))) == gen::canonical_id(s));
    }
    CHECK(most == 128);  // a long sequence is cut to the budget, not dropped
}

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
        CHECK(a.qkv_bias == b.qkv_bias);
        CHECK(a.sliding_window == b.sliding_window);
        CHECK(a.attn_logit_softcapping == b.attn_logit_softcapping);
        CHECK(a.attn_sinks == b.attn_sinks);
        CHECK(a.rope_layout == b.rope_layout);
        CHECK(a.rotary() == b.rotary());
        CHECK(a.rope_scaling == b.rope_scaling);
        CHECK(a.n_experts == b.n_experts);
        CHECK(a.n_experts_per_tok == b.n_experts_per_tok);
        CHECK(a.moe_ffn_dim == b.moe_ffn_dim);
        CHECK(a.moe_norm_topk_prob == b.moe_norm_topk_prob);
        CHECK(a.moe_shared_ffn_dim == b.moe_shared_ffn_dim);
        CHECK(a.moe_shared_gate == b.moe_shared_gate);
        CHECK(a.moe_router_bias == b.moe_router_bias);
        CHECK(a.moe_expert_bias == b.moe_expert_bias);
        CHECK(a.moe_gate_up_interleaved == b.moe_gate_up_interleaved);
        CHECK(a.moe_swiglu_limit == b.moe_swiglu_limit);
        CHECK(a.moe_scoring == b.moe_scoring);
        CHECK(a.moe_selection_bias == b.moe_selection_bias);
        CHECK(a.moe_n_group == b.moe_n_group);
        CHECK(a.moe_topk_group == b.moe_topk_group);
        CHECK(a.moe_group_score == b.moe_group_score);
        CHECK(a.moe_routed_scaling_factor == b.moe_routed_scaling_factor);
        CHECK(a.moe_weight_on_input == b.moe_weight_on_input);
        CHECK(a.kv_lora_rank == b.kv_lora_rank);
        CHECK(a.qk_nope_head_dim == b.qk_nope_head_dim);
        CHECK(a.qk_rope_head_dim == b.qk_rope_head_dim);
        CHECK(a.v_head_dim == b.v_head_dim);
        CHECK(m.ffn_unmodelled.empty() == p.ffn_unmodelled.empty());
        CHECK(m.attention_unmodelled.empty() == p.attention_unmodelled.empty());
        CHECK(m.layers == p.layers);
        CHECK(m.vocab == p.vocab);
        CHECK(m.max_position == p.max_position);
        CHECK(m.tie_embeddings == p.tie_embeddings);
        CHECK(a.norm_plus_one == b.norm_plus_one);
        CHECK(a.hidden_act == b.hidden_act);
        CHECK(m.embedding_multiplier == p.embedding_multiplier);
        CHECK(a.sandwich_norm == b.sandwich_norm);
        CHECK(a.attn_scale == b.attn_scale);
        CHECK(m.final_logit_softcapping == p.final_logit_softcapping);
        CHECK(m.pattern.sliding == p.pattern.sliding);
        CHECK(m.pattern.local_rope_theta == p.pattern.local_rope_theta);
    }
}

TEST_CASE("Gemma 2 and 3 read as sandwich norms, their scale and caps, and sliding / full layers", "[config]") {
    const ModelConfig g2 = load_hf_config(kConfigs + "gemma2-27b.json");
    CHECK(g2.block.sandwich_norm);
    CHECK(g2.block.attn_scale == 1.0 / 12.0);  // query_pre_attn_scalar 144, head_dim 128
    CHECK(g2.block.attn_logit_softcapping == 50.0);
    CHECK(g2.final_logit_softcapping == 30.0);
    REQUIRE(g2.pattern.sliding.size() == 46);
    CHECK(g2.pattern.sliding[0]);   // layer 0 sliding (Gemma2Config's layer_types)
    CHECK(!g2.pattern.sliding[1]);
    CHECK(g2.layer_block(0).sliding_window == 4096);
    CHECK(g2.layer_block(1).sliding_window == 0);
    const ModelConfig g3 = load_hf_config(kConfigs + "gemma3-4b.json");
    CHECK(g3.block.qk_norm);
    CHECK(g3.block.attn_scale == 0);  // query_pre_attn_scalar = head_dim
    CHECK(g3.block.attn_logit_softcapping == 0);  // null
    CHECK(g3.final_logit_softcapping == 0);
    // Layers 0-4 sliding with the local base and no scaling; layer 5 full with 1e6 and linear x8.
    const BlockConfig l0 = g3.layer_block(0), l5 = g3.layer_block(5);
    CHECK(l0.sliding_window == 1024);
    CHECK(l0.rope_theta == 10000.0);
    CHECK(l0.rope_scaling.type == RopeScalingType::none);
    CHECK(l5.sliding_window == 0);
    CHECK(l5.rope_theta == 1e6);
    CHECK(l5.rope_scaling.type == RopeScalingType::linear);
    CHECK(l5.rope_scaling.factor == 8.0);
    // layer_types, where a file has it, decides; a type the block lacks is refused by its index.
    const std::string base = R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 64,
                                 "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 128,
                                 "num_hidden_layers": 3, "sliding_window": 8)";
    const ModelConfig lt = parse_hf_config(
        base + R"(, "layer_types": ["full_attention", "sliding_attention", "full_attention"]})", "g.json");
    CHECK(lt.pattern.sliding == std::vector<bool>{false, true, false});
    CHECK_THROWS_WITH(parse_hf_config(base + R"(, "layer_types": ["full_attention", "chunked_attention", "full_attention"]})", "g.json"),
                      Catch::Contains("g.json: layer_types[1]: \"chunked_attention\": Llama 4's chunked attention"));
    CHECK_THROWS_WITH(parse_hf_config(base + R"(, "layer_types": ["full_attention"]})", "g.json"),
                      Catch::Contains("g.json: layer_types: expected a list of num_hidden_layers = 3"));
    // SmolLM3's NoPE layers: no_rope_layers (1: RoPE), or every 4th when absent.
    const std::string smol = R"({"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128, "num_hidden_layers": 4)";
    CHECK(parse_hf_config(smol + "}", "s.json").pattern.nope == std::vector<bool>{false, false, false, true});
    CHECK(parse_hf_config(smol + R"(, "no_rope_layers": [0, 1, 1, 1]})", "s.json").pattern.nope ==
          std::vector<bool>{true, false, false, false});
    CHECK(parse_hf_config(smol + R"(, "no_rope_layers": [0, 1, 1, 1]})", "s.json").layer_block(0).nope);
    CHECK(parse_hf_config(smol + "}", "s.json").tie_embeddings);
    CHECK_THROWS_WITH(parse_hf_config(smol + R"(, "no_rope_layers": [1, 2, 1, 1]})", "s.json"),
                      Catch::Contains("s.json: no_rope_layers[1]: expected 0 (NoPE) or 1 (RoPE), found 2"));
    CHECK_THROWS_WITH(parse_hf_config(smol + R"(, "no_rope_layers": [1, 1]})", "s.json"),
                      Catch::Contains("s.json: no_rope_layers: expected a list of num_hidden_layers = 4"));
    // gpt-oss: its attention read (biases on q, k, v and o_proj, a sink per head, layer 0 sliding then
    // alternating, window 128 by default); its experts named, never run as SwiGLU; its RoPE YaRN with
    // truncate: false, GptOssConfig's default when rope_scaling is absent.
    const std::string oss = R"({"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32, "num_hidden_layers": 4,
        "num_local_experts": 8, "num_experts_per_tok": 2)";
    const ModelConfig go = parse_hf_config(oss + R"(, "rope_scaling": {"rope_type": "default"}})", "o.json");
    CHECK(go.block.qkv_bias);
    CHECK(go.o_bias);
    CHECK(go.block.attn_sinks);
    CHECK(go.block.sliding_window == 128);
    CHECK(go.pattern.sliding == std::vector<bool>{true, false, true, false});
    CHECK_THAT(go.ffn_unmodelled, Catch::Contains("a mixture of 8 experts, 2 per token"));
    const ModelConfig go_nb = parse_hf_config(oss + R"(, "attention_bias": false, "rope_scaling": {"rope_type": "default"}})", "o.json");
    CHECK_FALSE(go_nb.block.qkv_bias);
    CHECK_FALSE(go_nb.o_bias);
    CHECK(go.block.rope_scaling.type == RopeScalingType::none);
    const ModelConfig go_default = parse_hf_config(oss + "}", "o.json");
    const RopeScaling& d = go_default.block.rope_scaling;
    CHECK(d.type == RopeScalingType::yarn);
    CHECK(d.factor == 32.0);
    CHECK(d.original_max_position == 4096);
    CHECK(d.beta_fast == 32.0);
    CHECK(d.beta_slow == 1.0);
    CHECK(d.attention_factor == Approx(0.1 * std::log(32.0) + 1.0));
    CHECK_FALSE(d.truncate);
    CHECK_THAT(Catch::Detail::stringify(go_default.defaults), Catch::Contains("rope_scaling: absent, took GptOssConfig's default"));
    const ModelConfig go_yarn = parse_hf_config(oss + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "beta_fast": 32.0,
        "beta_slow": 1.0, "truncate": false, "original_max_position_embeddings": 4096}})", "o.json");
    CHECK_FALSE(go_yarn.block.rope_scaling.truncate);
    CHECK(go_yarn.block.rope_scaling == d);
    // truncate: HF's default true; anything but a boolean refused, naming the field.
    const std::string yarn = R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768)";
    CHECK(parse_hf_config(oss + yarn + "}}", "o.json").block.rope_scaling.truncate);
    CHECK(parse_hf_config(oss + yarn + R"(, "truncate": true}})", "o.json").block.rope_scaling.truncate);
    CHECK_THROWS_WITH(parse_hf_config(oss + yarn + R"(, "truncate": 0}})", "o.json"),
                      Catch::Contains("o.json: rope_scaling.truncate: expected true or false, found 0"));
    // Which ops such a model pins: not those that run its experts, nor latent
    // attention (it has none); its YaRN rotates as it says.
    for (Op op : kAllOps) {
        INFO(to_string(op));
        const bool left_out = op == Op::swiglu || op == Op::block || op == Op::decode || op == Op::mla_attention;
        CHECK(unmodelled_for(go, op).empty() == !left_out);
        CHECK(unmodelled_for(go_yarn, op).empty() == !left_out);
    }
    // Qwen2's window from max_window_layers on.
    const ModelConfig q = parse_hf_config(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "num_hidden_layers": 4, "sliding_window": 16,
        "use_sliding_window": true, "max_window_layers": 2})", "q.json");
    CHECK(q.pattern.sliding == std::vector<bool>{false, false, true, true});
    CHECK(q.block.sliding_window == 16);
}

TEST_CASE("Gemma 1 reads as (1 + w) norms, GeGLU, tied embeddings times sqrt(D)", "[config]") {
    const ModelConfig g = load_hf_config(kConfigs + "gemma-2b.json");
    CHECK(g.architecture == "GemmaForCausalLM");
    CHECK(g.block.norm_plus_one);
    CHECK(g.block.hidden_act == HiddenAct::gelu_tanh);  // hidden_act "gelu" is not what GemmaMLP runs
    CHECK(g.tie_embeddings);
    CHECK(g.embedding_multiplier == std::sqrt(2048.0));
    CHECK(g.block.head_dim == 256);
    auto has = [](const std::vector<std::string>& v, const std::string& s) {
        return std::any_of(v.begin(), v.end(), [&](const std::string& l) { return l.find(s) != std::string::npos; });
    };
    CHECK(has(g.notes, "hidden_act: \"gelu\" not used: GemmaMLP takes hidden_activation"));
    CHECK(has(g.defaults, "hidden_activation: absent, took gelu_pytorch_tanh"));
    CHECK(has(g.defaults, "tie_word_embeddings: absent, took true"));
    // hidden_activation is Gemma's field and is read; an exact GELU there is refused.
    const std::string base = R"({"architectures": ["GemmaForCausalLM"], "model_type": "gemma", "hidden_size": 64,
                                 "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "intermediate_size": 128,
                                 "num_hidden_layers": 1)";
    CHECK(parse_hf_config(base + ", \"hidden_activation\": \"silu\"}", "g.json").block.hidden_act == HiddenAct::silu);
    CHECK_THROWS_WITH(parse_hf_config(base + ", \"hidden_activation\": \"gelu\"}", "g.json"),
                      Catch::Contains("g.json: hidden_activation: expected \"silu\" (SwiGLU) or \"gelu_pytorch_tanh\""));
    CHECK_THROWS_WITH(parse_hf_config(base + ", \"attention_bias\": true}", "g.json"),
                      Catch::Contains("g.json: attention_bias: true: GemmaForCausalLM then adds a bias to o_proj"));
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

TEST_CASE("rope_scaling: rope_type or the legacy type, null, default, and HF's defaults resolved", "[config]") {
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

TEST_CASE("hidden_act gelu_pytorch_tanh reads as GeGLU, silu and its absence as SwiGLU", "[config]") {
    const std::string base = kMinimalLlama;
    CHECK(parse_hf_config(base + "}", "a.json").block.hidden_act == HiddenAct::silu);
    CHECK(parse_hf_config(base + ", \"hidden_act\": \"silu\"}", "b.json").block.hidden_act == HiddenAct::silu);
    CHECK(parse_hf_config(base + ", \"hidden_act\": \"gelu_pytorch_tanh\"}", "c.json").block.hidden_act ==
          HiddenAct::gelu_tanh);
    // hidden_activation (Gemma's) is read after hidden_act, as transformers' Gemma prefers it.
    CHECK(parse_hf_config(base + ", \"hidden_act\": \"silu\", \"hidden_activation\": \"gelu_pytorch_tanh\"}", "d.json")
              .block.hidden_act == HiddenAct::gelu_tanh);
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
    CHECK_THAT(refusal(R"({"hidden_act": 3})"), Catch::Contains("x.json: hidden_act: expected \"silu\""));
    // "gelu_tanh" is conform's own spelling, not transformers': ACT2FN has no such key.
    CHECK_THAT(refusal(R"({"hidden_act": "gelu_tanh"})"), Catch::Contains("x.json: hidden_act: expected \"silu\""));
    CHECK_THAT(refusal(R"({"hidden_activation": "gelu_new"})"),
               Catch::Contains("x.json: hidden_activation: expected \"silu\" (SwiGLU) or \"gelu_pytorch_tanh\""));
    CHECK_THAT(refusal(base + ", \"partial_rotary_factor\": 1.5}"), Catch::Contains("x.json: partial_rotary_factor"));
    CHECK_THAT(refusal(R"({"head_dim": 7})"), Catch::Contains("x.json: head_dim: RoPE rotates pairs"));
    // The served twists the block does not model: refused by field or architecture, never run as Llama.
    CHECK_THAT(refusal(base + ", \"attention_bias\": true}"),
               Catch::Contains("x.json: attention_bias: true: LlamaForCausalLM then adds a bias to o_proj"));
    CHECK_THAT(refusal(base + ", \"mlp_bias\": true}"), Catch::Contains("x.json: mlp_bias: true"));
    CHECK_THAT(refusal(base + ", \"attn_logit_softcapping\": 50.0}"),
               Catch::Contains("x.json: attn_logit_softcapping: 50.0: attention logit soft-capping"));
    CHECK_THAT(refusal(base + R"(, "layer_types": ["sliding_attention", "chunked_attention", "full_attention", "full_attention"]})"),
               Catch::Contains("x.json: layer_types[1]: \"chunked_attention\": Llama 4's chunked attention"));
    CHECK_THAT(refusal(base + ", \"num_local_experts\": 8}"), Catch::Contains("x.json: num_local_experts: 8: a mixture"));
    CHECK_THAT(refusal(base + ", \"no_rope_layers\": [1, 1, 1, 0]}"), Catch::Contains("x.json: no_rope_layers: [1,1,1,0]: layers without RoPE"));
    CHECK_THAT(refusal(base + ", \"attention_chunk_size\": 8192}"),
               Catch::Contains("x.json: attention_chunk_size: 8192: chunked attention: the block models it"));
    CHECK_THAT(refusal(base + ", \"query_pre_attn_scalar\": 144}"), Catch::Contains("x.json: query_pre_attn_scalar: 144"));
    CHECK_THAT(refusal(R"({"model_type": "gemma3"})"), Catch::Contains("x.json: model_type: \"gemma3\" (gemma3) has a vision tower"));
    CHECK_THAT(refusal(R"({"model_type": "llama4"})"), Catch::Contains("x.json: model_type: \"llama4\" (llama4) has a vision tower") &&
                                                            Catch::Contains("its text_config, model_type llama4_text"));
    // A mixture of experts is read where the moe ops compute it (Mixtral, Qwen2/3-MoE), its bad counts refused.
    CHECK_THAT(refusal(R"({"model_type": "qwen3_moe", "num_experts": 4, "num_experts_per_tok": 5})"),
               Catch::Contains("x.json: num_experts_per_tok: must be in [1, num_experts = 4], found 5"));
    CHECK_THAT(refusal(R"({"model_type": "mixtral", "num_local_experts": 0})"),
               Catch::Contains("x.json: num_local_experts: expected a positive integer"));
    CHECK_THAT(refusal(R"({"model_type": "qwen2_moe", "norm_topk_prob": "yes"})"),
               Catch::Contains("x.json: norm_topk_prob: expected true or false"));
    // ... and their "off" values are not twists.
    CHECK_NOTHROW(parse_hf_config(base + R"(, "attention_bias": false, "mlp_bias": false, "attn_logit_softcapping": null,
                                      "layer_types": ["full_attention", "full_attention", "full_attention", "full_attention"],
                                      "num_local_experts": 0})", "x.json"));

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

namespace {

// The convention of config/anatomy.h written out by hand, op by op, as the
// code read before the table existed: the table must say the same.
struct Closed {
    std::vector<std::pair<std::string, std::array<double, 3>>> ops;  // name, {params, flops, bytes}
    double kv_layer, kv_mha, kv_cache, model_params, model_flops, model_bytes, embed_bytes, head_params, head_flops, head_bytes;
};

Closed closed_form(const ModelConfig& m, double T, double C, double es) {
    const BlockConfig& c = m.block;
    const double D = c.d_model, F = c.ffn_dim, H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim, rd = c.rotary();
    const double Q = H * hd, KVW = KV * hd, S = C + T, L = m.layers, V = m.vocab;
    // A query at position p sees min(W, p + 1) keys (all p + 1 without a window), counted one by one;
    // the chunk reads the cache's keys its first query sees: C, or W - 1 of them.
    const double W = static_cast<double>(c.sliding_window);
    double pairs = 0;
    for (double p = C; p < S; ++p) pairs += W > 0 ? std::min(W, p + 1) : p + 1;
    const double Cr = W > 0 ? std::min(C, W - 1) : C;
    Closed r;
    auto mm = [&](const char* n, double in, double out) {
        r.ops.push_back({n, {in * out, 2 * T * in * out, es * (T * in + in * out + T * out)}});
    };
    auto norm = [&](const char* n) { r.ops.push_back({n, {D, 4 * T * D, es * (2 * T * D + D)}}); };
    norm("attn_norm");
    mm("q_proj", D, Q);
    mm("k_proj", D, KVW);
    mm("v_proj", D, KVW);
    if (c.qkv_bias) r.ops.push_back({"qkv_bias", {Q + 2 * KVW, T * (Q + 2 * KVW), es * (2 * T * (Q + 2 * KVW) + Q + 2 * KVW)}});
    if (c.qk_norm) r.ops.push_back({"qk_norm", {2 * hd, 4 * T * (Q + KVW), es * (2 * T * (Q + KVW) + 2 * hd)}});
    r.ops.push_back({"rope", {0, 3 * T * (H + KV) * rd, es * 2 * T * (Q + KVW)}});
    r.ops.push_back({"attention", {0, 4 * hd * H * pairs + 5 * H * pairs, es * (2 * T * Q + 2 * (T + Cr) * KVW)}});
    mm("o_proj", Q, D);
    r.ops.push_back({"residual_attn", {0, T * D, es * 3 * T * D}});
    norm("ffn_norm");
    mm("gate_proj (w1)", D, F);
    mm("up_proj (w3)", D, F);
    r.ops.push_back({"silu_mul", {0, 5 * T * F, es * 3 * T * F}});
    mm("down_proj (w2)", F, D);
    r.ops.push_back({"residual_ffn", {0, T * D, es * 3 * T * D}});
    double p = 0, f = 0, b = 0;
    for (const auto& [n, v] : r.ops) p += v[0], f += v[1], b += v[2];
    r.model_params = L * p + D;
    r.model_flops = L * f + 4 * T * D;
    r.model_bytes = L * b + es * (2 * T * D + D);
    r.embed_bytes = es * 2 * T * D;
    r.head_params = m.tie_embeddings ? 0 : V * D;
    r.head_flops = 2 * T * D * V;
    r.head_bytes = es * (T * D + D * V + T * V);
    r.kv_layer = 2 * KVW * es;
    r.kv_mha = 2 * Q * es;
    r.kv_cache = (W > 0 ? std::min(S, W) : S) * L * r.kv_layer;  // a window keeps its last W tokens
    return r;
}

std::vector<ModelConfig> anatomy_models() {
    std::vector<ModelConfig> ms;
    for (const auto& p : presets())
        if (unmodelled_for(p.model(), Op::block).empty()) ms.push_back(p.model());
    ModelConfig partial = load_hf_config(kConfigs + "llama3.1-8b.json");
    partial.block.rotary_dim = 32;  // partial rotary: RoPE counts the rotated dims only
    ms.push_back(partial);
    // Sliding windows shorter than, inside and longer than the contexts the test takes (C = 0, 33, 4095).
    for (int64_t w : {1, 40, 100, 5000}) {
        ModelConfig windowed = load_hf_config(kConfigs + "llama3.1-8b.json");
        windowed.block.sliding_window = w;
        windowed.name += " window " + std::to_string(w);
        ms.push_back(windowed);
    }
    return ms;
}

void same(const Anatomy& a, const Anatomy& b) {
    REQUIRE(a.ops.size() == b.ops.size());
    for (size_t i = 0; i < a.ops.size(); ++i) {
        CHECK(a.ops[i].name == b.ops[i].name);
        CHECK(a.ops[i].params == b.ops[i].params);
        CHECK(a.ops[i].flops == b.ops[i].flops);
        CHECK(a.ops[i].bytes == b.ops[i].bytes);
        REQUIRE(a.ops[i].outputs.size() == b.ops[i].outputs.size());
        for (size_t k = 0; k < a.ops[i].outputs.size(); ++k) CHECK(a.ops[i].outputs[k].dims == b.ops[i].outputs[k].dims);
    }
    for (auto [x, y] : {std::pair{&a.layer, &b.layer}, {&a.model, &b.model}, {&a.embedding, &b.embedding},
                        {&a.lm_head, &b.lm_head}}) {
        CHECK(x->params == y->params);
        CHECK(x->flops == y->flops);
        CHECK(x->bytes == y->bytes);
    }
    CHECK(a.kv_bytes_per_token_layer == b.kv_bytes_per_token_layer);
    CHECK(a.kv_bytes_per_token_layer_mha == b.kv_bytes_per_token_layer_mha);
    CHECK(a.kv_bytes_per_token_model == b.kv_bytes_per_token_model);
    CHECK(a.kv_cache_bytes == b.kv_cache_bytes);
}

}  // namespace

TEST_CASE("anatomy: the formula table says what the convention says, for every preset", "[config][anatomy]") {
    for (const ModelConfig& m : anatomy_models())
        for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 0}, {1, 4095}, {7, 0}, {512, 0}, {64, 33}})
            for (double es : {2.0, 4.0}) {
                INFO(m.name << " T=" << T << " C=" << C << " es=" << es);
                const Anatomy a = anatomy(m, T, C, es);
                const Closed r = closed_form(m, static_cast<double>(T), static_cast<double>(C), es);
                REQUIRE(a.ops.size() == r.ops.size());
                for (size_t i = 0; i < r.ops.size(); ++i) {
                    INFO(r.ops[i].first);
                    CHECK(a.ops[i].name == r.ops[i].first);
                    // Integers below 2^53 on both sides: exact, whatever the order.
                    CHECK(a.ops[i].params == r.ops[i].second[0]);
                    CHECK(a.ops[i].flops == r.ops[i].second[1]);
                    CHECK(a.ops[i].bytes == r.ops[i].second[2]);
                }
                CHECK(a.model.params == r.model_params);
                CHECK(a.model.flops == r.model_flops);
                CHECK(a.model.bytes == r.model_bytes);
                CHECK(a.embedding.params == m.vocab * m.block.d_model);
                CHECK(a.embedding.bytes == r.embed_bytes);
                CHECK(a.lm_head.params == r.head_params);
                CHECK(a.lm_head.flops == r.head_flops);
                CHECK(a.lm_head.bytes == r.head_bytes);
                CHECK(a.kv_bytes_per_token_layer == r.kv_layer);
                CHECK(a.kv_bytes_per_token_layer_mha == r.kv_mha);
                CHECK(a.kv_cache_bytes == r.kv_cache);
            }
    // Output shapes come from the same table: q_proj writes [T, H*hd].
    const Anatomy q = anatomy(find_preset("qwen3-0.6b")->model(), 5, 0, 2.0);
    CHECK(q.ops[1].name == "q_proj");
    REQUIRE(q.ops[1].outputs.size() == 1);
    CHECK(q.ops[1].outputs[0].dims == std::vector<double>{5, 16 * 128});
    CHECK(q.ops[4].name == "qk_norm");
    CHECK(q.ops[4].outputs.size() == 2);  // q and k, in place
}

TEST_CASE("anatomy: the JSON the page embeds is the table anatomy() evaluates", "[config][anatomy]") {
    const nlohmann::json j = to_json(formula_table());
    CHECK(j["schema"] == "conform-anatomy-formulas/1");
    // Through text, as the page reads it.
    const FormulaTable back = formula_table_from_json(nlohmann::json::parse(j.dump()));
    CHECK(back == formula_table());
    for (const ModelConfig& m : anatomy_models())
        for (auto [T, C] : {std::pair<int64_t, int64_t>{1, 0}, {3, 100}, {2048, 0}}) {
            INFO(m.name << " T=" << T << " C=" << C);
            same(anatomy(m, T, C, 2.0, back), anatomy(m, T, C, 2.0));
        }
    // A changed coefficient is a different table, and different numbers.
    nlohmann::json changed = j;
    changed["ops"][0]["lanes"][0]["flops"][0][0] = 5.0;
    const FormulaTable other = formula_table_from_json(changed);
    CHECK_FALSE(other == formula_table());
    const ModelConfig tiny = find_preset("tinyllama-1.1b")->model();
    CHECK(anatomy(tiny, 1, 0, 2.0, other).layer.flops == anatomy(tiny, 1, 0, 2.0).layer.flops + 2048);

    // Malformed tables name the field.
    auto refusal = [](nlohmann::json x) {
        try {
            formula_table_from_json(x);
        } catch (const std::invalid_argument& e) {
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    nlohmann::json bad = j;
    bad["ops"][2]["lanes"][0]["flops"] = "2*T*D";
    CHECK_THAT(refusal(bad), Catch::Contains("ops[2].lanes[0].flops: expected an array of terms"));
    bad = j;
    bad.erase("symbols");
    CHECK_THAT(refusal(bad), Catch::Contains("missing field 'symbols'"));
    bad = j;
    bad["schema"] = "conform-anatomy-formulas/2";
    CHECK_THAT(refusal(bad), Catch::Contains("schema"));
    bad = j;
    bad["tensors"][0]["weight"] = 1;
    CHECK_THAT(refusal(bad), Catch::Contains("tensors[0].weight: expected true or false"));
    // A table that names a symbol nothing binds fails when evaluated.
    FormulaTable unknown = formula_table();
    unknown.ops[0].lanes[0].flops = {Term{4, {"T", "Dmodel"}}};
    CHECK_THROWS_WITH(anatomy(tiny, 1, 0, 2.0, unknown), Catch::Contains("unknown symbol 'Dmodel'"));
    CHECK(format_expr(formula_table().ops[7].lanes[0].flops) == "4·hd·H·pairs + 5·H·pairs");
}

TEST_CASE("call_cost: an op's lanes run as one call, as bench times them", "[config][anatomy]") {
    ModelConfig m = find_preset("tinyllama-1.1b")->model();
    const double D = 2048, F = 5632, Q = 32 * 64, KVW = 4 * 64, T = 64, es = 4;
    // One op alone: what anatomy() counts for it.
    const Anatomy a = anatomy(m, 64, 0, es);
    const CallCost norm = call_cost(m, 64, 0, es, {"attn_norm"});
    CHECK(norm.flops == a.ops[0].flops);
    CHECK(norm.bytes == a.ops[0].bytes);
    CHECK(norm.weight_bytes == 0);
    // The q lane of RoPE: [T, H*hd] in and out.
    const CallCost rope = call_cost(m, 64, 0, es, {"rope:q"});
    CHECK(rope.flops == 3 * T * Q);
    CHECK(rope.bytes == es * 2 * T * Q);
    // The FFN fused: the T x F activations stay inside the call.
    const CallCost ffn = call_cost(m, 64, 0, es, {"gate_proj (w1)", "up_proj (w3)", "silu_mul", "down_proj (w2)"});
    CHECK(ffn.flops == 6 * T * D * F + 5 * T * F);
    CHECK(ffn.bytes == es * (3 * D * F + 2 * T * D));
    CHECK(ffn.weight_bytes == es * 3 * D * F);
    // The layer: its weights, x in, out and the new K and V rows out.
    const double weights = D * (Q + 2 * KVW) + Q * D + 3 * D * F;
    const CallCost block = call_cost(m, 64, 0, es, {"layer"});
    CHECK(block.flops == a.layer.flops);
    CHECK(block.weight_bytes == es * weights);
    CHECK(block.bytes == es * (weights + 2 * D) + es * (2 * T * D + 2 * T * KVW));
    // A decode step also reads the C cached rows of K and V.
    const CallCost step = call_cost(m, 1, 500, es, {"layer"});
    CHECK(step.bytes == es * (weights + 2 * D) + es * (2 * D + 2 * KVW + 2 * 500 * KVW));
    // Attention after a cache: q, the cache's K and V, the new row, the output.
    const CallCost att = call_cost(m, 1, 500, es, {"attention"});
    CHECK(att.flops == 4 * 64 * 32 * 501.0 + 5 * 32 * 501.0);
    CHECK(att.bytes == es * (2 * Q + 2 * 501 * KVW));
    // QK-norm's q lane exists only where the model has QK-norm.
    CHECK_THROWS_WITH(call_cost(m, 1, 0, es, {"qk_norm:q"}), Catch::Contains("'qk_norm:q' is not an op"));
    m.block.qk_norm = true;
    const CallCost qn = call_cost(m, 64, 0, es, {"qk_norm:q"});
    CHECK(qn.flops == 4 * T * Q);
    CHECK(qn.bytes == es * (2 * T * Q + 64));
    CHECK_THROWS_WITH(call_cost(m, 1, 0, es, {"rope:v"}), Catch::Contains("'rope:v'"));
}

TEST_CASE("anatomy page: the table, every preset and the configuration, embedded", "[config][anatomy]") {
    report::AnatomyPage p;
    p.model = resolve_args({"--preset", "tinyllama-1.1b", "--kv-heads", "8"});
    p.tokens = 300;
    p.context = 7;
    p.dtype = "bf16";
    p.ridge = report::assumed_ridge();
    p.model.notes.push_back("a note with </script> in it");  // must not end the data block
    const std::string html = report::render_anatomy_html(p);
    const std::string open = "<script type=\"application/json\" id=\"anatomy-data\">";
    const size_t at = html.find(open);
    REQUIRE(at != std::string::npos);
    const size_t end = html.find("</script>", at);
    REQUIRE(end != std::string::npos);
    const nlohmann::json data = nlohmann::json::parse(html.substr(at + open.size(), end - at - open.size()));
    CHECK(data["formulas"] == to_json(formula_table()));
    // Every preset whose whole block is the model (gpt-oss's experts are not priced as a dense FFN).
    const auto whole = std::count_if(presets().begin(), presets().end(),
                                     [](const Preset& q) { return unmodelled_for(q.model(), Op::block).empty(); });
    CHECK(data["presets"].size() == static_cast<size_t>(whole));
    CHECK(whole == static_cast<long>(presets().size()) - 8);  // gpt-oss x 2, mixtral, qwen3-moe, qwen1.5-moe, olmoe, deepseek-v3, llama4-scout
    CHECK(data["initial"]["config"] == config_json(p.model));
    CHECK(data["initial"]["config"]["notes"][0] == "a note with </script> in it");
    CHECK(data["initial"]["tokens"] == 300);
    CHECK(data["initial"]["context"] == 7);
    CHECK(data["initial"]["dtype"] == "bf16");
    CHECK(data["given"].is_null());  // a preset: the picker opens on it
    CHECK(data["presets"][data["initial"]["choice"].get<int>()]["name"] == "tinyllama-1.1b");
    CHECK(data["ridge"]["flops_per_byte"] == Approx(295.2).epsilon(1e-3));
    CHECK(data["ridge"]["measured"] == false);
    CHECK(html.find("@DATA@") == std::string::npos);
    CHECK(html.find("<title>conform anatomy: tinyllama-1.1b</title>") != std::string::npos);

    // A config.json: the picker's first entry, its base the file as read.
    p.model = load_hf_config(kConfigs + "qwen3-8b.json");
    const std::string h2 = report::render_anatomy_html(p);
    const size_t a2 = h2.find(open);
    const nlohmann::json d2 = nlohmann::json::parse(h2.substr(a2 + open.size(), h2.find("</script>", a2) - a2 - open.size()));
    CHECK(d2["given"]["flag"] == "--config " + kConfigs + "qwen3-8b.json");
    CHECK(d2["given"]["base"]["n_kv_heads"] == 8);
    CHECK(d2["initial"]["choice"] == 0);
}

TEST_CASE("anatomy page: where it may be written", "[config][anatomy]") {
    const std::string dir = std::string(CONFORM_SOURCE_DIR) + "/fixtures";
    CHECK(report::html_target_problem("", false) == "empty file name");
    CHECK_THAT(report::html_target_problem("/nonexistent-dir/a.html", false), Catch::Contains("/nonexistent-dir does not exist"));
    CHECK_THAT(report::html_target_problem(dir, false), Catch::Contains("is a directory"));
    CHECK_THAT(report::html_target_problem("/dev/null", false), Catch::Contains("not a regular file"));
    CHECK_THAT(report::html_target_problem(dir + "/SCHEMA.md/x.html", false), Catch::Contains("is not a directory"));
    // A regular file is replaced only with --force (docs/inputs.md).
    CHECK_THAT(report::html_target_problem(dir + "/SCHEMA.md", false), Catch::Contains("exists (use --force"));
    CHECK(report::html_target_problem(dir + "/SCHEMA.md", true).empty());
}

TEST_CASE("a pinned configuration fixes every drawn case's conventions and sizes", "[config][gen]") {
    BlockConfig c = load_hf_config(kConfigs + "llama3.1-8b.json").block;
    c = scale_down(c, 16);
    c.rope_layout = RopeLayout::interleaved;
    ModelConfig dense;
    dense.name = "llama3.1-8b";
    dense.block = c;
    for (Op op : kAllOps)
        for (int i = 0; i < 30 && unmodelled_for(dense, op).empty(); ++i) {  // (a dense FFN: no moe; no latent attention)
            const gen::CaseSpec s = gen::draw(gen::Stream{op, 7, c, nullptr}, i);
            INFO(gen::canonical_id(s));
            const OpInfo& info = op_info(op);
            if (info.uses(kRope)) {
                CHECK(s.config.rope_layout == RopeLayout::interleaved);
                CHECK(s.config.rope_theta == 5e5);
                CHECK(s.config.rope_scaling == c.rope_scaling);
                CHECK(s.config.rotary_dim == 0);
            }
            if (info.reads("head_dim")) CHECK(s.config.head_dim == 128);
            if (info.uses(kHeads)) CHECK((s.config.n_heads == 32 && s.config.n_kv_heads == 8));
            if (info.has_dim(Dim::D)) CHECK(s.config.d_model == 256);
            if (info.has_dim(Dim::F)) CHECK(s.config.ffn_dim == 896);
            // The id alone rebuilds the pinned case, without the pin.
            CHECK(gen::canonical_id(*gen::parse_case_id(gen::canonical_id(s))) == gen::canonical_id(s));
        }
    // Shrinking stays inside the configuration.
    const gen::Shrunk sh = gen::shrink(gen::Stream{Op::block, 7, c, nullptr}, 3, [](const gen::CaseSpec&) { return true; });
    CHECK(sh.spec.config.head_dim == 128);
    CHECK(sh.spec.config.rope_scaling == c.rope_scaling);
    // An unpinned stream of the same seed draws freely.
    bool other = false;
    for (int i = 0; i < 30; ++i) other = other || gen::draw(Op::rope, 7, i).config.head_dim != 128;
    CHECK(other);
}

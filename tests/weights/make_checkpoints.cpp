// Writes the tests' tiny checkpoints into a directory, for the command's
// tests (conform forward --weights ...) and for looking at:
//
//   weights_checkpoints DIR [seed]
//
//   DIR/llama-hf/            config.json + model.safetensors (F32), LlamaForCausalLM, GQA 4/2
//   DIR/llama-hf-bf16/       the same in BF16;  llama-hf-f16/ in F16
//   DIR/llama-hf-sharded/    the same in 3 shards + model.safetensors.index.json
//   DIR/llama.gguf           the same model as llama.cpp's converter writes it (q/k permuted), F32
//   DIR/llama-f16.gguf, llama-q8_0.gguf, llama-q4_0.gguf
//   DIR/llama3-hf/, llama3.gguf   head_dim 64, theta 500000, llama3 scaling (rope_freqs.weight)
//   DIR/qwen3-hf/, qwen3.gguf     head_dim 32 != d/H, QK-norm, tied embeddings
//   DIR/qwen2-hf/, qwen2.gguf     q, k, v projection biases (k's mean 4), theta 1e6
//   DIR/gemma-hf/, gemma.gguf     Gemma 1: (1 + w) norms (the GGUF's stored as 1 + w), GeGLU,
//                                 embedding x sqrt(D), MQA, head_dim 32 != D/H, tied embeddings
//   DIR/gemma2-hf/, gemma2.gguf   Gemma 2: sandwich norms, soft-caps 5 / 10, sliding (window 3) and
//                                 full layers alternating, GQA 2, head_dim 32 != D/H, 3 layers
//   DIR/gemma3-hf/, gemma3.gguf   Gemma 3: QK-norm, 5 sliding layers (window 3, RoPE base 10000)
//                                 then a full one (theta 1e6), MQA, 6 layers
//   DIR/mistral-hf/, mistral.gguf Mistral v0.1's window (3) on every layer; the GGUF is llama.cpp's
//                                 llama conversion, whose graph has no window
//   DIR/smollm3-hf/, smollm3.gguf SmolLM3: Llama's block with layer 3 of 4 NoPE (no_rope_layers; llama.cpp
//                                 fixes every 4th), theta 2e6, GQA 2
//   DIR/gptoss-hf/, gptoss.gguf  gpt-oss's attention: q/k/v and o_proj biases, a sink per head, layers
//                                 sliding (window 3) / full alternating from layer 0, theta 1.5e5; and a
//                                 mixture of 4 experts (2 used), which conform reads around, not computes
//   DIR/llama-k.gguf, llama-k-q4_k_m.gguf, llama-k-q5_k_m.gguf
//                                 D 256 (K-quant super-blocks need rows of 256), 3 layers;
//                                 F32, and mixed as llama.cpp's Q4_K_M / Q5_K_M lay them out
//
// Every model is the same seeded random draw in each of its formats.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "weights/writers.h"

using namespace conform;
using namespace conform::weights::testing;

int main(int argc, char** argv) {
    if (argc < 2 || argc > 3) {
        std::cerr << "usage: weights_checkpoints DIR [seed]\n";
        return 2;
    }
    const std::filesystem::path dir = argv[1];
    const uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
    std::filesystem::create_directories(dir);
    auto path = [&](const std::string& name) { return (dir / name).string(); };

    ModelSpec llama;
    llama.seed = seed;
    const Model m = random_model(llama);
    write_hf(m, path("llama-hf"));
    write_hf(m, path("llama-hf-bf16"), "BF16");
    write_hf(m, path("llama-hf-f16"), "F16");
    write_hf(m, path("llama-hf-sharded"), "F32", 3);
    write_file(path("llama.gguf"), gguf_bytes(gguf_doc(m)));
    for (auto [type, name] : {std::pair{kGgmlF16, "llama-f16.gguf"}, std::pair{kGgmlQ8_0, "llama-q8_0.gguf"},
                              std::pair{kGgmlQ4_0, "llama-q4_0.gguf"}}) {
        GgufOptions o;
        o.matrices = type;
        write_file(path(name), gguf_bytes(gguf_doc(m, o)));
    }

    ModelSpec l3 = llama;
    l3.n_heads = 2, l3.n_kv_heads = 1, l3.head_dim = 64, l3.theta = 500000, l3.max_position = 131072;
    l3.scaling.type = RopeScalingType::llama3;
    l3.scaling.factor = 8, l3.scaling.low_freq_factor = 1, l3.scaling.high_freq_factor = 4;
    l3.scaling.original_max_position = 8192;
    const Model m3 = random_model(l3);
    write_hf(m3, path("llama3-hf"));
    write_file(path("llama3.gguf"), gguf_bytes(gguf_doc(m3)));

    ModelSpec q3 = llama;
    q3.arch = "qwen3", q3.head_dim = 32, q3.theta = 1e6, q3.eps = 1e-6, q3.tie = true;
    const Model mq = random_model(q3);
    write_hf(mq, path("qwen3-hf"));
    write_file(path("qwen3.gguf"), gguf_bytes(gguf_doc(mq)));

    ModelSpec q2 = llama;
    q2.arch = "qwen2", q2.theta = 1e6, q2.eps = 1e-6;
    const Model m2 = random_model(q2);
    write_hf(m2, path("qwen2-hf"));
    write_file(path("qwen2.gguf"), gguf_bytes(gguf_doc(m2)));

    ModelSpec ge = llama;
    ge.arch = "gemma", ge.n_kv_heads = 1, ge.head_dim = 32, ge.ffn_dim = 128, ge.eps = 1e-6, ge.tie = true;
    const Model mg = random_model(ge);
    write_hf(mg, path("gemma-hf"));
    write_file(path("gemma.gguf"), gguf_bytes(gguf_doc(mg)));

    ModelSpec g2 = ge;
    g2.arch = "gemma2", g2.n_kv_heads = 2, g2.layers = 3, g2.window = 3, g2.attn_softcap = 5.0, g2.final_softcap = 10.0;
    const Model mg2 = random_model(g2);
    write_hf(mg2, path("gemma2-hf"));
    write_file(path("gemma2.gguf"), gguf_bytes(gguf_doc(mg2)));

    ModelSpec g3 = ge;
    g3.arch = "gemma3", g3.layers = 6, g3.window = 3, g3.theta = 1e6;
    const Model mg3 = random_model(g3);
    write_hf(mg3, path("gemma3-hf"));
    write_file(path("gemma3.gguf"), gguf_bytes(gguf_doc(mg3)));

    ModelSpec mi = llama;
    mi.arch = "mistral", mi.window = 3;
    const Model mmi = random_model(mi);
    write_hf(mmi, path("mistral-hf"));
    write_file(path("mistral.gguf"), gguf_bytes(gguf_doc(mmi)));

    ModelSpec sm = llama;
    sm.arch = "smollm3", sm.layers = 4, sm.theta = 2e6, sm.eps = 1e-6;
    const Model msm = random_model(sm);
    write_hf(msm, path("smollm3-hf"));
    write_file(path("smollm3.gguf"), gguf_bytes(gguf_doc(msm)));
    ModelSpec go = llama;
    go.arch = "gpt_oss", go.layers = 4, go.window = 3, go.theta = 150000, go.ffn_dim = 32;
    const Model mgo = random_model(go);
    write_hf(mgo, path("gptoss-hf"));
    write_file(path("gptoss.gguf"), gguf_bytes(gguf_doc(mgo)));

    ModelSpec lk = llama;
    lk.d_model = 256, lk.head_dim = 64, lk.ffn_dim = 512, lk.layers = 3;
    const Model mk = random_model(lk);
    write_file(path("llama-k.gguf"), gguf_bytes(gguf_doc(mk)));
    for (auto [type, name] : {std::pair{kGgmlQ4_K, "llama-k-q4_k_m.gguf"}, std::pair{kGgmlQ5_K, "llama-k-q5_k_m.gguf"}}) {
        GgufOptions o;
        o.matrices = type;
        o.k_mix = true;
        write_file(path(name), gguf_bytes(gguf_doc(mk, o)));
    }
    std::cout << "weights_checkpoints: wrote " << dir.string() << "\n";
    return 0;
}

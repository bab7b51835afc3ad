// Checkpoint readers (label weights): the same random model written as HF
// safetensors and as GGUF reads as the same weights once the converter's Q/K
// permutation is accounted for, and runs to the same logits through the
// scalar block; the storage types decode as their formulas say; qwen3's
// key_length and QK-norm, llama3's rope_freqs.weight and shards are detected;
// every malformed-file class is refused naming file, tensor and field.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>

#include "model/model.h"
#include "scalar/scalar.h"
#include "weights/checkpoint.h"
#include "weights/gguf.h"
#include "weights/rope_factors.h"
#include "weights/safetensors.h"
#include "weights/stored.h"
#include "weights/writers.h"

using namespace conform;
using namespace conform::weights;
using namespace conform::weights::testing;
namespace fs = std::filesystem;

namespace {

// A fresh directory per test, removed after it.
struct TmpDir {
    fs::path dir;
    TmpDir() {
        static int n = 0;
        dir = fs::temp_directory_path() / ("conform-weights-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        fs::remove_all(dir);
        fs::create_directories(dir);
    }
    ~TmpDir() { fs::remove_all(dir); }
    std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

ModelSpec llama_spec() {
    ModelSpec s;
    s.arch = "llama";
    s.d_model = 64, s.n_heads = 4, s.n_kv_heads = 2, s.head_dim = 16, s.ffn_dim = 96;
    s.layers = 2, s.vocab = 64, s.theta = 10000.0, s.eps = 1e-5, s.seed = 11;
    return s;
}

// Opens and decodes everything (some damage only shows when a tensor is decoded).
Checkpoint open_all(const std::string& path, const std::string& config = "") {
    Checkpoint c = Checkpoint::open(path, nullptr, config);
    for (int64_t l = 0; l < c.model().layers; ++l) c.layer(l);
    c.embedding();
    c.final_norm();
    c.lm_head();
    return c;
}

// The checkpoint must be refused with a one-line WeightsError holding every part.
void refused(const std::string& path, const std::vector<std::string>& parts, const std::string& config = "") {
    INFO("file " << path);
    try {
        open_all(path, config);
    } catch (const WeightsError& e) {
        const std::string msg = e.what();
        INFO("message: " << msg);
        CHECK(msg.find('\n') == std::string::npos);
        for (const auto& p : parts) {
            INFO("expected part: " << p);
            CHECK(msg.find(p) != std::string::npos);
        }
        return;
    }
    FAIL("loaded, but must be refused");
}

bool has_line(const Checkpoint& c, const std::string& s) {
    for (const auto& l : c.detected())
        if (l.find(s) != std::string::npos) return true;
    return false;
}

std::string lines(const Checkpoint& c) {
    std::string o;
    for (const auto& l : c.detected()) o += "  " + l + "\n";
    return o;
}

// The HF column a GGUF llama q/k column holds: within a head, GGUF's pair
// (2i, 2i+1) is HF's (i, i + hd/2) — what makes interleaved RoPE on the
// GGUF weights NeoX RoPE on HF's.
int64_t hf_column(int64_t j, int64_t hd) {
    const int64_t h = j / hd, r = j % hd, i = r / 2, t = r % 2;
    return h * hd + t * (hd / 2) + i;
}

double rel_error(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape == b.shape);
    double num = 0, den = 0;
    for (size_t k = 0; k < a.data.size(); ++k) {
        num = std::max(num, std::fabs(static_cast<double>(a.data[k]) - b.data[k]));
        den = std::max(den, std::fabs(static_cast<double>(b.data[k])));
    }
    return num / den;
}

// Embedding -> every layer's scalar block -> final norm -> LM head.
Tensor logits(const Checkpoint& ck, const BlockConfig& c, const std::vector<int64_t>& ids, const std::vector<int64_t>& pos) {
    const int64_t T = static_cast<int64_t>(ids.size());
    Tensor x = ck.embedding_rows(ids);
    for (int64_t l = 0; l < ck.model().layers; ++l) {
        const Named w = ck.layer(l);
        Tensor out(T, c.d_model);
        BlockOutputs o;
        o[Tap::out] = out.mut();
        scalar::block(x.view(), model::views(w, c), Positions{pos.data(), T}, c, o);
        x = std::move(out);
    }
    Tensor xn(T, c.d_model);
    scalar::rmsnorm(x.view(), ck.final_norm().view(), rmsnorm_params(c), xn.mut());
    const Tensor head = ck.lm_head();
    Tensor lg(T, head.cols());
    scalar::matmul(xn.view(), head.view(), lg.mut());
    return lg;
}

BlockConfig without_layout(BlockConfig c) {
    c.rope_layout = RopeLayout::neox;
    return c;
}
bool same_block(const BlockConfig& a, const BlockConfig& b) {
    const BlockConfig x = without_layout(a), y = without_layout(b);
    return x.d_model == y.d_model && x.n_heads == y.n_heads && x.n_kv_heads == y.n_kv_heads && x.head_dim == y.head_dim &&
           x.ffn_dim == y.ffn_dim && x.rope_theta == y.rope_theta && x.qk_norm == y.qk_norm && x.norm_eps == y.norm_eps &&
           x.rope_scaling == y.rope_scaling && x.rotary_dim == y.rotary_dim;
}

}  // namespace

TEST_CASE("safetensors and GGUF hold the same weights, GGUF's q/k columns the converter-permuted HF ones", "[weights]") {
    TmpDir tmp;
    const Model m = random_model(llama_spec());
    write_hf(m, tmp / "hf");
    write_file(tmp / "llama.gguf", gguf_bytes(gguf_doc(m)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf");
    const Checkpoint gg = Checkpoint::open(tmp / "llama.gguf");
    INFO("hf:\n" << lines(hf) << "gguf:\n" << lines(gg));

    CHECK(hf.format() == "safetensors");
    CHECK(gg.format() == "gguf");
    CHECK(hf.model().block.rope_layout == RopeLayout::neox);
    CHECK(gg.model().block.rope_layout == RopeLayout::interleaved);
    CHECK(same_block(hf.model().block, gg.model().block));
    CHECK(hf.model().layers == gg.model().layers);
    CHECK(hf.model().vocab == gg.model().vocab);
    CHECK(gg.model().max_position == 4096);
    CHECK(has_line(gg, "rope layout: interleaved (general.architecture = llama: llama.cpp runs llama with NORMAL rope "
                       "on the converter-permuted attn_q/attn_k)"));
    CHECK(has_line(gg, "norm_eps = 1e-05 (llama.attention.layer_norm_rms_epsilon)"));
    CHECK(has_line(gg, "head_dim = 16 (llama.attention.key_length absent: embedding_length / head_count)"));
    CHECK(has_line(gg, "GQA: 2 query heads per kv head (a Mistral-style llama)"));
    CHECK(has_line(hf, "rope layout: neox (safetensors: HF runs LlamaForCausalLM with rotate_half"));
    CHECK(has_line(hf, "F32 read as stored"));

    const int64_t hd = 16;
    for (int64_t l = 0; l < 2; ++l) {
        const Named a = hf.layer(l), b = gg.layer(l);
        REQUIRE(a.size() == 9);
        REQUIRE(b.size() == 9);
        for (const auto& [name, t] : a) {
            INFO("layer " << l << " " << name);
            REQUIRE(b.at(name).shape == t.shape);
            if (name == "wq" || name == "wk") {
                bool permuted = true, identical = true;
                for (int64_t r = 0; r < t.rows(); ++r)
                    for (int64_t j = 0; j < t.cols(); ++j) {
                        permuted &= b.at(name).data[r * t.cols() + j] == t.data[r * t.cols() + hf_column(j, hd)];
                        identical &= b.at(name).data[r * t.cols() + j] == t.data[r * t.cols() + j];
                    }
                CHECK(permuted);
                CHECK_FALSE(identical);  // the permutation is not the identity here
            } else {
                CHECK(b.at(name).data == t.data);
            }
        }
        // [in, out]: y = x @ W, i.e. the HF [out, in] weight transposed.
        const auto& hf_wo = m.tensors.at("model.layers." + std::to_string(l) + ".self_attn.o_proj.weight");
        CHECK(a.at("wo").shape == std::vector<int64_t>{64, 64});
        CHECK(a.at("wo").data[1 * 64 + 5] == hf_wo.data[5 * 64 + 1]);
        CHECK(a.at("attn_norm").shape == std::vector<int64_t>{1, 64});
    }
    CHECK(hf.embedding().data == gg.embedding().data);
    CHECK(hf.final_norm().data == gg.final_norm().data);
    CHECK(hf.lm_head().data == gg.lm_head().data);
    CHECK(hf.lm_head().shape == std::vector<int64_t>{64, 64});
    const Tensor cols = gg.lm_head_columns(10, 20), all = gg.lm_head();
    for (int64_t d = 0; d < 64; ++d)
        for (int64_t v = 0; v < 10; ++v) REQUIRE(cols.data[d * 10 + v] == all.data[d * 64 + 10 + v]);
    const Tensor rows = gg.embedding_rows({3, 0, 3}), embd = gg.embedding();
    CHECK(std::equal(rows.data.begin(), rows.data.begin() + 64, embd.data.begin() + 3 * 64));
    CHECK_THROWS_AS(gg.layer(2), WeightsError);
    CHECK_THROWS_AS(gg.embedding_rows({64}), WeightsError);
}

TEST_CASE("interleaved RoPE on GGUF's q/k scores as NeoX on HF's, the forward agrees, GGUF read as NeoX does not",
          "[weights]") {
    TmpDir tmp;
    const Model m = random_model(llama_spec());
    write_hf(m, tmp / "hf");
    write_file(tmp / "llama.gguf", gguf_bytes(gguf_doc(m)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf");
    const Checkpoint gg = Checkpoint::open(tmp / "llama.gguf");
    const BlockConfig& hc = hf.model().block;
    const BlockConfig& gc = gg.model().block;
    const std::vector<int64_t> ids = {1, 7, 33, 2, 60, 9, 14, 5}, pos = {100, 101, 102, 103, 104, 105, 106, 107};
    const int64_t T = 8;

    // q·k of layer 0 on the raw embeddings, per head and pair of tokens.
    const Tensor x = hf.embedding_rows(ids);
    auto scores = [&](const Checkpoint& ck, const BlockConfig& c) {
        const Named w = ck.layer(0);
        Tensor q(T, c.q_width()), k(T, c.kv_width());
        scalar::matmul(x.view(), w.at("wq").view(), q.mut());
        scalar::matmul(x.view(), w.at("wk").view(), k.mut());
        scalar::rope(q.view(), Positions{pos.data(), T}, rope_params(c), q.mut());
        scalar::rope(k.view(), Positions{pos.data(), T}, rope_params(c), k.mut());
        Tensor s(c.n_heads * T, T);
        for (int64_t h = 0; h < c.n_heads; ++h)
            for (int64_t i = 0; i < T; ++i)
                for (int64_t j = 0; j < T; ++j) {
                    double dot = 0;
                    for (int64_t d = 0; d < c.head_dim; ++d)
                        dot += static_cast<double>(q.data[i * c.q_width() + h * c.head_dim + d]) *
                               k.data[j * c.kv_width() + (h / c.group()) * c.head_dim + d];
                    s.data[(h * T + i) * T + j] = static_cast<float>(dot);
                }
        return s;
    };
    const Tensor s_hf = scores(hf, hc), s_gg = scores(gg, gc), s_wrong = scores(gg, without_layout(gc));
    CHECK(rel_error(s_gg, s_hf) < 1e-5);
    CHECK(rel_error(s_wrong, s_hf) > 1e-2);

    const Tensor l_hf = logits(hf, hc, ids, pos), l_gg = logits(gg, gc, ids, pos);
    const Tensor l_wrong = logits(gg, without_layout(gc), ids, pos);
    INFO("rel error of the logits: gguf " << rel_error(l_gg, l_hf) << ", gguf as neox " << rel_error(l_wrong, l_hf));
    CHECK(rel_error(l_gg, l_hf) < 1e-5);
    CHECK(rel_error(l_wrong, l_hf) > 1e-2);
}

TEST_CASE("float16 and bfloat16: the bits as IEEE and bfloat16 say, storage equal to the rounded F32", "[weights]") {
    CHECK(half_to_float(0x3C00) == 1.0f);
    CHECK(half_to_float(0xC000) == -2.0f);
    CHECK(half_to_float(0x7BFF) == 65504.0f);
    CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // the smallest subnormal
    CHECK(half_to_float(0x03FF) == std::ldexp(1023.0f, -24));
    CHECK(half_to_float(0x3555) == 0.333251953125f);
    CHECK(std::isinf(half_to_float(0x7C00)));
    CHECK(std::isnan(half_to_float(0x7E00)));
    CHECK(std::signbit(half_to_float(0x8000)));
    CHECK(bf16_to_float(0x3F80) == 1.0f);
    CHECK(bf16_to_float(0xC2F7) == -123.5f);
    CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // a tie goes to even
    CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
    CHECK(float_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);

    TmpDir tmp;
    const Model m = random_model(llama_spec());
    for (const std::string dtype : {"F16", "BF16"}) {
        INFO(dtype);
        const std::string dir = tmp / ("hf-" + dtype);
        write_hf(m, dir, dtype);
        GgufOptions o;
        o.matrices = dtype == "F16" ? kGgmlF16 : kGgmlBF16;
        write_file(tmp / (dtype + ".gguf"), gguf_bytes(gguf_doc(m, o)));
        const Checkpoint hf = Checkpoint::open(dir), gg = Checkpoint::open(tmp / (dtype + ".gguf"));
        CHECK(has_line(hf, dtype + " converted to float32"));
        CHECK(has_line(gg, dtype + " converted to float32"));
        auto round = [&](float v) { return dtype == "F16" ? round_to_half(v) : round_to_bf16(v); };
        const HfTensor& w1 = m.tensors.at("model.layers.1.mlp.gate_proj.weight");  // [F, D]
        const Tensor a = hf.layer(1).at("w1"), b = gg.layer(1).at("w1");                 // [D, F]
        bool ok_hf = true, ok_gg = true, changed = false;
        for (int64_t f = 0; f < 96; ++f)
            for (int64_t d = 0; d < 64; ++d) {
                const float want = round(w1.data[f * 64 + d]);
                ok_hf &= a.data[d * 96 + f] == want;
                ok_gg &= b.data[d * 96 + f] == want;
                changed |= want != w1.data[f * 64 + d];
            }
        CHECK(ok_hf);
        CHECK(ok_gg);
        CHECK(changed);
    }
}

TEST_CASE("Q8_0 and Q4_0 dequantise by ggml's block formulas", "[weights]") {
    // One block of each, byte by byte as ggml lays them out.
    auto tensor = [](Encoding e, const std::string& bytes, int64_t n) {
        StoredTensor t;
        t.file = "literal";
        t.name = "t";
        t.shape = {n};
        t.encoding = e;
        t.data = reinterpret_cast<const uint8_t*>(bytes.data());
        t.nbytes = bytes.size();
        return t;
    };
    {
        std::string b("\x00\x38", 2);  // d = 0.5 (f16 0x3800)
        for (int j = 0; j < 32; ++j) b.push_back(static_cast<char>(j - 16));
        std::vector<float> out(32);
        decode_rows(tensor(Encoding::q8_0, b, 32), 0, 1, out.data());
        for (int j = 0; j < 32; ++j) CHECK(out[j] == 0.5f * (j - 16));
    }
    {
        std::string b("\x00\x40", 2);  // d = 2
        for (int j = 0; j < 16; ++j) b.push_back(static_cast<char>((j & 0xF) | ((15 - j) << 4)));
        std::vector<float> out(32);
        decode_rows(tensor(Encoding::q4_0, b, 32), 0, 1, out.data());
        for (int j = 0; j < 16; ++j) {
            CHECK(out[j] == 2.0f * (j - 8));             // low nibbles: elements 0..15
            CHECK(out[j + 16] == 2.0f * ((15 - j) - 8));  // high nibbles: 16..31
        }
    }

    // Through a whole checkpoint: values that are exactly d q come back
    // exactly; random ones within d/2 (Q4_0: the one at -8 d's far end within d).
    TmpDir tmp;
    ModelSpec s = llama_spec();
    // Every block of every matrix: q in [lo, hi] with the extreme that fixes d
    // (127 for Q8_0, -8 for Q4_0) at element 0, times d = 2^-5, 2^-6 or 2^-7.
    auto exact_model = [&](int lo, int hi) {
        Model e = random_model(s);
        for (auto& [name, t] : e.tensors) {
            if (t.shape.size() != 2) continue;
            for (size_t b = 0; b < t.data.size(); b += 32)
                for (size_t j = 0; j < 32; ++j) {
                    const int span = hi - lo;  // the extreme itself only at j = 0
                    const int q = j == 0 ? (hi == 127 ? 127 : -8) : lo + 1 + static_cast<int>((b / 32 * 7 + j * 5) % span);
                    t.data[b + j] = std::ldexp(static_cast<float>(q), -5 - static_cast<int>(b / 32 % 3));
                }
        }
        return e;
    };
    const Model rnd = random_model(s);
    for (uint32_t type : {kGgmlQ8_0, kGgmlQ4_0}) {
        const char* tn = type == kGgmlQ8_0 ? "Q8_0" : "Q4_0";
        INFO(tn);
        GgufOptions o;
        o.matrices = type;
        const Model exact = type == kGgmlQ8_0 ? exact_model(-127, 127) : exact_model(-8, 7);
        write_file(tmp / "exact.gguf", gguf_bytes(gguf_doc(exact, o)));
        write_file(tmp / "random.gguf", gguf_bytes(gguf_doc(rnd, o)));
        const Checkpoint ex = Checkpoint::open(tmp / "exact.gguf");
        const Checkpoint rn = Checkpoint::open(tmp / "random.gguf");
        CHECK(has_line(ex, std::string(tn) + " dequantised to float32 (16 tensors)"));  // 7 per layer, embedding, output
        CHECK(has_line(ex, "F32 read as stored (5 tensors)"));                          // the norms
        const Named e = ex.layer(1);
        const HfTensor& src = exact.tensors.at("model.layers.1.mlp.down_proj.weight");  // [D, F]
        bool equal = true;
        for (int64_t d = 0; d < 64; ++d)
            for (int64_t f = 0; f < 96; ++f) equal &= e.at("w2").data[f * 64 + d] == src.data[d * 96 + f];
        CHECK(equal);

        const Named r = rn.layer(0);
        const HfTensor& w = rnd.tensors.at("model.layers.0.mlp.up_proj.weight");  // [F, D], blocks along D
        int within_half = 0, total = 0;
        bool bounded = true;
        for (int64_t f = 0; f < 96; ++f)
            for (int64_t b = 0; b < 64; b += 32) {
                float amax = 0;
                for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w.data[f * 64 + b + j]));
                const float d = round_to_half(type == kGgmlQ8_0 ? amax / 127 : amax / 8);
                for (int j = 0; j < 32; ++j) {
                    const float err = std::fabs(r.at("w3").data[(b + j) * 96 + f] - w.data[f * 64 + b + j]);
                    // Q4_0's clamped end (x/d = 8 -> q = 15) errs by d, plus 8 times d's float16 rounding.
                    bounded &= err <= (type == kGgmlQ8_0 ? d * 0.5f * (1 + 1e-6f) : d * (1 + 8 * std::ldexp(1.0f, -11)));
                    within_half += err <= d * 0.5f * (1 + 1e-6f);
                    ++total;
                }
            }
        CHECK(bounded);
        CHECK(within_half >= total - 96 * 2);  // Q4_0: about one clamped value per block beyond d/2
    }
}

TEST_CASE("Q4_K_M and Q5_K_M: llama.cpp's mix of K-quants read, each tensor its own type, the values the model's",
          "[weights][dequant]") {
    // K-quant super-blocks are 256 wide, so rows of 256 (ffn_down's: 512).
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.d_model = 256, s.head_dim = 64, s.ffn_dim = 512, s.layers = 3;
    const Model m = random_model(s);
    // The relative RMS error of a decoded [in, out] weight against the model's [out, in] one.
    auto rel_rms = [](const Tensor& got, const HfTensor& want) {
        const int64_t out = want.shape[0], in = want.shape[1];
        double e = 0, w = 0;
        for (int64_t o = 0; o < out; ++o)
            for (int64_t i = 0; i < in; ++i) {
                const double x = want.data[o * in + i];
                e += (got.data[i * out + o] - x) * (got.data[i * out + o] - x);
                w += x * x;
            }
        return std::sqrt(e / w);
    };
    for (uint32_t base : {kGgmlQ4_K, kGgmlQ5_K}) {
        const std::string bn = base == kGgmlQ4_K ? "Q4_K" : "Q5_K";
        INFO(bn << "_M");
        GgufOptions o;
        o.matrices = base;
        o.k_mix = true;
        write_file(tmp / "k.gguf", gguf_bytes(gguf_doc(m, o)));
        const Checkpoint c = open_all(tmp / "k.gguf");
        INFO(lines(c));
        // llama-quant's use_more_bits(i, 3) picks layer 2 only: its attn_v and
        // ffn_down, and output.weight, are Q6_K; the other 20 matrices the base.
        CHECK(has_line(c, bn + " dequantised to float32 (20 tensors)"));
        CHECK(has_line(c, "Q6_K dequantised to float32 (3 tensors)"));
        CHECK(has_line(c, "F32 read as stored (7 tensors)"));
        const Named l0 = c.layer(0), l2 = c.layer(2);
        const std::string p0 = "model.layers.0.", p2 = "model.layers.2.";
        // Uniform steps over a block's range: the error's rms is step / sqrt(12).
        // A sub-block of 32 N(0, s^2) spans ~4.1 s: 4.1 / 15 / sqrt(12) = 0.079
        // at 4 bits, 0.038 at 5; Q6_K's 16 span +-2.0 s in 63 steps: 0.019
        // (measured 0.078, 0.038, 0.019). The bounds are a quarter above; a
        // layout misread (nibbles, sub-block order, scale packing) is O(1).
        const double base_bound = base == kGgmlQ4_K ? 0.10 : 0.048;
        const double e_up = rel_rms(l0.at("w3"), m.tensors.at(p0 + "mlp.up_proj.weight"));
        const double e_v0 = rel_rms(l0.at("wv"), m.tensors.at(p0 + "self_attn.v_proj.weight"));
        const double e_v2 = rel_rms(l2.at("wv"), m.tensors.at(p2 + "self_attn.v_proj.weight"));
        const double e_down2 = rel_rms(l2.at("w2"), m.tensors.at(p2 + "mlp.down_proj.weight"));
        INFO("rel rms: up(0) " << e_up << ", v(0) " << e_v0 << ", v(2) " << e_v2 << ", down(2) " << e_down2);
        CHECK(e_up < base_bound);
        CHECK(e_v0 < base_bound);
        CHECK(e_v2 < 0.024);
        CHECK(e_down2 < 0.024);
    }
}

TEST_CASE("qwen3 GGUF: key_length != d/H and QK-norm, NeoX, unpermuted, the same as its safetensors", "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.arch = "qwen3", s.head_dim = 32, s.theta = 1e6, s.eps = 1e-6, s.tie = true;  // 4 x 32 != 64
    const Model m = random_model(s);
    write_hf(m, tmp / "hf");
    GgufOptions o;
    o.matrices = kGgmlBF16;
    write_file(tmp / "qwen3.gguf", gguf_bytes(gguf_doc(m, o)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf"), gg = Checkpoint::open(tmp / "qwen3.gguf");
    INFO(lines(gg));
    const BlockConfig& c = gg.model().block;
    CHECK(c.head_dim == 32);
    CHECK(c.q_width() == 128);
    CHECK(c.qk_norm);
    CHECK(c.rope_layout == RopeLayout::neox);
    CHECK(c.rope_theta == 1e6);
    CHECK(c.norm_eps == 1e-6);
    CHECK(gg.model().tie_embeddings);
    CHECK(hf.model().block.rope_layout == RopeLayout::neox);
    CHECK(same_block(c, hf.model().block));
    CHECK(has_line(gg, "head_dim = 32 (qwen3.attention.key_length)"));
    CHECK(has_line(gg, "qk_norm: on (blk.0.attn_q_norm.weight / attn_k_norm.weight present)"));
    CHECK(has_line(gg, "rope layout: neox (general.architecture = qwen3"));
    CHECK(has_line(gg, "lm_head: output.weight absent: tied to token_embd.weight"));
    CHECK(has_line(hf, "lm_head: tied to model.embed_tokens.weight"));
    const Named a = hf.layer(1), b = gg.layer(1);
    REQUIRE(a.size() == 11);
    CHECK(a.at("q_norm").shape == std::vector<int64_t>{1, 32});
    CHECK(a.at("wq").shape == std::vector<int64_t>{64, 128});
    for (const auto& [name, t] : a) {
        INFO(name);
        if (name == "q_norm" || name == "k_norm" || name == "attn_norm" || name == "ffn_norm")
            CHECK(b.at(name).data == t.data);  // F32 in both
        else
            for (size_t k = 0; k < t.data.size(); ++k) REQUIRE(b.at(name).data[k] == round_to_bf16(t.data[k]));
    }
    CHECK(rel_error(gg.lm_head(), hf.lm_head()) < 1e-2);
}

TEST_CASE("gemma2 and gemma3: sandwich norms and each layer's window and RoPE base, alike from safetensors and GGUF",
          "[weights]") {
    TmpDir tmp;
    for (const std::string arch : {"gemma2", "gemma3"}) {
        INFO(arch);
        ModelSpec s = llama_spec();
        s.arch = arch, s.n_kv_heads = arch == "gemma2" ? 2 : 1, s.head_dim = 32, s.ffn_dim = 128, s.eps = 1e-6, s.tie = true;
        s.layers = arch == "gemma2" ? 3 : 6, s.window = 3, s.attn_softcap = arch == "gemma2" ? 5.0 : 0.0;
        s.final_softcap = arch == "gemma2" ? 10.0 : 0.0, s.theta = arch == "gemma2" ? 10000.0 : 1e6;
        const Model m = random_model(s);
        write_hf(m, tmp / (arch + "-hf"));
        write_file(tmp / (arch + ".gguf"), gguf_bytes(gguf_doc(m)));
        const Checkpoint hf = Checkpoint::open(tmp / (arch + "-hf")), gg = Checkpoint::open(tmp / (arch + ".gguf"));
        INFO(lines(hf) + lines(gg));
        CHECK(hf.model().block.sandwich_norm);
        CHECK(gg.model().block.sandwich_norm);
        CHECK(hf.model().block.qk_norm == (arch == "gemma3"));
        CHECK(hf.model().final_logit_softcapping == s.final_softcap);
        CHECK(gg.model().final_logit_softcapping == s.final_softcap);
        for (int64_t l = 0; l < s.layers; ++l) {
            INFO("layer " << l);
            const BlockConfig a = hf.model().layer_block(l), b = gg.model().layer_block(l);
            const bool sliding = arch == "gemma2" ? l % 2 == 0 : l % 6 < 5;
            CHECK(a.sliding_window == (sliding ? 3 : 0));
            CHECK(b.sliding_window == a.sliding_window);
            CHECK(a.rope_theta == (arch == "gemma3" && sliding ? 10000.0 : s.theta));
            CHECK(b.rope_theta == a.rope_theta);
            CHECK(a.attn_logit_softcapping == s.attn_softcap);
            CHECK(b.attn_logit_softcapping == a.attn_logit_softcapping);
            // The four norms: Gemma's offsets in the safetensors, 1 + w in the GGUF.
            const Named wa = hf.layer(l), wb = gg.layer(l);
            const std::string p = "model.layers." + std::to_string(l) + ".";
            for (const auto& [schema, name] : {std::pair<const char*, const char*>{"attn_post_norm", "post_attention_layernorm.weight"},
                                               {"ffn_norm", "pre_feedforward_layernorm.weight"},
                                               {"ffn_post_norm", "post_feedforward_layernorm.weight"}}) {
                INFO(schema);
                REQUIRE(wa.count(schema) == 1);
                CHECK(wa.at(schema).data == m.tensors.at(p + name).data);
                for (size_t i = 0; i < wb.at(schema).data.size(); ++i)
                    CHECK(wb.at(schema).data[i] == 1.0f + m.tensors.at(p + name).data[i]);
            }
        }
    }
}

TEST_CASE("smollm3: its NoPE layers alike from safetensors (no_rope_layers) and GGUF (llama.cpp's every 4th)",
          "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.arch = "smollm3", s.layers = 4, s.theta = 2e6, s.eps = 1e-6;
    const Model m = random_model(s);
    write_hf(m, tmp / "hf");
    write_file(tmp / "smollm3.gguf", gguf_bytes(gguf_doc(m)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf"), gg = Checkpoint::open(tmp / "smollm3.gguf");
    INFO(lines(hf) + lines(gg));
    CHECK(hf.model().block.rope_layout == RopeLayout::neox);
    CHECK(gg.model().block.rope_layout == RopeLayout::interleaved);
    for (int64_t l = 0; l < s.layers; ++l) {
        INFO("layer " << l);
        CHECK(hf.model().layer_block(l).nope == (l == 3));
        CHECK(gg.model().layer_block(l).nope == (l == 3));
    }
}

TEST_CASE("gpt-oss: its attention alike from safetensors and GGUF (biases, sinks, sliding / full), its experts not read",
          "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.arch = "gpt_oss", s.layers = 4, s.window = 3, s.theta = 150000, s.ffn_dim = 32;
    const Model m = random_model(s);
    write_hf(m, tmp / "hf");
    write_file(tmp / "gptoss.gguf", gguf_bytes(gguf_doc(m)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf"), gg = Checkpoint::open(tmp / "gptoss.gguf");
    INFO(lines(hf) + lines(gg));
    for (const Checkpoint* c : {&hf, &gg}) {
        const config::ModelConfig& mc = c->model();
        CHECK(mc.block.qkv_bias);
        CHECK(mc.o_bias);
        CHECK(mc.block.attn_sinks);
        CHECK(mc.block.rope_layout == RopeLayout::neox);
        CHECK_THAT(mc.ffn_unmodelled, Catch::Contains("a mixture of 4 experts, 2 per token"));
        for (int64_t l = 0; l < s.layers; ++l) CHECK(mc.layer_block(l).sliding_window == (l % 2 == 0 ? 3 : 0));
    }
    for (int64_t l = 0; l < s.layers; ++l) {
        INFO("layer " << l);
        const Named a = hf.layer(l), b = gg.layer(l);
        CHECK(a.size() == b.size());
        for (const char* w : {"attn_norm", "wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo", "sinks"}) {
            INFO(w);
            REQUIRE(a.count(w));
            REQUIRE(b.count(w));
            CHECK(a.at(w).shape == b.at(w).shape);
            CHECK(a.at(w).data == b.at(w).data);
        }
        for (const char* w : {"ffn_norm", "w1", "w2", "w3"}) CHECK_FALSE(a.count(w));
        const std::string p = "model.layers." + std::to_string(l) + ".";
        CHECK(a.at("sinks").data == m.tensors.at(p + "self_attn.sinks").data);
        CHECK(a.at("bo").data == m.tensors.at(p + "self_attn.o_proj.bias").data);
        CHECK(a.at("sinks").shape == std::vector<int64_t>{1, s.n_heads});
    }
}

TEST_CASE("qwen2: q, k, v biases read from safetensors and GGUF and used, an o_proj bias refused", "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.arch = "qwen2", s.theta = 1e6, s.eps = 1e-6;
    const Model m = random_model(s);
    write_hf(m, tmp / "hf");
    write_file(tmp / "qwen2.gguf", gguf_bytes(gguf_doc(m)));
    const Checkpoint hf = Checkpoint::open(tmp / "hf"), gg = Checkpoint::open(tmp / "qwen2.gguf");
    INFO(lines(hf) + lines(gg));
    const BlockConfig& c = hf.model().block;
    CHECK(c.qkv_bias);
    CHECK(gg.model().block.qkv_bias);
    CHECK_FALSE(c.qk_norm);
    CHECK(has_line(hf, "qkv_bias: on (Qwen2ForCausalLM has q_proj, k_proj, v_proj biases"));
    CHECK(has_line(gg, "qkv_bias: on (blk.0.attn_{q,k,v}.bias present"));
    for (int64_t l = 0; l < s.layers; ++l) {
        const Named a = hf.layer(l), b = gg.layer(l);
        const std::string p = "model.layers." + std::to_string(l) + ".";
        for (const auto& [schema, name] : {std::pair<const char*, const char*>{"bq", "self_attn.q_proj.bias"},
                                           {"bk", "self_attn.k_proj.bias"}, {"bv", "self_attn.v_proj.bias"}}) {
            INFO(schema);
            REQUIRE(a.count(schema) == 1);
            CHECK(a.at(schema).shape == std::vector<int64_t>{1, static_cast<int64_t>(m.tensors.at(p + name).data.size())});
            CHECK(a.at(schema).data == m.tensors.at(p + name).data);
            CHECK(b.at(schema).data == m.tensors.at(p + name).data);  // F32 in the GGUF
        }
    }
    // A sliding-window key on qwen2: reported, not applied (llama.cpp's qwen2 graph attends over every key).
    {
        GgufDoc d = gguf_doc(m);
        d.kv.push_back(kv_u32("qwen2.attention.sliding_window", 4));
        write_file(tmp / "qwen2-swa.gguf", gguf_bytes(d));
        const Checkpoint sw = Checkpoint::open(tmp / "qwen2-swa.gguf");
        INFO(lines(sw));
        CHECK(sw.model().block.sliding_window == 0);
        CHECK(has_line(sw, "sliding_window: 4 not used (qwen2.attention.sliding_window): llama.cpp's qwen2 graph reads "
                           "no window"));
    }
    // Used: the forward with the biases zeroed is another model's.
    const std::vector<int64_t> ids = {1, 5, 2, 7, 3}, pos = {0, 1, 2, 3, 4};
    const Tensor with = logits(hf, c, ids, pos);
    BlockConfig off = c;
    off.qkv_bias = false;
    const Tensor without = logits(hf, off, ids, pos);
    CHECK(rel_error(without, with) > 0.05);
    CHECK(rel_error(logits(gg, gg.model().block, ids, pos), with) < 1e-5);

    // An o_proj bias is a Llama attention_bias the block does not model: refused, named.
    Model ob = m;
    ob.tensors["model.layers.0.self_attn.o_proj.bias"] = ob.tensors.at("model.layers.0.self_attn.q_proj.bias");
    ob.tensors["model.layers.0.self_attn.o_proj.bias"].data.resize(static_cast<size_t>(s.d_model));
    ob.tensors["model.layers.0.self_attn.o_proj.bias"].shape = {s.d_model};
    write_hf(ob, tmp / "ob");
    refused(tmp / "ob", {"model.layers.0.self_attn.o_proj.bias", "an output projection bias", "refused rather than dropped"});
}

TEST_CASE("llama rope_freqs.weight: llama3's factors mapped to RopeScaling, anything else refused", "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.head_dim = 64, s.n_heads = 2, s.n_kv_heads = 1, s.theta = 500000, s.max_position = 131072;
    s.scaling.type = RopeScalingType::llama3;
    s.scaling.factor = 8, s.scaling.low_freq_factor = 1, s.scaling.high_freq_factor = 4, s.scaling.original_max_position = 8192;
    const Model m = random_model(s);
    write_hf(m, tmp / "hf");
    const GgufDoc doc = gguf_doc(m);
    write_file(tmp / "llama3.gguf", gguf_bytes(doc));
    const Checkpoint hf = Checkpoint::open(tmp / "hf"), gg = Checkpoint::open(tmp / "llama3.gguf");
    INFO(lines(gg));
    CHECK(gg.model().block.rope_scaling == s.scaling);
    CHECK(hf.model().block.rope_scaling == s.scaling);
    CHECK(gg.rope_freq_factors().size() == 32);
    CHECK(has_line(gg, "rope scaling: llama3(factor=8, low_freq_factor=1, high_freq_factor=4, original_max_position=8192) "
                       "(rope_freqs.weight: 32 per-pair factors equal the llama3 formula's"));
    // Some pairs are really in the blend, so low and high were fitted, not guessed.
    int mid = 0;
    for (float f : gg.rope_freq_factors()) mid += f > 1.0001f && f < 7.999f;
    CHECK(mid >= 2);

    // Llama 3.1 8B's own table (head_dim 128, as its converter writes it) maps back exactly.
    {
        const FactorFit fit = fit_rope_factors(converter_rope_freqs(500000, 128, s.scaling), 500000, 128, 0, "llama3.1");
        CHECK(fit.scaling == s.scaling);
    }

    // The file's own original context length, another high_freq_factor.
    RopeScaling other = s.scaling;
    other.original_max_position = 4096, other.high_freq_factor = 6, other.factor = 16;
    GgufDoc d2 = doc;
    for (auto& t : d2.tensors)
        if (t.name == "rope_freqs.weight") t.bytes = encode(converter_rope_freqs(500000, 64, other), "F32");
    d2.kv.push_back(kv_u32("llama.rope.scaling.original_context_length", 4096));
    write_file(tmp / "other.gguf", gguf_bytes(d2));
    CHECK(Checkpoint::open(tmp / "other.gguf").model().block.rope_scaling == other);

    // Without the key, L = 8192 is taken: another (low, high), the same frequencies.
    GgufDoc d3 = d2;
    d3.kv.pop_back();
    write_file(tmp / "no-l.gguf", gguf_bytes(d3));
    const RopeScaling guessed = Checkpoint::open(tmp / "no-l.gguf").model().block.rope_scaling;
    CHECK(guessed.original_max_position == 8192);
    const auto f_other = llama3_factors(500000, 64, other), f_guessed = llama3_factors(500000, 64, guessed);
    for (size_t k = 0; k < f_other.size(); ++k) CHECK(f_guessed[k] == Approx(f_other[k]).epsilon(1e-6));

    // One factor off the formula: refused, naming the pair.
    GgufDoc bad = doc;
    for (auto& t : bad.tensors)
        if (t.name == "rope_freqs.weight") {
            auto f = converter_rope_freqs(500000, 64, s.scaling);
            f[29] *= 1.1f;
            t.bytes = encode(f, "F32");
        }
    write_file(tmp / "bad.gguf", gguf_bytes(bad));
    refused(tmp / "bad.gguf", {tmp / "bad.gguf", "rope_freqs.weight", "pair ", "the block's RopeScaling has no per-pair factors"});

    // All factors equal: linear; linear by metadata too.
    GgufDoc lin = doc;
    for (auto& t : lin.tensors)
        if (t.name == "rope_freqs.weight") t.bytes = encode(std::vector<float>(32, 4.0f), "F32");
    write_file(tmp / "lin.gguf", gguf_bytes(lin));
    CHECK(Checkpoint::open(tmp / "lin.gguf").model().block.rope_scaling.type == RopeScalingType::linear);
    GgufDoc meta = gguf_doc(random_model(llama_spec()));
    meta.kv.push_back(kv_str("llama.rope.scaling.type", "linear"));
    meta.kv.push_back(kv_f32("llama.rope.scaling.factor", 4.0f));
    write_file(tmp / "meta.gguf", gguf_bytes(meta));
    const Checkpoint ml = Checkpoint::open(tmp / "meta.gguf");
    CHECK(ml.model().block.rope_scaling.type == RopeScalingType::linear);
    CHECK(ml.model().block.rope_scaling.factor == 4.0);
    CHECK(has_line(ml, "rope scaling: linear, factor 4 (llama.rope.scaling.type; llama.rope.scaling.factor)"));
}

TEST_CASE("sharded safetensors read as the single file", "[weights]") {
    TmpDir tmp;
    const Model m = random_model(llama_spec());
    write_hf(m, tmp / "one");
    write_hf(m, tmp / "three", "F32", 3);
    REQUIRE(fs::exists(tmp / "three/model-00003-of-00003.safetensors"));
    const Checkpoint one = Checkpoint::open(tmp / "one");
    const Checkpoint three = Checkpoint::open(tmp / "three");
    const Checkpoint by_index = Checkpoint::open(tmp / "three/model.safetensors.index.json");
    CHECK(has_line(three, "format: safetensors, 3 shards named by"));
    for (int64_t l = 0; l < 2; ++l) {
        const Named a = one.layer(l), b = three.layer(l), c = by_index.layer(l);
        for (const auto& [name, t] : a) {
            CHECK(b.at(name).data == t.data);
            CHECK(c.at(name).data == t.data);
        }
    }
    CHECK(three.lm_head().data == one.lm_head().data);
    // A single file and an explicit config.json.
    const Checkpoint file = Checkpoint::open(tmp / "one/model.safetensors", nullptr, tmp / "one/config.json");
    CHECK(has_line(file, "(given)"));

    // The index's refusals.
    const std::string index = read_file(tmp / "three/model.safetensors.index.json");
    auto with_index = [&](const std::string& name, std::string text) {
        fs::copy(tmp / "three", tmp / name, fs::copy_options::recursive);
        write_file(tmp / (name + "/model.safetensors.index.json"), text);
        return tmp / name;
    };
    auto replace = [](std::string s, const std::string& from, const std::string& to) {
        const auto at = s.find(from);
        REQUIRE(at != std::string::npos);
        return s.replace(at, from.size(), to);
    };
    refused(with_index("lost", replace(index, "model-00002-of-00003", "model-00009-of-00003")),
            {"model-00009-of-00003.safetensors", "cannot open"});
    std::string moved = index;
    const size_t digit = moved.find("\"model.norm.weight\": \"model-0000") + std::strlen("\"model.norm.weight\": \"model-0000");
    REQUIRE(digit < moved.size());
    moved[digit] = static_cast<char>('1' + (moved[digit] - '0') % 3);  // another shard
    refused(with_index("moved", moved),
            {"model.safetensors.index.json", "weight_map.model.norm.weight", "holds no tensor named model.norm.weight"});
    refused(with_index("escape", replace(index, "\"model-00001-of-00003.safetensors\"", "\"../x.safetensors\"")),
            {"model.safetensors.index.json", "weight_map.", "is not the name of a file beside the index"});
    refused(with_index("garbage", "{\"weight_map\": [1, 2]}"), {"model.safetensors.index.json", "weight_map: expected"});
    refused(with_index("notjson", "{\"weight_map\": {"), {"model.safetensors.index.json", "index: not valid JSON"});
}

namespace {

// Patches a little-endian u64 into bytes at `at`.
void poke_u64(std::string& b, size_t at, uint64_t v) { std::memcpy(&b[at], &v, 8); }

size_t find(const std::string& hay, const std::string& needle) {
    const size_t at = hay.find(needle);
    REQUIRE(at != std::string::npos);
    return at;
}

GgufTensorOut& tensor_named(GgufDoc& d, const std::string& name) {
    for (auto& t : d.tensors)
        if (t.name == name) return t;
    FAIL("no tensor " << name);
    throw;
}

}  // namespace

TEST_CASE("GGUF: every malformed-file class refused with file, tensor or key, and field", "[weights]") {
    TmpDir tmp;
    const Model m = random_model(llama_spec());
    const GgufDoc base = gguf_doc(m);
    const std::string good = gguf_bytes(base);
    int n = 0;
    auto bytes_case = [&](const std::string& bytes, std::vector<std::string> parts) {
        const std::string path = tmp / ("case" + std::to_string(n++) + ".gguf");
        write_file(path, bytes);
        parts.insert(parts.begin(), path + ": ");
        refused(path, parts);
    };
    auto doc_case = [&](const std::function<void(GgufDoc&)>& edit, std::vector<std::string> parts) {
        GgufDoc d = base;
        edit(d);
        bytes_case(gguf_bytes(d), std::move(parts));
    };
    {
        INFO("the valid file loads");
        write_file(tmp / "good.gguf", good);
        CHECK_NOTHROW(open_all(tmp / "good.gguf"));
    }

    SECTION("bad magic, version, byte order; empty and truncated files") {
        std::string b = good;
        b[0] = 'X';
        bytes_case(b, {"magic: expected 'GGUF'"});
        bytes_case("", {"magic: expected 'GGUF'", "the file has 0 bytes"});
        doc_case([](GgufDoc& d) { d.version = 7; }, {"version: expected 2 or 3, found 7"});
        doc_case([](GgufDoc& d) { d.version = 1; }, {"version: 1 is not supported"});
        doc_case([](GgufDoc& d) { d.version = 0x03000000u; }, {"version: the file is big-endian"});
        for (size_t len : {size_t(3), size_t(6), size_t(20), size_t(60), good.size() / 8, good.size() / 2, good.size() - 40})
            bytes_case(good.substr(0, len), {});  // the file named, whatever field it broke in
        bytes_case(good.substr(0, 100), {"metadata_kv_count: 13 entries cannot fit in the 76 bytes that follow"});
        bytes_case(good.substr(0, good.size() - 100), {"offset", "out of range"});
    }
    SECTION("v2 reads as v3") {
        GgufDoc d = base;
        d.version = 2;
        write_file(tmp / "v2.gguf", gguf_bytes(d));
        CHECK(open_all(tmp / "v2.gguf").model().layers == 2);
    }
    SECTION("counts, strings and arrays past the end") {
        std::string b = good;
        poke_u64(b, 16, uint64_t(1) << 50);
        bytes_case(b, {"metadata_kv_count:", "cannot fit"});
        b = good;
        poke_u64(b, 8, uint64_t(1) << 40);
        bytes_case(b, {"tensor_count:", "cannot fit"});
        b = good;
        const size_t name = find(b, "conform test llama");  // general.name's value, its u64 length just before
        poke_u64(b, name - 8, uint64_t(1) << 40);
        bytes_case(b, {"general.name: string length 1099511627776 runs past the end of the file"});
        b = good;
        const size_t key = find(b, "general.architecture");
        poke_u64(b, key - 8, 5000000);
        bytes_case(b, {"metadata entry 0 key: string length 5000000 runs past the end"});
        b = good;
        const size_t tokens = find(b, "tokenizer.ggml.tokens") + std::strlen("tokenizer.ggml.tokens") + 4 + 4;
        poke_u64(b, tokens, uint64_t(1) << 45);
        bytes_case(b, {"tokenizer.ggml.tokens: array of 35184372088832 string runs past the end"});
        b = good;
        const size_t tname = find(b, "blk.0.attn_v.weight");
        poke_u64(b, tname - 8, 9000);
        bytes_case(b, {"name: string length 9000"});
        doc_case([](GgufDoc& d) { d.tensors[0].name = std::string(70, 'n'); }, {"name: string length 70, more than 64"});
    }
    SECTION("metadata: types, duplicates, nesting, alignment") {
        doc_case([](GgufDoc& d) { d.kv.push_back({"x.y", 13, ""}); }, {"x.y (value type): 13 is not a GGUF value type"});
        doc_case([](GgufDoc& d) { d.kv.push_back({"general.flag", 7, "\x02"}); }, {"general.flag: a bool must be 0 or 1, found 2"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_u32("llama.block_count", 2)); },
                 {"llama.block_count: key appears twice in the metadata"});
        doc_case(
            [](GgufDoc& d) {
                std::string v;  // array of array of ... (6 deep)
                for (int k = 0; k < 6; ++k) v += std::string("\x09\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00", 12);
                v += std::string("\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 12);
                d.kv.push_back({"x.nested", 9, v});
            },
            {"x.nested", "arrays nested deeper than 4"});
        doc_case(
            [](GgufDoc& d) {
                for (auto& kv : d.kv)
                    if (kv.key == "general.alignment") kv = kv_u32("general.alignment", 24);
            },
            {"general.alignment: expected a power of two, found u32 24"});
    }
    SECTION("tensor infos and the data: offsets, overlaps, alignment, dims, types") {
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_q.weight").offset = uint64_t(1) << 30; },
                 {"blk.0.attn_q.weight: offset: [1073741824, 1073741824 + 16384) out of range"});
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_k.weight").offset = 0; },
                 {"offset: 0 overlaps", "blk.0.attn_k.weight"});
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_k.weight").offset = 4; },
                 {"blk.0.attn_k.weight: offset: 4 is not a multiple of the alignment 32"});
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_k.weight").ne = {64, 2, 2, 2, 4}; },
                 {"blk.0.attn_k.weight: n_dims: expected 1 to 4, found 5"});
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_k.weight").type = 99; },
                 {"blk.0.attn_k.weight: type: 99 is not a ggml tensor type"});
        doc_case(
            [](GgufDoc& d) {
                GgufTensorOut& t = tensor_named(d, "blk.0.attn_q.weight");
                t.type = 9;  // Q8_1 (an activation format): 2 blocks of 36 bytes per row
                t.bytes.resize(64 * 2 * 36);
            },
            {"blk.0.attn_q.weight: type: Q8_1 is not read (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, "
             "Q5_K, Q6_K, Q8_K, IQ4_NL, MXFP4 are"});
        doc_case(
            [](GgufDoc& d) {
                GgufTensorOut t;
                t.name = "extra.weight";
                t.ne = {48, 2};
                t.type = kGgmlQ8_0;
                t.bytes.resize(2 * 2 * 34);
                d.tensors.push_back(t);
            },
            {"extra.weight: ne[0]: 48 is not a multiple of Q8_0's block of 32 elements"});
        doc_case([](GgufDoc& d) { d.tensors.push_back(d.tensors[3]); }, {base.tensors[3].name + ": tensor name appears twice"});
        doc_case([](GgufDoc& d) { tensor_named(d, "blk.0.attn_k.weight").ne = {0x100000000ull, 0x100000000ull, 0x100000000ull}; },
                 {"blk.0.attn_k.weight: ne: the element count overflows int64"});
    }
    SECTION("the model: architecture, keys, shapes, missing tensors, scaling, values") {
        doc_case(
            [](GgufDoc& d) {
                for (auto& kv : d.kv)
                    if (kv.key == "general.architecture") kv = kv_str("general.architecture", "mamba");
            },
            {"general.architecture: 'mamba' is not supported (llama, qwen2, qwen3, gemma, gemma2, gemma3, smollm3 are; gpt-oss's attention)"});
        doc_case(
            [](GgufDoc& d) {
                for (auto& kv : d.kv)
                    if (kv.key == "general.architecture") kv = kv_str("general.architecture", "llama4");
            },
            {"general.architecture: 'llama4' has a mixture-of-experts FFN"});
        doc_case(
            [](GgufDoc& d) {
                d.kv.erase(std::remove_if(d.kv.begin(), d.kv.end(),
                                          [](const GgufKv& kv) { return kv.key == "general.architecture"; }),
                           d.kv.end());
            },
            {"general.architecture: missing"});
        doc_case(
            [](GgufDoc& d) {
                d.kv.erase(std::remove_if(d.kv.begin(), d.kv.end(),
                                          [](const GgufKv& kv) { return kv.key == "llama.attention.layer_norm_rms_epsilon"; }),
                           d.kv.end());
            },
            {"llama.attention.layer_norm_rms_epsilon: missing"});
        doc_case(
            [](GgufDoc& d) {
                for (auto& kv : d.kv)
                    if (kv.key == "llama.attention.head_count_kv") kv = kv_u32("llama.attention.head_count_kv", 3);
            },
            {"num_key_value_heads (kv heads): expected a divisor of num_attention_heads 4, found 3"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_str("llama.embedding_length_x", "x")); d.kv.push_back(kv_f32("llama.attention.head_count", 4)); },
                 {"llama.attention.head_count: key appears twice"});
        doc_case(
            [](GgufDoc& d) {
                GgufTensorOut& t = tensor_named(d, "blk.0.attn_k.weight");
                t.ne = {64, 16};
                t.bytes.resize(64 * 16 * 4);
            },
            {"blk.0.attn_k.weight: ne: expected [64, 32] = [D, KV*hd], found [64, 16]"});
        doc_case(
            [](GgufDoc& d) {
                d.tensors.erase(std::remove_if(d.tensors.begin(), d.tensors.end(),
                                               [](const GgufTensorOut& t) { return t.name == "blk.1.ffn_down.weight"; }),
                                d.tensors.end());
            },
            {"blk.1.ffn_down.weight: missing (llama.block_count = 2 implies it)"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_str("llama.rope.scaling.type", "yarn")); },
                 {"llama.rope.scaling.type: 'yarn' is not mapped"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_u32("llama.vocab_size", 99)); },
                 {"llama.vocab_size: expected token_embd.weight's 64 rows, found u32 99"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_u32("llama.attention.value_length", 8)); },
                 {"llama.attention.value_length: expected key_length 16"});
        doc_case([](GgufDoc& d) { d.kv.push_back(kv_str("llama.attention.sliding_window", "4096")); },
                 {"llama.attention.sliding_window: expected a non-negative integer, found string '4096'"});
        doc_case(
            [](GgufDoc& d) {
                for (auto& kv : d.kv)
                    if (kv.key == "llama.embedding_length") kv = kv_str("llama.embedding_length", "64");
            },
            {"llama.embedding_length: expected a positive integer <= 1048576, found string '64'"});
        doc_case(
            [](GgufDoc& d) {
                GgufTensorOut& t = tensor_named(d, "blk.0.attn_v.weight");
                const float nan = std::nanf("");
                std::memcpy(&t.bytes[4 * 70], &nan, 4);
            },
            {"blk.0.attn_v.weight: element [1, 6] is nan (F32): a checkpoint's weights must be finite"});
    }
}

TEST_CASE("safetensors: every malformed-file class refused with file, tensor and field", "[weights]") {
    TmpDir tmp;
    const Model m = random_model(llama_spec());
    int n = 0;
    // A header-level case: the file alone (the header is read before config.json).
    auto raw_case = [&](const std::string& bytes, std::vector<std::string> parts) {
        const std::string path = tmp / ("case" + std::to_string(n++) + ".safetensors");
        write_file(path, bytes);
        parts.insert(parts.begin(), path + ": ");
        refused(path, parts);
    };
    auto header = [](const std::string& h, size_t data) { return safetensors_raw(h, std::string(data, '\0')); };
    const std::string four = R"("dtype":"F32","shape":[4])";

    raw_case(std::string("\x05\0\0\0\0", 5), {"header length: the file has 5 bytes, expected at least 8"});
    {
        std::string b = safetensors_bytes({{"a", "F32", {4}, std::string(16, '\0')}});
        poke_u64(b, 0, b.size());
        raw_case(b, {"header length: ", "beyond the end of the file"});
    }
    raw_case(header("{\"a\": ", 0), {"header: not valid JSON"});
    raw_case(header("[1, 2, 3]", 0), {"header: expected a JSON object starting at byte 8"});
    raw_case(header("{\"a\":{" + four + ",\"data_offsets\":[0,1099511627776]}}", 16),
             {"a: data_offsets: [0, 1099511627776] out of range: the data section has 16 bytes"});
    raw_case(header("{\"a\":{" + four + ",\"data_offsets\":[0,16]},\"b\":{" + four + ",\"data_offsets\":[8,24]}}", 24),
             {"b: data_offsets: begins at 8, expected 16 (where a ends): the tensors overlap"});
    raw_case(header("{\"a\":{" + four + ",\"data_offsets\":[0,16]},\"b\":{" + four + ",\"data_offsets\":[20,36]}}", 36),
             {"b: data_offsets: begins at 20, expected 16 (where a ends): the tensors leave a gap"});
    raw_case(header("{\"a\":{" + four + ",\"data_offsets\":[0,16]}}", 20),
             {"data_offsets: the tensors end at byte 16 of the data section, expected 20", "4 bytes belong to no tensor"});
    raw_case(header("{\"a\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,16]}}", 16),
             {"a: data_offsets: [0, 16] is 16 bytes, expected shape [5] x 4 bytes (F32) = 20"});
    raw_case(header("{\"a\":{\"dtype\":\"F12\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16),
             {"a: dtype: unknown dtype 'F12'"});
    raw_case(header("{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 16),
             {"a: shape: expected a list of non-negative integers"});
    raw_case(header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,0]}}", 16),
             {"a: data_offsets: [16, 0] ends before it begins"});
    raw_case(header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0]}}", 16),
             {"a: data_offsets: expected [begin, end]"});
    raw_case(header("{\"a\":{" + four + ",\"data_offsets\":[0,16]},\"a\":{" + four + ",\"data_offsets\":[16,32]}}", 32),
             {"header: key 'a' appears twice in one object"});
    raw_case(header("{\"__metadata__\":{\"format\":1}}", 0), {"__metadata__.format: expected a string, found 1"});
    raw_case(header("{\"a\":{\"shape\":[4],\"data_offsets\":[0,16]}}", 16), {"a: dtype: expected a string, found nothing"});

    // Whole checkpoints, one thing wrong.
    auto model_case = [&](const std::function<void(std::vector<StOut>&)>& edit, std::vector<std::string> parts,
                          const std::function<void(const std::string&)>& dir_edit = nullptr) {
        const std::string dir = tmp / ("model" + std::to_string(n++));
        write_hf(m, dir);
        std::vector<StOut> ts;
        for (const auto& [name, t] : m.tensors) ts.push_back({name, "F32", t.shape, encode(t.data, "F32")});
        edit(ts);
        write_file(dir + "/model.safetensors", safetensors_bytes(ts));
        if (dir_edit) dir_edit(dir);
        refused(dir, parts);
    };
    auto named = [](std::vector<StOut>& ts, const std::string& name) -> StOut& {
        for (auto& t : ts)
            if (t.name == name) return t;
        FAIL("no tensor " << name);
        throw;
    };
    model_case([&](auto& ts) { named(ts, "lm_head.weight").dtype = "I32"; },
               {"model.safetensors: lm_head.weight: dtype: I32 is not a float type the block reads (F32, F16, BF16)"});
    model_case([&](auto& ts) { named(ts, "model.layers.0.self_attn.k_proj.weight").shape = {64, 32}; },
               {"model.safetensors: model.layers.0.self_attn.k_proj.weight: shape: expected [32, 64] = [KV*hd, D], found [64, 32]"});
    model_case([&](auto& ts) { named(ts, "model.layers.0.input_layernorm.weight").shape = {1, 64}; },
               {"model.layers.0.input_layernorm.weight: shape: expected [64] = [D], found [1, 64]"});
    model_case(
        [&](auto& ts) {
            ts.erase(std::remove_if(ts.begin(), ts.end(), [](const StOut& t) { return t.name == "model.layers.1.mlp.down_proj.weight"; }),
                     ts.end());
        },
        {"model.safetensors: model.layers.1.mlp.down_proj.weight: missing (num_hidden_layers = 2 implies it)"});
    model_case(
        [&](auto& ts) {
            ts.erase(std::remove_if(ts.begin(), ts.end(), [](const StOut& t) { return t.name == "lm_head.weight"; }), ts.end());
        },
        {"model.safetensors: lm_head.weight: missing (tie_word_embeddings is false)"});
    model_case(
        [&](auto& ts) {
            const float inf = INFINITY;
            std::memcpy(&named(ts, "model.layers.1.mlp.up_proj.weight").bytes[4 * 65], &inf, 4);
        },
        {"model.safetensors: model.layers.1.mlp.up_proj.weight: element [1, 1] is inf (F32)"});
    model_case([](auto&) {}, {"config.json: config.json: not found beside the weights"},
               [](const std::string& dir) { fs::remove(dir + "/config.json"); });
    model_case([](auto&) {}, {"config.json: not valid JSON"},
               [](const std::string& dir) { write_file(dir + "/config.json", "{"); });
    model_case([](auto&) {}, {"config.json: num_key_value_heads: expected a positive integer <= 4096, found 0"},
               [](const std::string& dir) {
                   std::string c = read_file(dir + "/config.json");
                   const auto at = c.find("\"num_key_value_heads\": 2");
                   REQUIRE(at != std::string::npos);
                   write_file(dir + "/config.json", c.replace(at, 24, "\"num_key_value_heads\": 0"));
               });
    refused(tmp / "nothing-here", {"nothing-here"});
    fs::create_directories(tmp / "empty");
    refused(tmp / "empty", {"empty: a directory with neither model.safetensors.index.json nor model.safetensors"});
}

TEST_CASE("files assembled byte by byte from the format specifications read as they say", "[weights]") {
    TmpDir tmp;
    auto u32 = [](uint32_t v) { return std::string(reinterpret_cast<const char*>(&v), 4); };
    auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
    auto str = [&](const std::string& s) { return u64(s.size()) + s; };

    // GGUF v3 (ggml docs/gguf.md): header, 3 kvs, 2 tensor infos, padding to 64, data.
    std::string g = "GGUF" + u32(3) + u64(2) + u64(3);
    g += str("general.architecture") + u32(8) + str("llama");
    g += str("general.alignment") + u32(4) + u32(64);
    g += str("x.list") + u32(9) + u32(5) + u64(3) + u32(7) + u32(0xFFFFFFFFu) + u32(9);  // i32 [7, -1, 9]
    g += str("a.w") + u32(2) + u64(32) + u64(2) + u32(8) + u64(0);  // Q8_0, ne = [32, 2]: 2 rows, 1 block each
    g += str("b.n") + u32(1) + u64(3) + u32(1) + u64(128);           // F16 [3] at 128 (68 bytes of a.w, aligned)
    const size_t data = (g.size() + 63) / 64 * 64;
    g.resize(data, '\0');
    for (int row = 0; row < 2; ++row) {
        g += row == 0 ? std::string("\x00\x3C", 2) : std::string("\x00\xC0", 2);  // d = 1, then -2
        for (int j = 0; j < 32; ++j) g.push_back(static_cast<char>(j - 3));
    }
    g.resize(data + 128, '\0');
    g += std::string("\x00\x3C\x00\x40\x00\xBC", 6);  // 1, 2, -1
    write_file(tmp / "literal.gguf", g);
    const GgufFile f = GgufFile::open(tmp / "literal.gguf");
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 64);
    CHECK(f.data_start() == data);
    CHECK(f.find("general.architecture")->s == "llama");
    const GgufValue* list = f.find("x.list");
    REQUIRE(list);
    CHECK(list->length == 3);
    REQUIRE(list->items.size() == 3);
    CHECK(list->items[1].integer() == std::optional<int64_t>(-1));
    const StoredTensor a = f.stored(*f.tensor("a.w"));
    CHECK(a.shape == std::vector<int64_t>{2, 32});  // ne reversed: row-major [ne1][ne0]
    CHECK(a.nbytes == 68);
    std::vector<float> av(64);
    decode_rows(a, 0, 2, av.data());
    CHECK(av[5] == 2.0f);                   // row 0: 1 * (5 - 3)
    CHECK(av[32 + 31] == -2.0f * 28);       // row 1: -2 * (31 - 3)
    std::vector<float> bv(3);
    decode_rows(f.stored(*f.tensor("b.n")), 0, 1, bv.data());
    CHECK(bv == std::vector<float>{1.0f, 2.0f, -1.0f});

    // safetensors: u64 header length, the JSON, the data (offsets relative to it).
    const std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},)"
                               R"("v":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
    std::string st = u64(header.size()) + header + std::string("\x80\x3F\x00\x40\x80\xBF\x00\x00", 8) + u32(0x40490FDBu);
    write_file(tmp / "literal.safetensors", st);
    const SafetensorsFile sf = SafetensorsFile::open(tmp / "literal.safetensors");
    CHECK(sf.metadata().at("format") == "pt");
    std::vector<float> wv(4), vv(1);
    decode_rows(sf.stored(*sf.find("w")), 0, 2, wv.data());
    decode_rows(sf.stored(*sf.find("v")), 0, 1, vv.data());
    CHECK(wv == std::vector<float>{1.0f, 2.0f, -1.0f, 0.0f});
    CHECK(vv[0] == 3.14159274f);
}

TEST_CASE("gpt-oss: a damaged file is refused naming the file and the key or tensor", "[weights]") {
    TmpDir tmp;
    ModelSpec s = llama_spec();
    s.arch = "gpt_oss", s.layers = 4, s.window = 3, s.theta = 150000, s.ffn_dim = 32;
    const Model m = random_model(s);
    const GgufDoc base = gguf_doc(m);
    int n = 0;
    auto doc_case = [&](const std::function<void(GgufDoc&)>& edit, std::vector<std::string> parts) {
        GgufDoc d = base;
        edit(d);
        const std::string path = tmp / ("go" + std::to_string(n++) + ".gguf");
        write_file(path, gguf_bytes(d));
        parts.insert(parts.begin(), path + ": ");
        refused(path, parts);
    };
    auto drop_key = [](const std::string& key) {
        return [key](GgufDoc& d) {
            d.kv.erase(std::remove_if(d.kv.begin(), d.kv.end(), [&](const GgufKv& kv) { return kv.key == key; }), d.kv.end());
        };
    };
    doc_case(drop_key("gpt-oss.attention.sliding_window"),
             {"gpt-oss.attention.sliding_window: missing (llama.cpp requires it for gpt-oss)"});
    doc_case(
        [](GgufDoc& d) {
            for (auto& kv : d.kv)
                if (kv.key == "gpt-oss.attention.sliding_window") kv = kv_u32(kv.key, 0);
        },
        {"gpt-oss.attention.sliding_window: expected a positive integer, found"});
    doc_case(drop_key("gpt-oss.expert_count"), {"gpt-oss.expert_count: missing"});
    doc_case([](GgufDoc& d) { tensor_named(d, "blk.1.attn_sinks.weight").ne = {3}; }, {"blk.1.attn_sinks.weight"});
    doc_case(
        [](GgufDoc& d) {
            d.tensors.erase(std::remove_if(d.tensors.begin(), d.tensors.end(),
                                           [](const GgufTensorOut& t) { return t.name == "blk.2.attn_output.bias"; }),
                            d.tensors.end());
        },
        {"blk.2.attn_output.bias: missing (o_bias is on: every layer has one)"});
    // safetensors: a sink per head, and an output bias on every layer
    Model bad = m;
    bad.tensors["model.layers.3.self_attn.sinks"] = HfTensor{{3}, {0.f, 0.f, 0.f}};
    write_hf(bad, tmp / "hf-sinks");
    refused(tmp / "hf-sinks", {"model.layers.3.self_attn.sinks"});
    Model nobias = m;
    nobias.tensors.erase("model.layers.1.self_attn.o_proj.bias");
    write_hf(nobias, tmp / "hf-nobias");
    refused(tmp / "hf-nobias", {"model.layers.1.self_attn.o_proj.bias: missing"});
}

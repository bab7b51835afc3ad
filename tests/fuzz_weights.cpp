// Fuzzing the checkpoint readers: valid safetensors checkpoints (one file,
// BF16, shards) and GGUF files (llama F32 / F16 / BF16 / Q8_0 / Q4_K_M / Q5_K_M, qwen3 Q4_0,
// llama3 with rope_freqs.weight), damaged in bytes and in structure, must each
// either load — every tensor decoded — or be refused with a WeightsError whose
// message starts with the damaged file's path: never a crash, a hang, a
// sanitizer report or any other exception.
//
// Built with -fsanitize=address,undefined over its own copy of the readers
// and the config loader (tests/CMakeLists.txt), linked with neither torch nor
// the rest of the harness.
//
//   fuzz_weights [variants] [seed]      (defaults: 4000, 1)
//   FUZZ_KEEP=i keeps variant i as ./fuzz_weights_variant_i; FUZZ_VERBOSE=1 prints each.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "weights/checkpoint.h"
#include "weights/stored.h"
#include "weights/writers.h"
#include "fuzz_mutate.h"

using namespace conform;
using namespace conform::weights;
using namespace conform::weights::testing;
using conform::test::below;
using conform::test::byte_edit;
using conform::test::ByteEditSizes;
namespace fs = std::filesystem;

namespace {

[[noreturn]] void die(const std::string& msg) {
    std::cerr << "fuzz_weights: harness error: " << msg << "\n";
    std::exit(2);
}

void poke_u64(std::string& b, size_t at, uint64_t v) {
    if (at + 8 <= b.size()) std::memcpy(&b[at], &v, 8);
}
void poke_u32(std::string& b, size_t at, uint32_t v) {
    if (at + 4 <= b.size()) std::memcpy(&b[at], &v, 4);
}

// ---- seeds ----------------------------------------------------------------------------

ModelSpec small(const std::string& arch, uint64_t seed) {
    ModelSpec s;
    s.arch = arch;
    s.d_model = 32, s.n_heads = 2, s.n_kv_heads = 1, s.head_dim = 16, s.ffn_dim = 64;
    s.layers = 2, s.vocab = 32, s.seed = seed;
    if (arch == "qwen3") s.head_dim = 32, s.tie = true;  // key_length != d/H
    return s;
}

// A safetensors entry with its span explicit, so edits can break the spans.
struct StEntry {
    std::string name, dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
};
struct StFile {
    std::vector<StEntry> entries;
    std::string data;
    std::string header_override;  // when set, the header text instead of the entries'
    bool length_override = false;
    uint64_t length = 0;
};
StFile st_file(const std::vector<StOut>& ts) {
    StFile f;
    for (const auto& t : ts) {
        f.entries.push_back({t.name, t.dtype, t.shape, f.data.size(), f.data.size() + t.bytes.size()});
        f.data += t.bytes;
    }
    return f;
}
std::string st_header(const StFile& f) {
    nlohmann::json h = nlohmann::json::object();
    h["__metadata__"] = {{"format", "pt"}};
    for (const auto& e : f.entries) h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
    return h.dump();
}
std::string st_bytes(const StFile& f) {
    std::string header = f.header_override.empty() ? st_header(f) : f.header_override;
    std::string out(8, '\0');
    poke_u64(out, 0, f.length_override ? f.length : header.size());
    return out + header + f.data;
}

struct HfSeed {
    std::vector<StFile> shards;  // one: model.safetensors; more: model-0000k-of-0000n + index
    std::string config, index_override;
};
std::string shard_name(size_t k, size_t n) {
    char b[64];
    std::snprintf(b, sizeof b, "model-%05zu-of-%05zu.safetensors", k + 1, n);
    return b;
}
void write_hf_seed(const HfSeed& s, const fs::path& dir) {
    fs::create_directories(dir);
    write_file((dir / "config.json").string(), s.config);
    if (s.shards.size() == 1) {
        write_file((dir / "model.safetensors").string(), st_bytes(s.shards[0]));
        return;
    }
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
    for (size_t k = 0; k < s.shards.size(); ++k) {
        for (const auto& e : s.shards[k].entries) index["weight_map"][e.name] = shard_name(k, s.shards.size());
        write_file((dir / shard_name(k, s.shards.size())).string(), st_bytes(s.shards[k]));
    }
    write_file((dir / "model.safetensors.index.json").string(), s.index_override.empty() ? index.dump() : s.index_override);
}
HfSeed hf_seed(const Model& m, const std::string& dtype, size_t shards) {
    HfSeed s;
    s.config = hf_config_json(m);
    std::vector<std::vector<StOut>> parts(shards);
    size_t k = 0;
    for (const auto& [name, t] : m.tensors) parts[k++ % shards].push_back({name, dtype, t.shape, encode(t.data, dtype)});
    for (const auto& p : parts) s.shards.push_back(st_file(p));
    return s;
}

struct Seed {
    std::string name;
    bool gguf;
    GgufDoc doc;
    HfSeed hf;
};

// ---- what a variant must do ------------------------------------------------------------

enum class Expect { refuse, either };

struct GgufEdit {
    std::string name;
    Expect expect;
    std::function<std::string(GgufDoc&, Rng&)> apply;  // the bytes to write
};
struct HfEdit {
    std::string name;
    Expect expect;
    std::function<void(HfSeed&, Rng&)> apply;
};

// The byte offset of the u64 length of the string `s` in `b` (the first one).
std::optional<size_t> length_of(const std::string& b, const std::string& s) {
    const size_t at = b.find(s);
    if (at == std::string::npos || at < 8) return std::nullopt;
    return at - 8;
}

std::vector<GgufEdit> gguf_edits() {
    std::vector<GgufEdit> e;
    auto pick = [](GgufDoc& d, Rng& r) -> GgufTensorOut& { return d.tensors[below(r, d.tensors.size())]; };
    e.push_back({"bad magic", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     std::string b = gguf_bytes(d);
                     b[below(r, 4)] ^= static_cast<char>(1 + below(r, 255));
                     return b;
                 }});
    e.push_back({"bad version", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     const uint32_t v[] = {0, 1, 4, 99, 0x03000000u, 0xFFFFFFFFu};
                     d.version = v[below(r, 6)];
                     return gguf_bytes(d);
                 }});
    e.push_back({"kv or tensor count huge", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     std::string b = gguf_bytes(d);
                     poke_u64(b, below(r, 2) ? 8 : 16, (uint64_t(1) << (20 + below(r, 44))) + below(r, 1000));
                     return b;
                 }});
    e.push_back({"a string's length past the end", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     std::string b = gguf_bytes(d);
                     const char* names[] = {"general.architecture", "general.name", "blk.0.attn_q.weight",
                                            "output_norm.weight", "tokenizer.ggml.tokens", "<t3>"};
                     if (auto at = length_of(b, names[below(r, 6)])) poke_u64(b, *at, b.size() + 1 + below(r, uint64_t(1) << 40));
                     else b.resize(3);
                     return b;
                 }});
    e.push_back({"an array's length past the end", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     std::string b = gguf_bytes(d);
                     const size_t at = b.find("tokenizer.ggml.tokens");
                     if (at == std::string::npos) b.resize(3);
                     else poke_u64(b, at + 21 + 4 + 4, (uint64_t(1) << (10 + below(r, 50))) + 1000);
                     return b;
                 }});
    e.push_back({"an offset out of range", Expect::refuse, [pick](GgufDoc& d, Rng& r) {
                     pick(d, r).offset = (uint64_t(1) << (20 + below(r, 43))) & ~uint64_t(31);
                     return gguf_bytes(d);
                 }});
    e.push_back({"an offset onto another tensor", Expect::refuse, [pick](GgufDoc& d, Rng& r) {
                     GgufTensorOut& t = pick(d, r);
                     GgufTensorOut& u = pick(d, r);
                     if (&t == &u) {
                         d.version = 0;  // nothing to overlap: refuse anyway
                         return gguf_bytes(d);
                     }
                     uint64_t at = 0;  // u's offset, as the writer lays the tensors out
                     for (const auto& x : d.tensors) {
                         if (&x == &u) break;
                         at += x.bytes.size() + (32 - x.bytes.size() % 32) % 32;
                     }
                     t.offset = at;
                     return gguf_bytes(d);
                 }});
    e.push_back({"a misaligned offset", Expect::refuse, [pick](GgufDoc& d, Rng& r) {
                     pick(d, r).offset = 1 + below(r, 31);
                     return gguf_bytes(d);
                 }});
    e.push_back({"a shape edited", Expect::refuse, [pick](GgufDoc& d, Rng& r) {
                     GgufTensorOut& t = pick(d, r);
                     const size_t k = below(r, t.ne.size());
                     switch (below(r, 3)) {
                         case 0: t.ne[k] = t.ne[k] > 1 ? t.ne[k] / 2 : 2; break;  // fewer elements: data still fits
                         case 1: t.ne.push_back(1 + below(r, 3)); if (t.ne.back() == 1) t.ne.back() = 2; break;
                         default: std::swap(t.ne[0], t.ne.back()); if (t.ne[0] == t.ne.back()) t.ne[0] *= 2;
                     }
                     return gguf_bytes(d);
                 }});
    e.push_back({"a tensor type changed", Expect::either, [pick](GgufDoc& d, Rng& r) {
                     pick(d, r).type = static_cast<uint32_t>(below(r, 45));
                     return gguf_bytes(d);
                 }});
    e.push_back({"a tensor removed", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     // Not rope_freqs.weight or output.weight (optional: without it the
                     // embedding is the LM head): every other tensor is needed.
                     size_t k = below(r, d.tensors.size());
                     if (d.tensors[k].name == "rope_freqs.weight" || d.tensors[k].name == "output.weight") k = 0;
                     d.tensors.erase(d.tensors.begin() + static_cast<long>(k));
                     return gguf_bytes(d);
                 }});
    e.push_back({"a required key removed", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     const char* keys[] = {"general.architecture", ".embedding_length", ".block_count", ".attention.head_count",
                                           ".feed_forward_length", ".attention.layer_norm_rms_epsilon", ".context_length"};
                     const std::string k = keys[below(r, 7)];
                     for (size_t i = 0; i < d.kv.size(); ++i)
                         if (d.kv[i].key == k || (k[0] == '.' && d.kv[i].key.size() > k.size() &&
                                                  d.kv[i].key.compare(d.kv[i].key.size() - k.size(), k.size(), k) == 0 &&
                                                  d.kv[i].key.find('.') == d.kv[i].key.size() - k.size())) {
                             d.kv.erase(d.kv.begin() + static_cast<long>(i));
                             break;
                         }
                     return gguf_bytes(d);
                 }});
    e.push_back({"a key's value type changed", Expect::either, [](GgufDoc& d, Rng& r) {
                     d.kv[below(r, d.kv.size())].type = static_cast<uint32_t>(below(r, 16));
                     return gguf_bytes(d);
                 }});
    e.push_back({"a key duplicated", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     d.kv.push_back(d.kv[below(r, d.kv.size())]);
                     return gguf_bytes(d);
                 }});
    e.push_back({"a size key changed", Expect::either, [](GgufDoc& d, Rng& r) {
                     GgufKv& kv = d.kv[below(r, d.kv.size())];
                     if (kv.type == 4) poke_u32(kv.value, 0, static_cast<uint32_t>(below(r, 3) ? below(r, 200) : r.next()));
                     else if (kv.type == 6) {
                         const float f[] = {0.0f, -1.0f, 1e-30f, 1e30f, std::nanf(""), INFINITY, 2.0f};
                         std::memcpy(&kv.value[0], &f[below(r, 7)], 4);
                     }
                     return gguf_bytes(d);
                 }});
    e.push_back({"an unknown architecture", Expect::refuse, [](GgufDoc& d, Rng& r) {
                     const char* a[] = {"mamba", "gpt2", "", "llama4", "qwen3moe"};
                     for (auto& kv : d.kv)
                         if (kv.key == "general.architecture") kv = kv_str(kv.key, a[below(r, 5)]);
                     return gguf_bytes(d);
                 }});
    return e;
}

std::vector<HfEdit> hf_edits() {
    std::vector<HfEdit> e;
    auto file = [](HfSeed& s, Rng& r) -> StFile& { return s.shards[below(r, s.shards.size())]; };
    auto entry = [file](HfSeed& s, Rng& r) -> StEntry& {
        StFile& f = file(s, r);
        return f.entries[below(r, f.entries.size())];
    };
    e.push_back({"header length past the end", Expect::refuse, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     f.length_override = true;
                     f.length = st_header(f).size() + f.data.size() + 1 + below(r, uint64_t(1) << 50);
                 }});
    e.push_back({"header length short or long by a little", Expect::refuse, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     f.length_override = true;
                     const uint64_t n = st_header(f).size();
                     f.length = below(r, 2) ? n - 1 - below(r, n - 1) : n + 1 + below(r, 16);
                 }});
    e.push_back({"an offset out of range", Expect::refuse, [entry](HfSeed& s, Rng& r) {
                     StEntry& x = entry(s, r);
                     x.end += 1 + below(r, uint64_t(1) << 40);
                     if (below(r, 2)) x.begin = x.end;
                 }});
    e.push_back({"overlapping spans", Expect::refuse, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     if (f.entries.size() < 2) {
                         f.entries[0].begin += 4;
                         return;
                     }
                     StEntry& a = f.entries[below(r, f.entries.size())];
                     StEntry& b = f.entries[below(r, f.entries.size())];
                     if (&a == &b || a.end == a.begin) {
                         f.entries[0].end += 4;
                         return;
                     }
                     const uint64_t n = a.end - a.begin;  // a moved onto b's start
                     a.begin = b.begin, a.end = b.begin + n;
                 }});
    e.push_back({"a shape edited", Expect::refuse, [entry](HfSeed& s, Rng& r) {
                     StEntry& x = entry(s, r);
                     if (x.shape.size() == 2 && x.shape[0] != x.shape[1] && below(r, 2)) std::swap(x.shape[0], x.shape[1]);
                     else if (below(r, 2)) x.shape.push_back(1);  // same bytes, one more dim
                     else x.shape[0] += 1;
                 }});
    e.push_back({"a dtype edited", Expect::refuse, [entry](HfSeed& s, Rng& r) {
                     const char* d[] = {"I32", "F64", "U8", "F12", "", "F8_E4M3", "BOOL", "I64"};
                     entry(s, r).dtype = d[below(r, 8)];
                 }});
    e.push_back({"a tensor removed", Expect::refuse, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     const size_t k = below(r, f.entries.size());
                     const StEntry gone = f.entries[k];
                     f.entries.erase(f.entries.begin() + static_cast<long>(k));
                     // Its bytes removed too, the spans after it moved down: a valid file without the tensor.
                     f.data.erase(gone.begin, gone.end - gone.begin);
                     for (auto& x : f.entries)
                         if (x.begin >= gone.end) x.begin -= gone.end - gone.begin, x.end -= gone.end - gone.begin;
                 }});
    e.push_back({"a duplicate name in the header", Expect::refuse, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     std::string h = st_header(f);
                     const StEntry& x = f.entries[below(r, f.entries.size())];
                     nlohmann::json one = {{"dtype", x.dtype}, {"shape", x.shape}, {"data_offsets", {x.begin, x.end}}};
                     h.insert(1, nlohmann::json(x.name).dump() + ":" + one.dump() + ",");
                     f.header_override = h;
                 }});
    e.push_back({"header JSON bytes mutated", Expect::either, [file](HfSeed& s, Rng& r) {
                     StFile& f = file(s, r);
                     std::string h = st_header(f);
                     for (size_t k = 0, n = 1 + below(r, 4); k < n; ++k) {
                         static const std::string junk = "{}[]\":,0-9e \x01\xff";
                         h[below(r, h.size())] = junk[below(r, junk.size())];
                     }
                     f.header_override = h;
                 }});
    e.push_back({"config.json damaged", Expect::either, [](HfSeed& s, Rng& r) {
                     if (below(r, 2)) s.config.resize(below(r, s.config.size()));
                     else
                         for (size_t k = 0, n = 1 + below(r, 4); k < n; ++k) {
                             static const std::string junk = "{}[]\":,0-9-";
                             s.config[below(r, s.config.size())] = junk[below(r, junk.size())];
                         }
                 }});
    e.push_back({"index damaged", Expect::either, [](HfSeed& s, Rng& r) {
                     if (s.shards.size() < 2) {
                         s.shards[0].length_override = true;  // a single file: break its header instead
                         s.shards[0].length = 0;
                         return;
                     }
                     nlohmann::json index = {{"weight_map", nlohmann::json::object()}};
                     for (size_t k = 0; k < s.shards.size(); ++k)
                         for (const auto& x : s.shards[k].entries) index["weight_map"][x.name] = shard_name(k, s.shards.size());
                     std::string t = index.dump();
                     for (size_t k = 0, n = 1 + below(r, 3); k < n; ++k) {
                         static const std::string junk = "{}[]\":,/.0-9";
                         t[below(r, t.size())] = junk[below(r, junk.size())];
                     }
                     s.index_override = t;
                 }});
    return e;
}

// ---- byte edits (tests/fuzz_mutate.h) ---------------------------------------------------

// The headers sit in the first few hundred bytes.
constexpr ByteEditSizes byte_sizes{/*head*/ 512, /*random_run*/ 16, /*fill_run*/ 64, /*copy_run*/ 64, /*append*/ 256};

// Loads everything a forward would touch.
void load_all(const std::string& path) {
    Checkpoint c = Checkpoint::open(path);
    for (int64_t l = 0; l < c.model().layers; ++l) c.layer(l);
    c.embedding();
    c.embedding_rows({0, c.model().vocab - 1});
    c.final_norm();
    c.lm_head();
    c.lm_head_columns(0, c.model().vocab);
}

}  // namespace

int main(int argc, char** argv) {
    const int variants = argc > 1 ? std::atoi(argv[1]) : 4000;
    Rng rng{argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1};
    ::alarm(240);  // a hang ends the run (and fails the test) instead of holding ctest
    const auto t0 = std::chrono::steady_clock::now();
    const fs::path dir = fs::temp_directory_path() / ("conform-fuzz-weights-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);

    // ---- the seeds, each loading cleanly ----------------------------------------------------
    std::vector<Seed> seeds;
    auto gguf_seed = [&](const std::string& name, const ModelSpec& s, uint32_t type, bool k_mix = false) {
        GgufOptions o;
        o.matrices = type;
        o.k_mix = k_mix;
        seeds.push_back({name, true, gguf_doc(random_model(s), o), {}});
    };
    gguf_seed("llama-f32", small("llama", 1), kGgmlF32);
    gguf_seed("llama-f16", small("llama", 2), kGgmlF16);
    gguf_seed("llama-bf16", small("llama", 3), kGgmlBF16);
    gguf_seed("llama-q8_0", small("llama", 4), kGgmlQ8_0);
    gguf_seed("qwen3-q4_0", small("qwen3", 5), kGgmlQ4_0);
    {
        ModelSpec s = small("llama", 10);  // rows of 256 for the super-blocks
        s.d_model = 256, s.head_dim = 128, s.ffn_dim = 256;
        gguf_seed("llama-q4_k_m", s, kGgmlQ4_K, true);
        gguf_seed("llama-q5_k_m", s, kGgmlQ5_K, true);
    }
    {
        ModelSpec s = small("llama", 6);
        s.theta = 500000;
        s.scaling.type = RopeScalingType::llama3;
        s.scaling.factor = 8, s.scaling.low_freq_factor = 1, s.scaling.high_freq_factor = 4, s.scaling.original_max_position = 8192;
        gguf_seed("llama3-f32", s, kGgmlF32);
    }
    seeds.push_back({"hf-f32", false, {}, hf_seed(random_model(small("llama", 7)), "F32", 1)});
    seeds.push_back({"hf-bf16-qwen3", false, {}, hf_seed(random_model(small("qwen3", 8)), "BF16", 1)});
    seeds.push_back({"hf-sharded", false, {}, hf_seed(random_model(small("llama", 9)), "F16", 3)});
    auto victim_path = [&](const Seed& s) { return (dir / (s.gguf ? "victim.gguf" : "victim")).string(); };
    auto write_seed = [&](const Seed& s, const std::string& path) {
        fs::remove_all(path);
        if (s.gguf) write_file(path, gguf_bytes(s.doc));
        else write_hf_seed(s.hf, path);
    };
    for (const auto& s : seeds) {
        write_seed(s, victim_path(s));
        try {
            load_all(victim_path(s));
        } catch (const std::exception& e) {
            die("seed " + s.name + " does not load: " + e.what());
        }
    }

    const std::vector<GgufEdit> gedits = gguf_edits();
    const std::vector<HfEdit> hedits = hf_edits();
    std::vector<int> gcount(gedits.size()), hcount(hedits.size());
    int loaded = 0, refused = 0, failures = 0, structural = 0, bytes_n = 0;
    size_t gi = 0, hi = 0;
    for (int i = 0; i < variants; ++i) {
        const Seed& seed = seeds[below(rng, seeds.size())];
        const std::string victim = victim_path(seed);
        fs::remove_all(victim);
        std::string what;
        Expect expect = Expect::either;
        if (i % 2 == 0) {  // structural, every edit in turn
            ++structural;
            if (seed.gguf) {
                const size_t k = gi++ % gedits.size();
                GgufDoc d = seed.doc;
                write_file(victim, gedits[k].apply(d, rng));
                what = "structural: " + gedits[k].name, expect = gedits[k].expect;
                ++gcount[k];
            } else {
                const size_t k = hi++ % hedits.size();
                HfSeed h = seed.hf;
                hedits[k].apply(h, rng);
                write_hf_seed(h, victim);
                what = "structural: " + hedits[k].name, expect = hedits[k].expect;
                ++hcount[k];
            }
        } else {  // bytes of the file, or of one file of the directory
            ++bytes_n;
            write_seed(seed, victim);
            std::string target = victim;
            if (!seed.gguf) {
                std::vector<std::string> files;
                for (const auto& f : fs::directory_iterator(victim)) files.push_back(f.path().string());
                std::sort(files.begin(), files.end());
                target = files[below(rng, files.size())];
            }
            std::string b = read_file(target);
            what = "bytes of " + fs::path(target).filename().string() + ": " + byte_edit(b, rng, byte_sizes);
            write_file(target, b);
        }
        what += " (of " + seed.name + ", variant " + std::to_string(i) + ")";
        if (const char* keep = std::getenv("FUZZ_KEEP"); keep && std::atoi(keep) == i) {
            const std::string to = "fuzz_weights_variant_" + std::to_string(i) + (seed.gguf ? ".gguf" : "");
            fs::remove_all(to);
            fs::copy(victim, to, fs::copy_options::recursive);
        }
        try {
            load_all(victim);
            ++loaded;
            if (expect == Expect::refuse) {
                ++failures;
                std::cerr << "FAIL: loaded, but must be refused: " << what << "\n";
            }
        } catch (const WeightsError& e) {
            ++refused;
            const std::string msg = e.what();
            if (msg.rfind(victim, 0) != 0) {
                ++failures;
                std::cerr << "FAIL: the message does not start with the damaged file's path: " << what << "\n  " << msg << "\n";
            }
            if (msg != printable(msg)) {  // one line of printable ASCII, whatever bytes the file held
                ++failures;
                std::cerr << "FAIL: a message with a newline or unprintable bytes: " << what << "\n  " << printable(msg) << "\n";
            }
            if (std::getenv("FUZZ_VERBOSE")) std::cerr << what << "\n  -> " << msg << "\n";
        } catch (const std::exception& e) {
            ++failures;
            std::cerr << "FAIL: " << what << ": not a WeightsError: " << e.what() << "\n";
        } catch (...) {
            ++failures;
            std::cerr << "FAIL: " << what << ": unknown exception\n";
        }
    }
    fs::remove_all(dir);
    for (size_t k = 0; k < gedits.size(); ++k)
        if (gcount[k] == 0) ++failures, std::cerr << "FAIL: GGUF edit never exercised: " << gedits[k].name << "\n";
    for (size_t k = 0; k < hedits.size(); ++k)
        if (hcount[k] == 0) ++failures, std::cerr << "FAIL: safetensors edit never exercised: " << hedits[k].name << "\n";
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "fuzz_weights: " << variants << " variants (" << structural << " structural over "
              << gedits.size() + hedits.size() << " kinds, " << bytes_n << " byte-level) of " << seeds.size()
              << " seed checkpoints: " << loaded << " loaded cleanly, " << refused << " refused with WeightsError, "
              << failures << " failures, " << secs << " s\n";
    return failures == 0 ? 0 : 1;
}

// ggml's block formats, dequantised bit-identically to ggml's own
// dequantisers: tests/weights/ggml_dequant_vectors.txt holds ggml's answers
// (per-chunk digests of its float32 output, recorded at a desk by
// scripts/ggml-dequant-vectors.c against ggml at the commit the file names)
// on the random blocks tests/weights/ggml_draw.h draws; here the same blocks
// go through conform's dequantisers.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "weights/error.h"
#include "weights/ggml_draw.h"
#include "weights/gguf.h"
#include "weights/stored.h"

using namespace conform::weights;

namespace {

struct VectorLine {
    std::string kind;
    uint32_t type = 0;
    int blocks = 0, chunk = 0;
    std::vector<uint64_t> digests;
};

std::vector<VectorLine> read_vectors(std::string* commit) {
    const std::string path = std::string(CONFORM_SOURCE_DIR) + "/tests/weights/ggml_dequant_vectors.txt";
    std::ifstream in(path);
    REQUIRE(in.good());
    std::vector<VectorLine> lines;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("#", 0) == 0) {
            if (const auto at = line.find("commit "); at != std::string::npos) *commit = line.substr(at + 7);
            continue;
        }
        std::istringstream s(line);
        VectorLine v;
        s >> v.kind >> v.type >> v.blocks >> v.chunk;
        for (std::string d; s >> d;) v.digests.push_back(std::stoull(d, nullptr, 16));
        REQUIRE(v.digests.size() == static_cast<size_t>(v.blocks / v.chunk));
        lines.push_back(std::move(v));
    }
    return lines;
}

}  // namespace

TEST_CASE("every ggml block format dequantises bit-identically to ggml's own", "[weights][dequant]") {
    std::string commit;
    const auto lines = read_vectors(&commit);
    INFO("ggml at commit " << commit);
    REQUIRE(commit.size() == 40);

    // Every block format conform reads has ggml's answers, and the draw table agrees with the reader's.
    for (int k = 0; k < CONFORM_GGML_KINDS; ++k) {
        const conform_ggml_kind& kind = conform_ggml_kinds[k];
        const auto enc = ggml_encoding(kind.ggml_type);
        REQUIRE(enc);
        CHECK(std::string(to_string(*enc)) == kind.name);
        CHECK(block_elements(*enc) == kind.block_elements);
        CHECK(block_bytes(*enc) == kind.block_bytes);
    }
    for (uint32_t type = 0; type < 64; ++type)
        if (const auto enc = ggml_encoding(type); enc && is_quantised(*enc)) {
            INFO(to_string(*enc));
            bool drawn = false, recorded = false;
            for (int k = 0; k < CONFORM_GGML_KINDS; ++k) drawn |= conform_ggml_kinds[k].ggml_type == type;
            for (const auto& v : lines) recorded |= v.type == type;
            CHECK(drawn);
            CHECK(recorded);
        }

    for (const auto& v : lines) {
        INFO(v.kind << " (ggml type " << v.type << ")");
        const conform_ggml_kind* kind = nullptr;
        for (int k = 0; k < CONFORM_GGML_KINDS; ++k)
            if (conform_ggml_kinds[k].ggml_type == v.type) kind = &conform_ggml_kinds[k];
        REQUIRE(kind);
        REQUIRE(v.kind == kind->name);
        REQUIRE(v.blocks >= 100000);
        REQUIRE(v.chunk == CONFORM_GGML_CHUNK);
        const Encoding enc = *ggml_encoding(v.type);

        std::vector<uint8_t> blocks(static_cast<size_t>(v.chunk) * kind->block_bytes);
        std::vector<float> out(static_cast<size_t>(v.chunk) * kind->block_elements);
        uint64_t s = CONFORM_GGML_SEED ^ (static_cast<uint64_t>(v.type) << 32);
        int differing = 0, first = -1;
        for (size_t c = 0; c < v.digests.size(); ++c) {
            for (int b = 0; b < v.chunk; ++b) conform_ggml_draw(kind, &s, blocks.data() + static_cast<size_t>(b) * kind->block_bytes);
            dequantise(enc, blocks.data(), static_cast<int64_t>(out.size()), out.data());
            if (conform_fnv1a(CONFORM_FNV_OFFSET, out.data(), static_cast<int64_t>(out.size())) != v.digests[c]) {
                ++differing;
                if (first < 0) first = static_cast<int>(c);
            }
        }
        INFO("first differing chunk: blocks [" << first * v.chunk << ", " << (first + 1) * v.chunk << ")");
        CHECK(differing == 0);
    }
}

TEST_CASE("a scale that makes a weight non-finite is refused naming tensor, row and block", "[weights][dequant]") {
    auto tensor = [](Encoding e, const std::vector<uint8_t>& bytes, std::vector<int64_t> shape) {
        StoredTensor t;
        t.file = "model.gguf";
        t.name = "blk.0.ffn_down.weight";
        t.shape = std::move(shape);
        t.encoding = e;
        t.data = bytes.data();
        t.nbytes = bytes.size();
        return t;
    };
    // Q4_K, 2 rows of 2 super-blocks; row 1's second block has d = +inf (f16 0x7C00)
    // and a nonzero scale, so its elements are inf or nan.
    std::vector<uint8_t> q4k(4 * 144, 0x11);
    for (int b = 0; b < 4; ++b) q4k[b * 144 + 0] = 0x00, q4k[b * 144 + 1] = 0x3C;  // d = 1
    q4k[3 * 144 + 0] = 0x00;
    q4k[3 * 144 + 1] = 0x7C;
    std::vector<float> out(2 * 512);
    CHECK_NOTHROW(decode_rows(tensor(Encoding::q4_k, q4k, {2, 512}), 0, 1, out.data()));
    CHECK_THROWS_WITH(decode_rows(tensor(Encoding::q4_k, q4k, {2, 512}), 0, 2, out.data()),
                      Catch::Contains("model.gguf: blk.0.ffn_down.weight: element [1, 256]") &&
                          Catch::Contains("Q4_K, block 1 of row 1, at byte 432 of the tensor") &&
                          Catch::Contains("must be finite"));

    // Q8_K's float32 d near FLT_MAX overflows with q = 2.
    std::vector<uint8_t> q8k(292, 0);
    const float big = 3e38f;
    std::memcpy(q8k.data(), &big, 4);
    q8k[4 + 7] = 2;
    CHECK_THROWS_WITH(decode_rows(tensor(Encoding::q8_k, q8k, {256}), 0, 1, out.data()),
                      Catch::Contains("element [0, 7] is inf (Q8_K, block 0 of row 0"));

    // A truncated super-block: the tensor's bytes end inside its last block.
    std::vector<uint8_t> short_q6k(210 * 2 - 1, 0);
    CHECK_THROWS_AS(decode_rows(tensor(Encoding::q6_k, short_q6k, {2, 256}), 0, 2, out.data()), WeightsError);
}

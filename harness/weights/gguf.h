// harness/weights/gguf.h — GGUF (llama.cpp's single-file format), v2 and v3,
// read in place.
//
// Layout (ggml docs/gguf.md), little-endian throughout:
//   "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count x { string key | u32 value_type | value }
//   tensor_count x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
//   zero padding to general.alignment (default 32) | tensor data
// where a string is u64 length + bytes (no terminator), an array is u32
// element type + u64 count + the elements, ne[0] is the fastest-varying
// dimension (a 2-D weight is ne = [in, out]: row-major [out][in]), and each
// offset is relative to the aligned start of the tensor data.
//
// Opening checks every length against the bytes that remain (counts, strings,
// arrays, dimensions), the value and tensor types, duplicate keys and names,
// the alignment, and that every tensor lies inside the file, aligned, without
// overlapping another. A tensor type stored.h does not decode is allowed in
// the file; it is refused when a tensor of that type is read.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "weights/mapped_file.h"
#include "weights/stored.h"

namespace conform::weights {

enum class GgufType : uint32_t {
    u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
    string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};
const char* to_string(GgufType t);  // "u32", "string", "array", ...

// One metadata value. Arrays keep their elements only up to kKeptItems
// (a vocabulary of 150k strings is skipped over; its length is kept).
struct GgufValue {
    static constexpr uint64_t kKeptItems = 4096;

    GgufType type = GgufType::u8;
    uint64_t u = 0;  // unsigned integers and bool
    int64_t i = 0;   // signed integers
    double f = 0;    // f32 (widened) and f64
    std::string s;   // string
    GgufType elem = GgufType::u8;  // arrays: element type, length, kept elements
    uint64_t length = 0;
    std::vector<GgufValue> items;

    bool is_integer() const;
    // The value as an integer / a number when it is one (any width), else nullopt.
    std::optional<int64_t> integer() const;
    std::optional<double> number() const;
    // "u32 4096", "string 'llama'", "array of 151936 string" (for messages).
    std::string describe() const;
};

struct GgufTensorInfo {
    std::string name;
    std::vector<uint64_t> ne;  // ne[0] fastest
    uint32_t type = 0;         // ggml_type
    uint64_t offset = 0;       // relative to the tensor data
    uint64_t nbytes = 0;
};

class GgufFile {
   public:
    // Throws WeightsError naming the file, the key or tensor, and the field.
    static GgufFile open(const std::string& path);

    const std::string& path() const { return file_.path(); }
    uint32_t version() const { return version_; }
    uint64_t alignment() const { return alignment_; }
    uint64_t data_start() const { return data_start_; }
    const std::map<std::string, GgufValue>& metadata() const { return kv_; }
    const GgufValue* find(const std::string& key) const;  // nullptr when absent
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
    const GgufTensorInfo* tensor(const std::string& name) const;          // nullptr when absent

    // The tensor as one to decode (shape = ne reversed); a ggml type stored.h
    // does not decode is refused, naming tensor and type.
    StoredTensor stored(const GgufTensorInfo& t) const;

   private:
    MappedFile file_;
    uint32_t version_ = 0;
    uint64_t alignment_ = 32;
    uint64_t data_start_ = 0;
    std::map<std::string, GgufValue> kv_;
    std::vector<GgufTensorInfo> tensors_;
    std::map<std::string, size_t> by_name_;
};

// ggml's name of a tensor type ("Q4_K"), or nullptr for a number that is none.
const char* ggml_type_name(uint32_t type);
// The Encoding of a ggml type the readers decode, or nullopt.
std::optional<Encoding> ggml_encoding(uint32_t type);

}  // namespace conform::weights

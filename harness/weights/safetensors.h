// harness/weights/safetensors.h — Hugging Face safetensors, read in place.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v", ...},
//    "NAME": {"dtype": "BF16", "shape": [out, in], "data_offsets": [begin, end]}, ...}
// and the data section, whose bytes [begin, end) (relative to its start) are
// the tensor, row-major. Opening checks everything a tensor read relies on:
// N within the file, valid JSON, no name twice, every dtype known, shapes of
// non-negative integers, each span's length = elements x dtype size, and the
// spans tiling the data section exactly (no overlap, no gap, nothing past the
// end), as the safetensors library itself requires.
//
// A sharded checkpoint is a directory with model.safetensors.index.json,
// whose "weight_map" names the shard (a file beside the index) holding each
// tensor; every shard is opened (and checked) and mapped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "weights/mapped_file.h"
#include "weights/stored.h"

namespace conform::weights {

struct SafetensorsEntry {
    std::string name;
    std::string dtype;           // as the header spells it: "F32", "BF16", "I64", ...
    std::vector<int64_t> shape;  // row-major, slowest first
    uint64_t begin = 0, end = 0;  // byte span inside the data section
};

// One .safetensors file, checked and mapped.
class SafetensorsFile {
   public:
    // Throws WeightsError naming the file, the tensor and the field.
    static SafetensorsFile open(const std::string& path);

    const std::string& path() const { return file_.path(); }
    const std::vector<SafetensorsEntry>& entries() const { return entries_; }  // in data order
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const SafetensorsEntry* find(const std::string& name) const;  // nullptr when absent

    // The entry as a float tensor to decode; a dtype other than F32, F16 and
    // BF16 is refused (WeightsError naming file, tensor and dtype).
    StoredTensor stored(const SafetensorsEntry& e) const;

   private:
    MappedFile file_;
    uint64_t data_start_ = 0;
    std::vector<SafetensorsEntry> entries_;
    std::map<std::string, size_t> by_name_;
    std::map<std::string, std::string> metadata_;
};

// A checkpoint: one file, or the shards an index names.
class Safetensors {
   public:
    // `path`: a .safetensors file; a directory holding
    // model.safetensors.index.json (sharded) or model.safetensors; or the
    // index file itself.
    static Safetensors open(const std::string& path);

    const std::string& directory() const { return dir_; }  // where config.json is looked for
    const std::string& index() const { return index_; }    // "" for a single file
    const std::vector<SafetensorsFile>& files() const { return files_; }
    size_t tensor_count() const { return where_.size(); }
    std::vector<std::string> names() const;

    // The file holding `name` and its entry, or nullopt.
    struct Found {
        const SafetensorsFile* file;
        const SafetensorsEntry* entry;
    };
    std::optional<Found> find(const std::string& name) const;

   private:
    std::string dir_, index_;
    std::vector<SafetensorsFile> files_;
    std::map<std::string, size_t> where_;  // tensor -> index into files_
};

// Bytes per element of a safetensors dtype, or 0 when the dtype is not one.
int64_t safetensors_dtype_size(const std::string& dtype);

}  // namespace conform::weights

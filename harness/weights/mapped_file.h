// harness/weights/mapped_file.h — a whole file mapped read-only.
//
// Checkpoints are read in place: a tensor is decoded straight from the
// mapping when it is asked for, so only the pages of the tensors in use are
// ever resident (one layer at a time, whatever the model's size).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conform::weights {

// Move-only owner of one read-only mapping (the descriptor is closed as soon
// as the mapping exists; the mapping keeps the file's pages reachable).
class MappedFile {
   public:
    // Maps `path`; throws WeightsError naming the file and the system's reason.
    // An empty file is valid and maps to size() == 0, data() == nullptr.
    static MappedFile open(const std::string& path);

    MappedFile() = default;
    MappedFile(MappedFile&& o) noexcept;
    MappedFile& operator=(MappedFile&& o) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

   private:
    void release() noexcept;

    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    std::string path_;
};

}  // namespace conform::weights

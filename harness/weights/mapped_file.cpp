#include "weights/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "weights/error.h"

namespace conform::weights {

namespace {

// The descriptor lives only while the mapping is made.
class Fd {
   public:
    explicit Fd(int fd) : fd_(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    int get() const { return fd_; }

   private:
    int fd_;
};

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
    throw WeightsError(path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

MappedFile MappedFile::open(const std::string& path) {
    // O_NONBLOCK: a FIFO opens at once (and is then refused as not a regular file) instead of waiting for a writer.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) fail(path, "cannot open", errno);
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) fail(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode)) throw WeightsError(path + ": not a regular file");
    MappedFile m;
    m.path_ = path;
    m.size_ = static_cast<size_t>(st.st_size);
    if (m.size_ == 0) return m;  // mmap refuses length 0
    void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (p == MAP_FAILED) fail(path, "cannot map", errno);
    m.data_ = static_cast<const uint8_t*>(p);
    return m;
}

MappedFile::MappedFile(MappedFile&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), path_(std::move(o.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
    if (this != &o) {
        release();
        data_ = std::exchange(o.data_, nullptr);
        size_ = std::exchange(o.size_, 0);
        path_ = std::move(o.path_);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() noexcept {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace conform::weights

#include "core/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/case.h"  // InputError

namespace conform {

std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes) {
    const std::string& where = path;
    // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw InputError(where + ": cannot open (" + what + "): " + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw InputError(where + ": cannot stat (" + what + "): " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) throw InputError(where + ": not a regular file (a FIFO, a device or a directory), expected " + what);
    if (st.st_size > max_bytes)
        throw InputError(where + ": " + std::to_string(st.st_size) + " bytes, more than the " +
                         std::to_string(max_bytes) + " " + what + " may have");
    std::string text(static_cast<size_t>(st.st_size), '\0');
    size_t got = 0;
    while (got < text.size()) {
        const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw InputError(where + ": cannot read (" + what + "): " + std::strerror(errno));
        if (n == 0) break;  // shorter than it was a moment ago
        got += static_cast<size_t>(n);
    }
    text.resize(got);
    return text;
}

}  // namespace conform

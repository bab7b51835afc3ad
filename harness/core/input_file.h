// harness/core/input_file.h — reading a file conform is given, before it is trusted.
#pragma once

#include <cstdint>
#include <string>

namespace conform {

// The whole of a regular file of at most max_bytes. What is not a regular
// file (a FIFO, a device such as /dev/zero, a directory) is refused before
// anything is read from it — opened without blocking, so that a FIFO with
// no writer does not wait forever — and so is a larger file. Throws
// InputError naming the file and what it was read as (`what`: "config.json").
std::string read_input_file(const std::string& path, const std::string& what, int64_t max_bytes);

}  // namespace conform

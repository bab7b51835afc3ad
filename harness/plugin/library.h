// harness/plugin/library.h — opening a plugin library (conform/plugin.h):
// dlopen, the one exported symbol, the table's checks. Only conform-worker
// calls this: the judge never loads a plugin into its own process.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>

#include "plugin/adapter.h"

namespace conform::plugin {

// A library that is not a usable conform plugin: missing, not loadable, no
// entry symbol, another ABI version, a malformed table. The message names the
// file and what is wrong.
struct LibraryError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Opens it (RTLD_NOW | RTLD_LOCAL; never closed: a plugin may leave thread
// destructors or atexit handlers pointing into its code) and checks its table.
std::shared_ptr<const Library> open_library(const std::string& path);

}  // namespace conform::plugin

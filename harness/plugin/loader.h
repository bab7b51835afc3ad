// harness/plugin/loader.h — `--impl-lib libfoo.so`: load out-of-tree
// implementations (conform/plugin.h) and hand them to the harness as
// ImplEntry, the same record the in-repo registry uses. Anything that runs
// implementations (the gate, bench, list) calls load_plugins() and then treats
// the entries like registry entries.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "registry.h"

namespace conform::plugin {

// A library conform cannot use: missing, not loadable, not a conform plugin,
// another ABI version, a malformed table, a name already taken. The message
// names the file and what is wrong. A usage error: exit 2.
struct PluginError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct LoadOptions {
    // Every call of the plugin (and the load itself) in a forked child, so a
    // crash is a failed case rather than a crashed conform. See isolate.h.
    bool isolate = true;
    double timeout_s = 60;  // per isolated call
};

struct Plugin {
    std::string path;    // as given
    ImplEntry entry;     // name (the table's), description, available(), create()
    std::string ops;     // "rmsnorm, rope": the ops it implements
    std::string dtypes;  // "f32": the dtypes it runs in
};

// Loads each library in order. Throws PluginError on the first one that
// cannot be used. Libraries are never unloaded.
std::vector<Plugin> load_plugins(const std::vector<std::string>& paths, const LoadOptions& o = {});

// The plugin of that name, or nullptr.
const Plugin* find_plugin(const std::vector<Plugin>& plugins, const std::string& name);

}  // namespace conform::plugin

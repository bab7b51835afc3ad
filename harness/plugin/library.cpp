#include "plugin/library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstring>

#include "plugin/adapter.h"

namespace conform::plugin {

namespace {


// ABI 1 is the first version, so today's table is exactly its size. When a
// field is appended, this stays the size of version 1's fields: a table that
// size or larger has everything version 1 needs.
constexpr size_t kAbi1TableSize = offsetof(conform_plugin, abi_minor);

bool valid_name(const char* s) {
    if (s == nullptr || *s == '\0') return false;
    size_t n = 0;
    for (; s[n] != '\0'; ++n) {
        const char c = s[n];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                        c == '-' || c == '.';
        if (!ok || n > 64) return false;
    }
    return true;
}

// What is wrong with a table, or "".
std::string check_table(const conform_plugin* t) {
    if (t == nullptr) return CONFORM_PLUGIN_ENTRY_SYMBOL "() returned NULL";
    // The version first: nothing else in the table can be read under another version's layout.
    if (t->abi_version != CONFORM_PLUGIN_ABI_VERSION)
        return "built against plugin ABI version " + std::to_string(t->abi_version) +
               ", but this conform speaks version " + std::to_string(CONFORM_PLUGIN_ABI_VERSION) +
               "; rebuild it against this conform's conform/plugin.h";
    if (t->struct_size < kAbi1TableSize)
        return "its conform_plugin table claims " + std::to_string(t->struct_size) + " bytes (struct_size), fewer than the " +
               std::to_string(kAbi1TableSize) + " of ABI version 1; set struct_size = sizeof(conform_plugin)";
    if (!valid_name(t->name))
        return "its name must be 1 to 64 characters of [A-Za-z0-9_.-], found " +
               (t->name ? "'" + std::string(t->name) + "'" : std::string("NULL"));
    if (!(t->dtypes & (CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32) | CONFORM_DTYPE_BIT(CONFORM_DTYPE_BF16) |
                       CONFORM_DTYPE_BIT(CONFORM_DTYPE_F16))))
        return "its table declares no dtype it runs in (dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32) | ...)";
    if (ops_of(*t).empty()) return "its table implements no op (every op function is NULL)";
    for (Op op : kAllOps) {
        if (!implements(*t, op)) continue;
        ActQuant q = ActQuant::none;
        try {
            q = declared_act_quant(*t, op);
        } catch (const ImplError& e) {
            return std::string("its table's ") + e.what();
        }
        if (q != ActQuant::none && !has_weight_products(op))
            return std::string("its table's activation_quant(") + to_string(op) + ") is " + to_string(q) + ", but " +
                   to_string(op) + " has no weight product (only swiglu, block and decode quantise activations)";
    }
    return "";
}

// dlopen + dlsym + the table's checks; throws PluginError naming the file.
}  // namespace

std::shared_ptr<const Library> open_library(const std::string& path) {
    struct stat st{};
    if (stat(path.c_str(), &st) != 0) throw LibraryError(path + ": no such file");
    if (!S_ISREG(st.st_mode)) throw LibraryError(path + ": not a regular file");
    // Without a slash dlopen would search the library path instead of opening this file.
    const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
    dlerror();
    // RTLD_LOCAL: two plugins may define the same symbols; RTLD_NOW: an
    // unresolved symbol is a load error now, not a crash in the middle of a case.
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* e = dlerror();
        throw LibraryError(path + ": cannot load it: " + (e ? e : "dlopen failed"));
    }
    dlerror();
    void* sym = dlsym(handle, CONFORM_PLUGIN_ENTRY_SYMBOL);
    if (sym == nullptr)
        throw LibraryError(path + ": not a conform plugin: it exports no " CONFORM_PLUGIN_ENTRY_SYMBOL
                                 " (define it with CONFORM_PLUGIN_EXPORT, extern \"C\" in C++; see impls/PLUGINS.md)");
    conform_plugin_get_fn get;
    static_assert(sizeof get == sizeof sym, "function and object pointers differ in size");
    std::memcpy(&get, &sym, sizeof get);
    const conform_plugin* table = get();
    const std::string wrong = check_table(table);
    if (!wrong.empty()) throw LibraryError(path + ": " + wrong);

    auto lib = std::make_shared<Library>();
    lib->path = path;
    // Never dlclose'd: a plugin may leave thread-local destructors, atexit
    // handlers or runtime state behind that would then point into unmapped code.
    lib->handle = handle;
    lib->table = table;
    lib->name = table->name;
    lib->description = table->description ? table->description : "";
    return lib;
}


}  // namespace conform::plugin

#include "plugin/library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstddef>
#include <cstring>

#include "plugin/adapter.h"

namespace conform::plugin {

namespace {


// The first fields every version's table shares: its version and its size.
struct Head {
    uint32_t abi_version;
    uint32_t struct_size;
};

// Version 1's table is at least 1.0's fields; version 2's, its fields before
// the functions appended since (the mixture of experts' first), which a
// table has where its struct_size covers them.
constexpr size_t kAbi1TableSize = offsetof(conform_v1_plugin, abi_minor);
constexpr size_t kAbi2TableSize = offsetof(conform_plugin, moe_route);

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

// What is wrong with a library's table, or "": its name, dtypes, ops, and
// what it declares (activation_quant; version 2's twists), asked now so that
// a bad answer is a load error, not a failed case.
std::string check_table(const Library& l) {
    if (!valid_name(l.name.empty() ? nullptr : l.name.c_str()))
        return "its name must be 1 to 64 characters of [A-Za-z0-9_.-], found '" + l.name + "'";
    if (!(l.dtypes & (CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32) | CONFORM_DTYPE_BIT(CONFORM_DTYPE_BF16) |
                      CONFORM_DTYPE_BIT(CONFORM_DTYPE_F16))))
        return "its table declares no dtype it runs in (dtypes = CONFORM_DTYPE_BIT(CONFORM_DTYPE_F32) | ...)";
    if (ops_of(l).empty()) return "its table implements no op (every op function is NULL)";
    for (Op op : kAllOps) {
        if (!implements(l, op)) continue;
        ActQuant q = ActQuant::none;
        try {
            q = declared_act_quant(l, op);
            (void)declared_twists(l, op);
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
    using Get = const void* (*)();
    Get get;
    static_assert(sizeof get == sizeof sym, "function and object pointers differ in size");
    std::memcpy(&get, &sym, sizeof get);
    const void* table = get();
    if (table == nullptr) throw LibraryError(path + ": " CONFORM_PLUGIN_ENTRY_SYMBOL "() returned NULL");
    // The version first: nothing else in the table can be read under another version's layout.
    Head head;
    std::memcpy(&head, table, sizeof head);
    auto lib = std::make_shared<Library>();
    lib->path = path;
    lib->abi = head.abi_version;
    if (head.abi_version == 1) {
        if (head.struct_size < kAbi1TableSize)
            throw LibraryError(path + ": its conform_plugin table claims " + std::to_string(head.struct_size) +
                               " bytes (struct_size), fewer than the " + std::to_string(kAbi1TableSize) +
                               " of ABI version 1; set struct_size = sizeof(conform_plugin)");
        lib->table_v1 = static_cast<const conform_v1_plugin*>(table);
        lib->name = lib->table_v1->name ? lib->table_v1->name : "";
        lib->description = lib->table_v1->description ? lib->table_v1->description : "";
        lib->dtypes = lib->table_v1->dtypes;
    } else if (head.abi_version == CONFORM_PLUGIN_ABI_VERSION) {
        if (head.struct_size < kAbi2TableSize)
            throw LibraryError(path + ": its conform_plugin table claims " + std::to_string(head.struct_size) +
                               " bytes (struct_size), fewer than the " + std::to_string(kAbi2TableSize) +
                               " of ABI version 2; set struct_size = sizeof(conform_plugin)");
        lib->table = static_cast<const conform_plugin*>(table);
        lib->name = lib->table->name ? lib->table->name : "";
        lib->description = lib->table->description ? lib->table->description : "";
        lib->dtypes = lib->table->dtypes;
    } else {
        throw LibraryError(path + ": built against plugin ABI version " + std::to_string(head.abi_version) +
                           ", but this conform speaks versions 1 (conform/plugin_v1.h) and " +
                           std::to_string(CONFORM_PLUGIN_ABI_VERSION) + " (conform/plugin.h); rebuild it against " +
                           "this conform's conform/plugin.h");
    }
    const std::string wrong = check_table(*lib);
    if (!wrong.empty()) throw LibraryError(path + ": " + wrong);
    // Never dlclose'd: a plugin may leave thread-local destructors, atexit
    // handlers or runtime state behind that would then point into unmapped code.
    lib->handle = handle;
    return lib;
}


}  // namespace conform::plugin

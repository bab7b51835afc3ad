// conform-worker — the process conform runs foreign code in (impls/WORKERS.md).
//
//   conform-worker [--memory BYTES] [--cpu SECONDS] --plugin LIB.so
//   conform-worker [--memory BYTES] [--cpu SECONDS] --builtin NAME
//   conform-worker [--memory BYTES] [--cpu SECONDS] --exec -- COMMAND ARGS...
//
// It sandboxes itself first (sandbox.h: limits, no privileges, a seccomp
// filter; no new processes for --plugin and --builtin), then loads the
// plugin (its constructors run sandboxed too) or makes the in-repo
// implementation and serves the protocol on stdin/stdout — or execs the
// command, which inherits the sandbox. Only the judge starts it.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "plugin/adapter.h"
#include "plugin/library.h"
#include "registry.h"
#include "worker/protocol.h"
#include "worker/sandbox.h"
#include "worker/server.h"

using namespace conform;
using namespace conform::worker;

namespace {

int usage(const std::string& why) {
    std::cerr << "conform-worker: " << why
              << "\nusage: conform-worker [--memory BYTES] [--cpu SECONDS] (--plugin LIB.so | --builtin NAME | --exec -- "
                 "COMMAND...)\n(conform starts it; see impls/WORKERS.md)\n";
    return 2;
}

// The protocol keeps the real stdout; fd 1 becomes stderr, so a library
// that prints cannot break the protocol (its words are relayed, prefixed).
int take_stdout() {
    const int proto = ::dup(1);
    ::dup2(2, 1);
    return proto;
}

// Answers the hello with an error, for a worker that cannot serve.
int refuse(int out, const std::string& kind, const std::string& message) {
    try {
        // Wait for conform's hello first, so the answer is one it expects.
        (void)read_frame(0, nullptr);
        write_frame(out, {{"type", "error"}, {"id", 0}, {"kind", kind}, {"message", message}}, {}, nullptr);
    } catch (const std::exception&) {
    }
    std::cerr << "conform-worker: " << message << "\n";
    return 3;
}

ServerInfo plugin_info(std::shared_ptr<const plugin::Library> lib) {
    ServerInfo info;
    info.name = lib->name;
    info.description = lib->description;
    for (Op op : kAllOps)
        if (plugin::implements(*lib, op)) info.ops.push_back(op);
    for (DType d : {DType::f32, DType::bf16, DType::f16})
        if (lib->dtypes & CONFORM_DTYPE_BIT(plugin::dtype_code(d))) info.dtypes.push_back(d);
    info.supports = true;  // the adapter answers: ABI limits, then the plugin's own supports()
    info.make = [lib](DType d) { return plugin::make_adapter(lib, d); };
    info.kernel_seconds = plugin::last_kernel_seconds;  // the plugin's function alone, not the adapter's checks
    return info;
}

}  // namespace

int main(int argc, char** argv) {
    Limits limits;
    limits.cpu_seconds = 0;
    std::string plugin, builtin, simd_target;
    int threads = 0;
    std::vector<std::string> exec;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&](const char* what) -> std::string {
            if (i + 1 >= argc) throw std::invalid_argument(std::string(what) + " needs a value");
            return argv[++i];
        };
        try {
            if (a == "--memory") limits.memory_bytes = std::stoull(next("--memory"));
            else if (a == "--cpu") limits.cpu_seconds = std::stoull(next("--cpu"));
            else if (a == "--plugin") plugin = next("--plugin");
            else if (a == "--builtin") builtin = next("--builtin");
            else if (a == "--simd-target") simd_target = next("--simd-target");
            else if (a == "--threads") threads = std::stoi(next("--threads"));
            else if (a == "--exec") {
                if (i + 1 < argc && std::string(argv[i + 1]) == "--") ++i;
                for (++i; i < argc; ++i) exec.push_back(argv[i]);
            } else return usage("unknown argument '" + a + "'");
        } catch (const std::exception& e) {
            return usage(e.what());
        }
    }
    if (int(!plugin.empty()) + int(!builtin.empty()) + int(!exec.empty()) != 1)
        return usage("give exactly one of --plugin, --builtin, --exec");

    const std::string jail = enter_sandbox(exec.empty() ? Sandbox::plugin : Sandbox::command, limits);
    if (!jail.empty()) {
        std::cerr << "conform-worker: cannot enter its sandbox: " << jail << "\n";
        return 3;
    }
    if (!exec.empty()) {
        ::setenv("CONFORM_WORKER", "1", 1);  // the Python client moves fds 0 and 1 at import (impls/WORKERS.md)
        std::vector<char*> args;
        for (auto& e : exec) args.push_back(e.data());
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        std::cerr << "conform-worker: cannot run '" << exec[0] << "': " << std::strerror(errno) << "\n";
        return 127;
    }
    const int out = take_stdout();
    ServerInfo info;
    if (!plugin.empty()) {
        try {
            info = plugin_info(plugin::open_library(plugin));
        } catch (const std::exception& e) {
            return refuse(out, "invalid_argument", e.what());
        }
    } else {
        const ImplEntry* e = find_implementation(builtin);
        if (!e) return refuse(out, "invalid_argument", "no in-repo implementation '" + builtin + "'");
        if (const Availability a = e->available(); !a.available) return refuse(out, "unavailable", builtin + ": " + a.reason);
        info.name = e->name;
        info.description = e->description;
        {
            ImplOptions o;  // what it implements does not depend on the dtype
            const std::unique_ptr<Implementation> probe = e->create(o);
            for (Op op : kAllOps)
                if (probe->implements(op)) info.ops.push_back(op);
        }
        info.supports = true;
        info.make = [e, simd_target, threads](DType d) {
            ImplOptions o;
            o.dtype = d;
            o.simd_target = simd_target;
            o.threads = threads;
            return e->create(o);
        };
        for (DType d : {DType::f32, DType::bf16, DType::f16}) {  // the dtypes it can be made in
            try {
                info.make(d);
                info.dtypes.push_back(d);
            } catch (const std::exception&) {
            }
        }
    }
    return serve(info, 0, out);
}

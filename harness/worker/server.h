// harness/worker/server.h — the C++ side of a worker: serves the protocol
// (impls/WORKERS.md) for any conform::Implementation made on demand per
// dtype — a plugin through the C ABI adapter, or an in-repo implementation
// (`conform --isolate`). Used by `conform-worker`.
//
// Per call it checks, for honest mistakes (a hostile implementation shares
// this process and can lie; the judge trusts none of it): outputs filled
// with the call's poison beforehand and followed by random sentinels, placed
// at a fresh, randomly offset address every call; inputs compared with a
// copy afterwards.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "conform/impl.h"

namespace conform::worker {

struct ServerInfo {
    std::string name, description;
    std::vector<Op> ops;
    std::vector<DType> dtypes;
    bool supports = true;  // answers supports requests
    // The implementation that runs in a dtype (made once, on first use).
    std::function<std::unique_ptr<Implementation>(DType)> make;
    // The kernel's own seconds in the call just made (a plugin: the adapter
    // times the plugin's function alone); unset: the whole dispatch is timed.
    std::function<double()> kernel_seconds;
};

// Serves until bye or EOF on in_fd. Returns the exit status (0: bye or EOF;
// 2: a request that breaks the protocol, reported on stderr).
int serve(const ServerInfo& info, int in_fd, int out_fd);

}  // namespace conform::worker

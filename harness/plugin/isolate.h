// harness/plugin/isolate.h — run an implementation's calls in a forked child,
// so that a crash, a hang or a stray write in foreign code is a failed case
// with a precise message, and never the end of conform.
//
// How a call travels:
//   * the inputs are already in conform's memory; fork() gives the child a
//     copy, so nothing is serialised;
//   * the outputs are staged in one MAP_SHARED anonymous mapping that both
//     processes see. Each output is copied in as the harness prepared it
//     (poisoned by run_impl), preceded and followed by sentinels, and every
//     output's pages are fenced by no-access pages. After the child returns,
//     the sentinels are checked and only the output elements are copied back,
//     so run_impl's own poison and sentinel checks still see exactly what the
//     implementation wrote;
//   * the parent waits up to a timeout; a signal, an exit() or a timeout in
//     the child becomes an ImplError naming the op ("crashed with signal 11
//     (SIGSEGV) in rope").
//
// Costs: one fork() per call, several milliseconds with LibTorch loaded. A child
// inherits only the calling thread; runtimes that keep thread pools or device
// contexts across calls (some OpenMP runtimes, CUDA) may not work in the child:
// run those with --no-isolate.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "conform/impl.h"
#include "core/child.h"

namespace conform::isolate {

struct Options {
    double timeout_s = 60;      // per call; a child still running then is killed (SIGKILL)
    bool supports_too = true;   // also run supports() in a child (it is foreign code for a plugin)
};

// Wraps `inner` so that each of its calls runs in a forked child.
std::unique_ptr<Implementation> isolated(std::unique_ptr<Implementation> inner, const Options& o = {});

// The child process itself: harness/core/child.h.
using child::ChildResult;
using child::describe;
using child::run_in_child;

}  // namespace conform::isolate

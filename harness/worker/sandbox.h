// harness/worker/sandbox.h — what a worker may do, set up by conform-worker
// on itself before it loads a plugin or execs a command (so the pid the
// filter names is its own, and no judge code runs in between):
//
//   * RLIMIT_AS (memory), RLIMIT_CPU, no core files;
//   * PR_SET_NO_NEW_PRIVS, and every capability dropped (bounding, ambient,
//     effective, permitted, inheritable): even as root, without
//     CAP_SYS_PTRACE it cannot open /proc/<judge>/mem of the non-dumpable
//     judge, nor ptrace it;
//   * a seccomp filter (x86-64; other ABIs are refused): no ptrace,
//     process_vm_readv/writev, pidfd_*, setsid/setpgid (whatever it starts
//     stays in its group, killed with it), namespaces, mounts, io_uring, bpf,
//     modules; kill and tgkill only to itself or its own group. A plugin
//     worker also starts no process at all: no fork, vfork, exec, or clone
//     without CLONE_THREAD (clone3 answers ENOSYS, so libc falls back to
//     clone, whose flags the filter can read).
//
// A refused call returns EPERM. In a plugin worker the filter traps instead
// (SIGSYS), and conform-worker's handler returns EPERM after writing
// "conform-worker: the sandbox refused fork (...)" to stderr, once per
// system call, so the judge's relay shows why. A command's runtime replaces
// the handler when it execs: there it is a plain EPERM.
#pragma once

#include <cstdint>
#include <string>

namespace conform::worker {

enum class Sandbox {
    command,  // --impl-cmd: a language runtime that may start helpers (a compiler, a pool)
    plugin,   // conform-worker hosting a C plugin: not even a child process
};

struct Limits {
    uint64_t memory_bytes = 0;    // RLIMIT_AS; 0: none
    uint64_t cpu_seconds = 3600;  // RLIMIT_CPU; 0: none
};

// Applies everything above to the calling process; "" on success, else
// what could not be set (the caller refuses to go on).
std::string enter_sandbox(Sandbox s, const Limits& limits);

}  // namespace conform::worker

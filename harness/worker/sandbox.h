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
//     modules; kill and tgkill only to itself or its own group; prlimit,
//     setpriority, ioprio_set and sched_set* only on itself, F_SETOWN only
//     to itself or its group, no F_SETOWN_EX, FIOSETOWN or SIOCSPGRP (the
//     kernel would act on the judge for it); a plugin
//     worker also starts no process at all: no fork, vfork, exec, or clone
//     without CLONE_THREAD (clone3 answers ENOSYS, so libc falls back to
//     clone, whose flags the filter can read);
//   * a Landlock domain of its own (Linux >= 5.13): no ptrace or
//     /proc/PID/{mem,fd} of any process outside it, siblings included; with
//     Landlock ABI 6 (Linux 6.12) no signal out of it either.
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
// After enter_sandbox: "landlock domain[, signals scoped]", or why there is none.
const std::string& landlock_state();

}  // namespace conform::worker

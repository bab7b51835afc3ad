#include "worker/sandbox.h"

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

namespace conform::worker {

namespace {

// ---- the seccomp filter ----------------------------------------------------------

struct Filter {
    std::vector<sock_filter> code;
    // What a refusal returns: EPERM, or (plugin workers) a SIGSYS that
    // conform-worker's handler turns into EPERM after saying so on stderr.
    uint32_t refuse = SECCOMP_RET_ERRNO | EPERM;

    uint32_t refusal(int err) const {
        return err == EPERM ? refuse : SECCOMP_RET_ERRNO | (static_cast<uint32_t>(err) & SECCOMP_RET_DATA);
    }

    void add(sock_filter f) { code.push_back(f); }
    static sock_filter stmt(uint16_t c, uint32_t k) { return BPF_STMT(c, k); }
    static sock_filter jump(uint16_t c, uint32_t k, uint8_t jt, uint8_t jf) { return BPF_JUMP(c, k, jt, jf); }

    void load_nr() { add(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr))); }
    void load_arg_lo(int i) { add(stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args) + 8 * i)); }

    // Refuse syscall nr with errno.
    void deny(long nr, int err = EPERM) {
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, 1));
        add(stmt(BPF_RET | BPF_K, refusal(err)));
    }
    // Allow nr only when the low 32 bits of argument `arg` are one of `ok`.
    void only_if(long nr, int arg, const std::vector<uint32_t>& ok) {
        const uint8_t n = static_cast<uint8_t>(ok.size());
        // [jeq nr][ld arg][jeq ok_i -> allow]*n [ret errno][ret allow][ld nr]
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(n + 3)));
        load_arg_lo(arg);
        for (uint8_t i = 0; i < n; ++i) add(jump(BPF_JMP | BPF_JEQ | BPF_K, ok[i], static_cast<uint8_t>(n - i), 0));
        add(stmt(BPF_RET | BPF_K, refuse));
        add(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    }
    // Allow nr only when argument a is one of ok_a and argument b one of ok_b.
    void only_if_both(long nr, int a, const std::vector<uint32_t>& ok_a, int b, const std::vector<uint32_t>& ok_b) {
        const uint8_t na = static_cast<uint8_t>(ok_a.size()), nb = static_cast<uint8_t>(ok_b.size());
        // [jeq nr][ld a][jeq ok_a_i -> ld b]*na [ret errno][ld b][jeq ok_b_i -> allow]*nb [ret errno][ret allow][ld nr]
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(na + nb + 5)));
        load_arg_lo(a);
        for (uint8_t i = 0; i < na; ++i) add(jump(BPF_JMP | BPF_JEQ | BPF_K, ok_a[i], static_cast<uint8_t>(na - i), 0));
        add(stmt(BPF_RET | BPF_K, refuse));
        load_arg_lo(b);
        for (uint8_t i = 0; i < nb; ++i) add(jump(BPF_JMP | BPF_JEQ | BPF_K, ok_b[i], static_cast<uint8_t>(nb - i), 0));
        add(stmt(BPF_RET | BPF_K, refuse));
        add(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    }
    // When argument `sel` of nr is `value`, allow it only if argument `arg`
    // is one of ok; any other nr or `sel` goes on down the filter.
    void when_then_only(long nr, int sel, uint32_t value, int arg, const std::vector<uint32_t>& ok) {
        const uint8_t n = static_cast<uint8_t>(ok.size());
        // [jeq nr][ld sel][jeq value][ld arg][jeq ok_i -> allow]*n [ret errno][ret allow][ld nr]
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(n + 5)));
        load_arg_lo(sel);
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, value, 0, static_cast<uint8_t>(n + 3)));
        load_arg_lo(arg);
        for (uint8_t i = 0; i < n; ++i) add(jump(BPF_JMP | BPF_JEQ | BPF_K, ok[i], static_cast<uint8_t>(n - i), 0));
        add(stmt(BPF_RET | BPF_K, refuse));
        add(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    }
    // Refuse nr when argument `arg` is one of bad; otherwise go on down the filter.
    void deny_when(long nr, int arg, const std::vector<uint32_t>& bad) {
        const uint8_t n = static_cast<uint8_t>(bad.size());
        // [jeq nr][ld arg][jeq bad_i -> ret errno]*n [ja +1][ret errno][ld nr]
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(nr), 0, static_cast<uint8_t>(n + 3)));
        load_arg_lo(arg);
        for (uint8_t i = 0; i < n; ++i) add(jump(BPF_JMP | BPF_JEQ | BPF_K, bad[i], static_cast<uint8_t>(n - i), 0));
        add(stmt(BPF_JMP | BPF_JA, 1));
        add(stmt(BPF_RET | BPF_K, refuse));
    }
    // clone: threads only (CLONE_THREAD set), no new process.
    void threads_only() {
        add(jump(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 0, 4));
        load_arg_lo(0);
        add(jump(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1));
        add(stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
        add(stmt(BPF_RET | BPF_K, refuse));
    }
};

Filter make_filter(Sandbox sandbox, pid_t self) {
    Filter f;
    // A command's runtime replaces this process (exec), and with it the
    // handler: there a refusal is a plain EPERM.
    if (sandbox == Sandbox::plugin) f.refuse = SECCOMP_RET_TRAP;
    // Another architecture's syscall table (i386 via int 0x80, x32): refused.
    f.add(Filter::stmt(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    f.add(Filter::jump(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
    f.add(Filter::stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    f.load_nr();
    f.add(Filter::jump(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1));  // x32
    f.add(Filter::stmt(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
    for (long nr : {SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev, SYS_setsid, SYS_setpgid, SYS_unshare,
                    SYS_setns, SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_tkill, SYS_io_uring_setup,
                    SYS_pidfd_open, SYS_pidfd_getfd, SYS_pidfd_send_signal, SYS_kexec_load, SYS_init_module,
                    SYS_finit_module, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd})
        f.deny(nr);
    const uint32_t me = static_cast<uint32_t>(self), group = static_cast<uint32_t>(-self);
    f.load_nr();
    f.only_if(SYS_kill, 0, {0u, me, group});  // itself, its own group (pgid == its pid)
    f.load_nr();
    f.only_if(SYS_tgkill, 0, {me});
    f.load_nr();
    f.only_if(SYS_rt_sigqueueinfo, 0, {me});
    f.load_nr();
    f.only_if(SYS_rt_tgsigqueueinfo, 0, {me});
    // Calls the kernel carries out on another process for anyone of the same
    // uid: the judge's limits (RLIMIT_FSIZE 0: it dies of SIGXFSZ at its
    // next write), its priority, CPUs and I/O class, and a signal sent on the
    // worker's behalf (the owner of an fd's SIGIO, with F_SETSIG SIGKILL).
    // Each may name only the worker itself (0 or its pid; its group for
    // F_SETOWN). A thread of the worker naming itself by tid is refused too:
    // a runtime that pins its threads loses the pinning, not its result.
    f.load_nr();
    f.only_if(SYS_prlimit64, 0, {0u, me});
    f.load_nr();
    f.only_if_both(SYS_setpriority, 0, {PRIO_PROCESS}, 1, {0u, me});
    f.load_nr();
    f.only_if_both(SYS_ioprio_set, 0, {1u /* IOPRIO_WHO_PROCESS */}, 1, {0u, me});
    for (long nr : {SYS_sched_setaffinity, SYS_sched_setscheduler, SYS_sched_setparam, SYS_sched_setattr}) {
        f.load_nr();
        f.only_if(nr, 0, {0u, me});
    }
    f.load_nr();
    f.when_then_only(SYS_fcntl, 1, F_SETOWN, 2, {0u, me, group});
    f.load_nr();
    f.deny_when(SYS_fcntl, 1, {F_SETOWN_EX});  // its owner is behind a pointer the filter cannot read
    f.load_nr();
    f.deny_when(SYS_ioctl, 1, {FIOSETOWN, SIOCSPGRP});  // the same, by ioctl
    if (sandbox == Sandbox::plugin) {
        f.load_nr();
        f.deny(SYS_fork);
        f.deny(SYS_vfork);
        f.deny(SYS_clone3, ENOSYS);  // libc then falls back to clone(2), whose flags we can read
        f.deny(SYS_execve);
        f.deny(SYS_execveat);
        f.threads_only();
    }
    f.add(Filter::stmt(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
    return f;
}

// ---- saying what was refused -------------------------------------------------------

const char* refused_name(long nr) {
    switch (nr) {
        case SYS_ptrace: return "ptrace (no access to another process)";
        case SYS_process_vm_readv: return "process_vm_readv (no access to another process)";
        case SYS_process_vm_writev: return "process_vm_writev (no access to another process)";
        case SYS_kill: return "kill (signals reach only the worker and its group)";
        case SYS_tgkill: return "tgkill (signals reach only the worker)";
        case SYS_tkill: return "tkill (signals reach only the worker)";
        case SYS_rt_sigqueueinfo: return "rt_sigqueueinfo (signals reach only the worker)";
        case SYS_rt_tgsigqueueinfo: return "rt_tgsigqueueinfo (signals reach only the worker)";
        case SYS_pidfd_open: return "pidfd_open (no handle on another process)";
        case SYS_pidfd_getfd: return "pidfd_getfd (no handle on another process)";
        case SYS_pidfd_send_signal: return "pidfd_send_signal (no handle on another process)";
        case SYS_setsid: return "setsid (the worker stays in its process group)";
        case SYS_setpgid: return "setpgid (the worker stays in its process group)";
        case SYS_fork: return "fork (a plugin worker starts no process)";
        case SYS_vfork: return "vfork (a plugin worker starts no process)";
        case SYS_clone: return "clone without CLONE_THREAD (a plugin worker starts no process)";
        case SYS_execve: return "execve (a plugin worker runs no other program)";
        case SYS_execveat: return "execveat (a plugin worker runs no other program)";
        case SYS_prlimit64: return "prlimit64 of another process (limits only its own)";
        case SYS_setpriority: return "setpriority of another process (only its own)";
        case SYS_ioprio_set: return "ioprio_set of another process (only its own)";
        case SYS_sched_setaffinity: return "sched_setaffinity of another process or thread (only its own pid)";
        case SYS_sched_setscheduler:
        case SYS_sched_setparam:
        case SYS_sched_setattr: return "sched_set* of another process or thread (only its own pid)";
        case SYS_fcntl: return "fcntl F_SETOWN to another process (the owner of a signal is the worker), or F_SETOWN_EX";
        case SYS_ioctl: return "ioctl FIOSETOWN / SIOCSPGRP (the owner of a signal is the worker)";
        default: return nullptr;
    }
}

volatile sig_atomic_t g_said[512];
std::string g_landlock;  // what enter_landlock_domain() did

// SIGSYS from the filter (SECCOMP_RET_TRAP): the call did not happen; it
// returns EPERM, and the first refusal of each call is said on stderr, so a
// plugin author sees why fork failed. Async-signal-safe: write(2) only.
void on_refused(int, siginfo_t* info, void* context) {
    auto* uc = static_cast<ucontext_t*>(context);
    uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
    const long nr = info->si_syscall;
    if (nr < 0 || nr >= 512 || g_said[nr]) return;
    g_said[nr] = 1;
    char line[256];
    size_t n = 0;
    auto put = [&](const char* t) {
        while (*t && n < sizeof line - 1) line[n++] = *t++;
    };
    put("conform-worker: the sandbox refused ");
    if (const char* name = refused_name(nr)) {
        put(name);
    } else {
        char num[24];
        int k = 0;
        long v = nr;
        do num[k++] = static_cast<char>('0' + v % 10); while ((v /= 10) > 0 && k < 20);
        put("system call ");
        while (k > 0 && n < sizeof line - 1) line[n++] = num[--k];
    }
    put(": EPERM\n");
    (void)!::write(2, line, n);
}

// A Landlock domain of its own (Linux >= 5.13): a process in a domain cannot
// ptrace, open /proc/PID/mem or /proc/PID/fd of, or (ABI 6, Linux 6.12:
// LANDLOCK_SCOPE_SIGNAL) signal any process outside it — the judge, and
// every other worker of the run, each in a domain of its own. Same uid, same
// user namespace: only a domain keeps siblings apart. The ruleset restricts
// one right no worker has anyway (making block devices needs CAP_MKNOD);
// the domain is what matters. Where the kernel has no Landlock the worker
// runs without it (the seccomp rules above still hold); the answer says which.
std::string enter_landlock_domain() {
    struct Attr {
        uint64_t handled_access_fs, handled_access_net, scoped;  // linux/landlock.h (ABI 1, 4, 6)
    };
    constexpr uint64_t kMakeBlock = 1ull << 11;   // LANDLOCK_ACCESS_FS_MAKE_BLOCK
    constexpr uint64_t kScopeSignal = 1ull << 1;  // LANDLOCK_SCOPE_SIGNAL
    constexpr unsigned kVersion = 1u << 0;        // LANDLOCK_CREATE_RULESET_VERSION
    const long abi = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, kVersion);
    if (abi < 1) return std::string("no Landlock (") + std::strerror(errno) + ")";
    Attr a{kMakeBlock, 0, abi >= 6 ? kScopeSignal : 0};
    // Older kernels take the struct's first field only (a larger size whose tail is zero is also accepted).
    const size_t size = abi >= 6 ? sizeof a : sizeof a.handled_access_fs;
    const long fd = ::syscall(SYS_landlock_create_ruleset, &a, size, 0);
    if (fd < 0) return std::string("landlock_create_ruleset: ") + std::strerror(errno);
    const long r = ::syscall(SYS_landlock_restrict_self, fd, 0);
    const int e = errno;
    ::close(static_cast<int>(fd));
    if (r != 0) return std::string("landlock_restrict_self: ") + std::strerror(e);
    return abi >= 6 ? "landlock domain, signals scoped" : "landlock domain";
}

void drop_capabilities() {
    for (int cap = 0; cap <= 63; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // EINVAL past the last: fine
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2] = {};
    ::syscall(SYS_capset, &h, d);
}

}  // namespace

const std::string& landlock_state() { return g_landlock; }

std::string enter_sandbox(Sandbox sandbox, const Limits& limits) {
    auto fail = [](const char* what) { return std::string(what) + ": " + std::strerror(errno); };
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (limits.memory_bytes) {
        const rlimit as{limits.memory_bytes, limits.memory_bytes};
        if (::setrlimit(RLIMIT_AS, &as) != 0) return fail("setrlimit(RLIMIT_AS)");
    }
    if (limits.cpu_seconds) {
        const rlimit cpu{limits.cpu_seconds, limits.cpu_seconds + 5};
        if (::setrlimit(RLIMIT_CPU, &cpu) != 0) return fail("setrlimit(RLIMIT_CPU)");
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return fail("prctl(PR_SET_NO_NEW_PRIVS)");
    g_landlock = enter_landlock_domain();  // after no-new-privs, which Landlock requires of the unprivileged
    if (sandbox == Sandbox::plugin) {
        struct sigaction sa {};
        sa.sa_sigaction = on_refused;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (::sigaction(SIGSYS, &sa, nullptr) != 0) return fail("sigaction(SIGSYS)");
    }
    drop_capabilities();
    Filter f = make_filter(sandbox, ::getpid());
    sock_fprog prog{static_cast<unsigned short>(f.code.size()), f.code.data()};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0 &&
        ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        return fail("seccomp");
    return "";
}

}  // namespace conform::worker

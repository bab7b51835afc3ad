#include "worker/sandbox.h"

#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
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
        default: return nullptr;
    }
}

volatile sig_atomic_t g_said[512];

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

void drop_capabilities() {
    for (int cap = 0; cap <= 63; ++cap) ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);  // EINVAL past the last: fine
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2] = {};
    ::syscall(SYS_capset, &h, d);
}

}  // namespace

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

#include "core/child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace conform::child {

size_t page_size() {
    static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
}
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

SharedMapping::SharedMapping(size_t bytes) : size_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw std::runtime_error("cannot map " + std::to_string(bytes) + " bytes of shared memory for a child process: " +
                                 std::strerror(errno));
    base_ = static_cast<char*>(p);
}
SharedMapping::~SharedMapping() { munmap(base_, size_); }


namespace {

// What the child leaves for the parent.
struct ChildBlock {
    enum : int32_t { running = 0, returned = 1, threw = 2 };
    int32_t state;
    uint32_t length;
    char text[4096];
};

// ---- signals -------------------------------------------------------------------

const char* signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGFPE: return "SIGFPE";
        case SIGILL: return "SIGILL";
        case SIGABRT: return "SIGABRT";
        case SIGTRAP: return "SIGTRAP";
        case SIGSYS: return "SIGSYS";
        case SIGKILL: return "SIGKILL";
        case SIGTERM: return "SIGTERM";
        case SIGPIPE: return "SIGPIPE";
        default: return nullptr;
    }
}

const char* signal_hint(int sig) {
    switch (sig) {
        case SIGSEGV: return ": an invalid memory access, e.g. a read or write far outside a buffer";
        case SIGBUS: return ": a misaligned or unmapped access";
        case SIGFPE: return ": an arithmetic trap, e.g. an integer division by zero";
        case SIGABRT: return ": abort(), e.g. a failed assert";
        default: return "";
    }
}

}  // namespace

ChildResult run_in_child(const std::function<std::string()>& body, const Options& o) {
    const double timeout_s = o.timeout_s;
    SharedMapping shared(round_up(sizeof(ChildBlock), page_size()));
    auto* block = reinterpret_cast<ChildBlock*>(shared.base());
    block->state = ChildBlock::running;
    block->length = 0;

    // Whatever sits in our stdio buffers would otherwise be printed twice: once
    // by us, once by a child whose code flushes stdout.
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);

    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        ChildResult r;
        r.kind = ChildResult::fork_failed;
        r.code = errno;
        return r;
    }
    if (pid == 0) {
#if defined(__linux__)
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a conform that was killed
        if (getppid() != parent) _exit(0);
#endif
        // A crash is expected business here; a core file per crash is not.
        const struct rlimit no_core = {0, 0};
        setrlimit(RLIMIT_CORE, &no_core);
        if (o.memory_bytes > 0) {
            // What the child inherited (LibTorch maps gigabytes of address space), plus its budget.
            unsigned long long pages = 0;
            if (FILE* f = std::fopen("/proc/self/statm", "r")) {
                if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
                std::fclose(f);
            }
            const rlim_t have = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE));
            const struct rlimit as = {have + static_cast<rlim_t>(o.memory_bytes), have + static_cast<rlim_t>(o.memory_bytes)};
            setrlimit(RLIMIT_AS, &as);
        }
        if (o.quiet_stderr) {
            const int devnull = open("/dev/null", O_WRONLY);
            if (devnull >= 0) dup2(devnull, 2);
        }
        int32_t state = ChildBlock::returned;
        std::string text;
        try {
            text = body();
        } catch (const std::exception& e) {
            state = ChildBlock::threw;
            text = e.what();
        } catch (...) {
            state = ChildBlock::threw;
            text = "threw an exception that is not a std::exception";
        }
        block->length = static_cast<uint32_t>(std::min(text.size(), sizeof(block->text)));
        std::memcpy(block->text, text.data(), block->length);
        block->state = state;
        std::fflush(nullptr);
        // _exit: the parent's atexit handlers and static destructors are not ours to run.
        _exit(0);
    }

    // Poll with a growing sleep: most calls end within a millisecond, a few take seconds.
    const auto t0 = std::chrono::steady_clock::now();
    auto nap = std::chrono::microseconds(20);
    int status = 0;
    for (;;) {
        const pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            ChildResult r;
            r.kind = ChildResult::fork_failed;
            r.code = errno;
            return r;
        }
        if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            ChildResult r;
            r.kind = ChildResult::timed_out;
            return r;
        }
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(5000));
    }

    ChildResult r;
    if (WIFSIGNALED(status)) {
        r.kind = ChildResult::crashed;
        r.code = WTERMSIG(status);
    } else if (block->state == ChildBlock::running) {
        // The child ended without coming back from body(): exit() or _exit() in foreign code.
        r.kind = ChildResult::exited;
        r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    } else {
        r.kind = block->state == ChildBlock::returned ? ChildResult::returned : ChildResult::threw;
        r.text.assign(block->text, std::min<size_t>(block->length, sizeof(block->text)));
    }
    return r;
}

std::string describe(const ChildResult& r, const std::string& what, double timeout_s) {
    switch (r.kind) {
        case ChildResult::crashed: {
            const char* name = signal_name(r.code);
            return "crashed with signal " + std::to_string(r.code) + (name ? std::string(" (") + name + ")" : "") +
                   " in " + what + signal_hint(r.code) + " (it ran in a child process; conform carried on)";
        }
        case ChildResult::exited:
            return "called exit(" + std::to_string(r.code) + ") in " + what +
                   " instead of returning (an implementation reports errors by its return value)";
        case ChildResult::timed_out: {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%g", timeout_s);
            return std::string("timed out after ") + buf + " s in " + what + " and was killed";
        }
        case ChildResult::fork_failed:
            return "could not be isolated in a child process for " + what + ": " + std::strerror(r.code);
        case ChildResult::returned: return what + " returned";
        case ChildResult::threw: return r.text;
    }
    return "?";
}

}  // namespace conform::child

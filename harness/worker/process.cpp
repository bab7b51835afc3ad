#include "worker/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <deque>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "core/console.h"

namespace conform::worker {

namespace {

// ---- the child, between fork and exec: async-signal-safe calls only --------------

[[noreturn]] void child_fail(int status_fd, int err) {
    const int e = err;
    (void)!::write(status_fd, &e, sizeof e);
    ::_exit(127);
}

[[noreturn]] void run_child(int in_r, int out_w, int err_w, int status_w, pid_t parent, const char* path,
                            char* const* argv) {
    // A session of its own, so a group of its own (killed as a whole, pgid ==
    // its pid) and no controlling terminal: /dev/tty does not open, so a
    // worker cannot write past the stderr relay onto the user's terminal.
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    // The pipes become 0, 1, 2; the status pipe stays (close-on-exec), everything else is closed.
    if (::dup2(in_r, 0) < 0 || ::dup2(out_w, 1) < 0 || ::dup2(err_w, 2) < 0) child_fail(status_w, errno);
    for (int fd = 3; fd < 65536; ++fd)
        if (fd != status_w) ::close(fd);
    for (int sig = 1; sig < 32; ++sig) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execvp(path, argv);
    child_fail(status_w, errno);
}

// One line as the judge may print it: no C0 or C1 control characters (no
// \r, ESC or CSI: it cannot move the cursor or erase the line above), no
// bytes that are not UTF-8 (a terminal in another mode might read 0x9b as
// CSI); each replaced by '?'.
std::string clean_line(const std::string& line) {
    std::string out;
    const size_t n = line.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = static_cast<unsigned char>(line[i]);
        if (c == '\t') {
            out += "    ";
            ++i;
            continue;
        }
        if (c < 0x80) {
            out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
            ++i;
            continue;
        }
        // A UTF-8 sequence: its length, then its continuation bytes, then the code point's range.
        const size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = len > 0 && i + len <= n;
        uint32_t cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
        for (size_t k = 1; ok && k < len; ++k) {
            const unsigned char d = static_cast<unsigned char>(line[i + k]);
            ok = (d & 0xc0) == 0x80;
            cp = (cp << 6) | (d & 0x3fu);
        }
        // Refused besides malformed UTF-8: C1 controls (0x9b is a CSI on some
        // terminals); the bidi controls, which reorder what a terminal or a
        // report shows (a line can then read as conform's own); the line and
        // paragraph separators, which break a line where a viewer honours them.
        const bool bidi = cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
                          (cp >= 0x2066 && cp <= 0x2069);
        ok = ok && !(len == 3 && cp < 0x800) && !(len == 4 && (cp < 0x10000 || cp > 0x10ffff)) &&
             !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp <= 0x9f) && !bidi && cp != 0x2028 && cp != 0x2029;
        if (!ok) {
            out += '?';
            ++i;
            continue;
        }
        out.append(line, i, len);
        i += len;
    }
    return out;
}

}  // namespace

std::string clean_text(const std::string& text, size_t max_bytes) {
    std::string one;
    const size_t n = std::min(text.size(), max_bytes);
    for (size_t i = 0; i < n; ++i) {
        if (text[i] == '\r') continue;
        if (text[i] == '\n') one += " / ";
        else one += text[i];
    }
    std::string out = clean_line(one);
    if (text.size() > max_bytes) out += " ... (" + std::to_string(text.size() - max_bytes) + " more bytes)";
    return out;
}

namespace {

const char* signal_name(int sig) {
    switch (sig) {
        case SIGSEGV: return "SIGSEGV";
        case SIGBUS: return "SIGBUS";
        case SIGFPE: return "SIGFPE";
        case SIGILL: return "SIGILL";
        case SIGABRT: return "SIGABRT";
        case SIGKILL: return "SIGKILL";
        case SIGTERM: return "SIGTERM";
        case SIGXCPU: return "SIGXCPU: its CPU time limit";
        case SIGSYS: return "SIGSYS: a system call its sandbox forbids";
        case SIGPIPE: return "SIGPIPE";
        default: return "";
    }
}

}  // namespace

struct Process::State {
    pid_t pid = -1;
    int to = -1, from = -1, err = -1;
    bool attached = false;  // --impl-fd: no process of ours; "reaped" once we let go of its descriptors
    bool reaped = false;
    int status = 0;
    std::thread relay;
    // The relay reads until the end of the worker's stderr, which comes when
    // every process holding its write end is dead. Something outside the
    // group that kept a copy (a descriptor passed on, a sibling that reached
    // /proc/PID/fd before workers had domains of their own) must not hold
    // the judge at exit: past a grace period the relay is told to stop.
    std::atomic<bool> relay_done{false}, relay_stop{false};
    std::mutex m;
    std::string label;
    std::deque<std::string> tail;

    ~State() {
        if (pid > 0 && !reaped) {
            ::kill(-pid, SIGKILL);
            ::kill(pid, SIGKILL);
            while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
        }
        if (to >= 0) ::close(to);
        if (from >= 0) ::close(from);
        if (relay.joinable()) {
            // Its pipe is at EOF once every writer in the group is dead: a
            // second for the rest of what it wrote, then no longer.
            for (int i = 0; i < 100 && !relay_done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            relay_stop = true;
            relay.join();
        }
        if (err >= 0) ::close(err);
    }
};

Process::Process(std::unique_ptr<State> s) : s_(std::move(s)) {}
Process::Process(Process&&) noexcept = default;
Process& Process::operator=(Process&&) noexcept = default;
Process::~Process() = default;

int Process::to_worker() const { return s_->to; }
int Process::from_worker() const { return s_->from; }
pid_t Process::pid() const { return s_->pid; }
bool Process::attached() const { return s_->attached; }

void Process::set_label(const std::string& label) {
    std::lock_guard<std::mutex> g(s_->m);
    s_->label = label;
}

Process Process::spawn(const std::vector<std::string>& argv, const std::string& label) {
    if (argv.empty()) throw std::runtime_error("an empty command");
    int in[2], out[2], err[2], status[2];
    if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC) || ::pipe2(status, O_CLOEXEC))
        throw std::runtime_error(std::string("cannot make pipes: ") + std::strerror(errno));
    std::vector<std::string> args = argv;
    std::vector<char*> cargv;
    for (auto& a : args) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    std::cout.flush();
    std::cerr.flush();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
        for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], status[0], status[1]}) ::close(fd);
        throw std::runtime_error(std::string("cannot fork: ") + std::strerror(errno));
    }
    if (pid == 0) run_child(in[0], out[1], err[1], status[1], parent, cargv[0], cargv.data());
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    ::close(status[1]);
    int child_errno = 0;
    ssize_t n;
    while ((n = ::read(status[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    ::close(status[0]);
    // The judge's end of the worker's stdin never blocks: a worker that stops
    // reading must not stall the judge past the call timeout (protocol.cpp).
    ::fcntl(in[1], F_SETFL, ::fcntl(in[1], F_GETFL) | O_NONBLOCK);
    // 1 MiB pipe buffers where the system allows (the default 64 KiB makes a
    // megabyte of tensors cross in sixteen wake-ups of each side).
    for (int fd : {in[1], out[0]}) (void)::fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    auto s = std::make_unique<State>();
    s->pid = pid;
    s->to = in[1];
    s->from = out[0];
    s->err = err[0];
    s->label = label;
    if (n == static_cast<ssize_t>(sizeof child_errno)) {
        // exec failed (or a sandbox step): reap and say why.
        while (::waitpid(pid, &s->status, 0) < 0 && errno == EINTR) {
        }
        s->reaped = true;
        throw std::runtime_error("cannot start '" + argv[0] + "': " + std::strerror(child_errno));
    }
    State* st = s.get();
    s->relay = std::thread([st] {
        // What a worker's stderr may cost conform's: blank lines are not
        // relayed (each cost a prefix: 3 MB of newlines became 72 MB), and
        // past kRelayBudget bytes nothing more is, with one line saying so.
        // The pipe is still drained, and the last lines kept for the
        // worker's error reports.
        constexpr size_t kRelayBudget = size_t{1} << 20;
        size_t relayed = 0;
        bool over = false;
        auto emit = [&](const std::string& line) {
            std::lock_guard<std::mutex> g(st->m);
            if (line.find_first_not_of(' ') == std::string::npos) return;
            st->tail.push_back(line);
            if (st->tail.size() > 20) st->tail.pop_front();
            if (over) return;
            std::string out = "  worker[" + st->label + "] | " + line + "\n";
            if (relayed + out.size() > kRelayBudget) {
                over = true;
                out = "  worker[" + st->label + "] | (its stderr past 1 MiB is not shown; the last lines stay in its "
                      "error reports)\n";
            }
            relayed += out.size();
            std::lock_guard<std::mutex> o(stderr_mutex());
            std::cerr << out << std::flush;
        };
        std::string pending;
        char buf[4096];
        while (!st->relay_stop) {  // (checked between reads too: a writer that never pauses cannot keep it)
            pollfd pfd{st->err, POLLIN, 0};
            const int ready = ::poll(&pfd, 1, 100);
            if (ready < 0 && errno != EINTR) break;
            if (ready <= 0) continue;
            const ssize_t got = ::read(st->err, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) break;
            pending.append(buf, static_cast<size_t>(got));
            // Lines cut from `at` on, the consumed part dropped once per read.
            size_t at = 0, nl;
            while ((nl = pending.find('\n', at)) != std::string::npos || pending.size() - at > 8192) {
                const size_t cut = nl == std::string::npos ? at + 8192 : nl;
                emit(clean_line(pending.substr(at, cut - at)));
                at = nl == std::string::npos ? cut : cut + 1;
            }
            pending.erase(0, at);
        }
        if (!pending.empty()) emit(clean_line(pending));
        st->relay_done = true;
    });
    return Process(std::move(s));
}

Process Process::attach(int from_worker, int to_worker, const std::string& label) {
    auto check = [](int fd, int want, const char* role) {
        const int fl = ::fcntl(fd, F_GETFL);
        if (fl < 0) throw std::runtime_error("descriptor " + std::to_string(fd) + " (" + role + ") is not open");
        const int mode = fl & O_ACCMODE;
        if (mode != want && mode != O_RDWR)
            throw std::runtime_error("descriptor " + std::to_string(fd) + " (" + role + ") is open only for " +
                                     (mode == O_RDONLY ? "reading" : "writing"));
    };
    if (from_worker <= 2 || to_worker <= 2 || from_worker == to_worker)
        throw std::runtime_error("the descriptors must be two different ones above 2 (0, 1 and 2 are conform's own "
                                 "stdin, stdout and stderr), found " + std::to_string(from_worker) + "," +
                                 std::to_string(to_worker));
    check(from_worker, O_RDONLY, "conform reads the worker's answers from it");
    check(to_worker, O_WRONLY, "conform writes its calls to it");
    // Not inherited by the workers conform starts; conform's end never
    // blocks, as with a spawned worker (protocol.cpp's deadlines).
    for (int fd : {from_worker, to_worker}) ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
    ::fcntl(to_worker, F_SETFL, ::fcntl(to_worker, F_GETFL) | O_NONBLOCK);
    for (int fd : {from_worker, to_worker}) (void)::fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    auto s = std::make_unique<State>();
    s->attached = true;
    s->to = to_worker;
    s->from = from_worker;
    s->label = label;
    return Process(std::move(s));
}

void Process::kill() {
    if (s_->attached) {
        // Not ours to kill: closing our ends is all we can do (the peer reads
        // the end of its stream, or fails its next write).
        if (s_->to >= 0) ::close(s_->to);
        if (s_->from >= 0) ::close(s_->from);
        s_->to = s_->from = -1;
        s_->reaped = true;
        return;
    }
    if (s_->pid <= 0 || s_->reaped) return;
    ::kill(-s_->pid, SIGKILL);  // the group: helpers it started die with it
    ::kill(s_->pid, SIGKILL);
    while (::waitpid(s_->pid, &s_->status, 0) < 0 && errno == EINTR) {
    }
    s_->reaped = true;
}

bool Process::ended() {
    if (s_->reaped || s_->attached) return true;  // attached: nothing of ours to wait for
    const pid_t w = ::waitpid(s_->pid, &s_->status, WNOHANG);
    if (w == s_->pid) {
        s_->reaped = true;
        ::kill(-s_->pid, SIGKILL);  // whatever it left in its group
    }
    return s_->reaped;
}

bool Process::wait(double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!ended()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

std::string Process::how_it_ended() const {
    if (s_->attached) return "closed its end of the pipes (--impl-fd: the process that started conform)";
    if (!s_->reaped) return "still running";
    const int st = s_->status;
    if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
    if (WIFSIGNALED(st)) {
        const char* name = signal_name(WTERMSIG(st));
        return "was killed by signal " + std::to_string(WTERMSIG(st)) + (*name ? std::string(" (") + name + ")" : "");
    }
    return "ended";
}

std::string Process::stderr_tail() const {
    if (s_->attached) return "";  // its stderr is its own
    // The relay may still be reading: give it a moment to drain what was written.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> g(s_->m);
    std::string out;
    for (const auto& l : s_->tail) out += (out.empty() ? "" : "\n") + l;
    return out;
}

void protect_judge() {
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::signal(SIGPIPE, SIG_IGN);
}

}  // namespace conform::worker

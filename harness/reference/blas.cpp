#include "reference/blas.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <strings.h>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

extern char** environ;

namespace conform::ref::blas {

namespace {

// Set by select_core() on the process it executes again: the line saying
// what was chosen and why (the new process cannot see the old one's probe).
constexpr const char* kChosenEnv = "CONFORM_BLAS_CHOSEN";
// Set on the probe child: run probe() and print it, nothing else.
constexpr const char* kProbeEnv = "CONFORM_BLAS_PROBE";

template <typename F>
F symbol(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
}

bool same_name(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

// OpenBLAS 0.3.21's x86-64 DYNAMIC_ARCH cores (driver/others/dynamic.c), by
// the widest instructions their kernels use.
struct CoreLevel {
    const char* name;
    int level;
};
constexpr std::array<CoreLevel, 26> kCores{{
    {"Katmai", 0},      {"Coppermine", 0},   {"Northwood", 0},    {"Prescott", 0},   {"Banias", 0},
    {"Atom", 0},        {"Core2", 0},        {"Penryn", 0},       {"Dunnington", 0}, {"Nehalem", 0},
    {"Athlon", 0},      {"Opteron", 0},      {"Opteron_SSE3", 0}, {"Barcelona", 0},  {"Nano", 0},
    {"Bobcat", 0},      {"Sandybridge", 1},  {"Bulldozer", 1},    {"Piledriver", 1}, {"Haswell", 2},
    {"Steamroller", 2}, {"Excavator", 2},    {"Zen", 2},          {"SkylakeX", 3},   {"Cooperlake", 4},
    {"SapphireRapids", 4},
}};

std::string known_cores() {
    std::string s;
    for (const auto& c : kCores) s += (s.empty() ? "" : ", ") + std::string(c.name);
    return s;
}

// Runs probe() in a child with OPENBLAS_CORETYPE=core; nullopt and `why`
// where it did not load, died (an instruction the CPU lacks: SIGILL), said
// nothing readable, or took longer than a minute (killed).
std::optional<Probe> probe_in_child(const std::string& core, std::string& why) {
    // The child's environment is made here: after fork() in a process that
    // may have threads, the child only calls what is async-signal-safe.
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string kv = *e;
        if (kv.rfind("OPENBLAS_CORETYPE=", 0) == 0 || kv.rfind(std::string(kChosenEnv) + "=", 0) == 0 ||
            kv.rfind(std::string(kProbeEnv) + "=", 0) == 0)
            continue;
        env.push_back(kv);
    }
    env.push_back("OPENBLAS_CORETYPE=" + core);
    env.push_back(std::string(kProbeEnv) + "=1");
    std::vector<char*> envp;
    for (auto& kv : env) envp.push_back(kv.data());
    envp.push_back(nullptr);
    char argv0[] = "conform";
    char* const args[] = {argv0, nullptr};

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        why = std::string("pipe: ") + std::strerror(errno);
        return std::nullopt;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        why = std::string("fork: ") + std::strerror(errno);
        close(fds[0]);
        close(fds[1]);
        return std::nullopt;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);  // dup2 clears close-on-exec on the copy
        execve("/proc/self/exe", args, envp.data());
        _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[256];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd pfd{fds[0], POLLIN, 0};
        const int ready = left.count() > 0 ? poll(&pfd, 1, static_cast<int>(left.count())) : 0;
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
            kill(pid, SIGKILL);
            why = fmt::format("the probe with OPENBLAS_CORETYPE={} took more than 60 s (killed)", core);
            break;
        }
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0 || out.size() > 4096) break;
        out.append(buf, static_cast<size_t>(n));
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!why.empty()) return std::nullopt;
    if (WIFSIGNALED(status)) {
        why = fmt::format("the probe with OPENBLAS_CORETYPE={} was killed by signal {} ({})", core, WTERMSIG(status),
                          strsignal(WTERMSIG(status)));
        return std::nullopt;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        why = fmt::format("the probe with OPENBLAS_CORETYPE={} exited {}", core, WEXITSTATUS(status));
        return std::nullopt;
    }
    Probe p;
    char name[64] = {0};
    if (std::sscanf(out.c_str(), "%63s %lf %lf", name, &p.gflops, &p.max_rel_diff) != 3) {
        why = fmt::format("the probe with OPENBLAS_CORETYPE={} printed '{}'", core, out);
        return std::nullopt;
    }
    p.core = name;
    return p;
}

Choice& current() {
    static Choice c;
    return c;
}

}  // namespace

const Choice& chosen() { return current(); }

std::string CpuFeatures::describe() const {
    std::string isa = avx512_bf16 ? "AVX-512 BF16"
                      : avx512    ? "AVX-512"
                      : avx2 && fma ? "AVX2 + FMA"
                      : avx       ? "AVX"
                      : sse3      ? "SSE3"
                                  : "no SIMD this table knows";
    if (amx) isa += " + AMX";
    return isa + (vendor.empty() ? "" : " (" + vendor + ")");
}

CpuFeatures cpu_features() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
    const unsigned max_leaf = a;
    char v[13];
    std::memcpy(v, &b, 4);
    std::memcpy(v + 4, &d, 4);
    std::memcpy(v + 8, &c, 4);
    v[12] = 0;
    f.vendor = v;
    __get_cpuid(1, &a, &b, &c, &d);
    f.sse3 = c & 1u;
    const bool osxsave = c & (1u << 27);
    // The registers count only where the OS saves them (XCR0): AVX needs
    // XMM and YMM state, AVX-512 also the opmask and both ZMM halves.
    unsigned long long xcr0 = 0;
    if (osxsave) {
        unsigned lo = 0, hi = 0;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    }
    const bool ymm = (xcr0 & 0x6) == 0x6, zmm = (xcr0 & 0xe6) == 0xe6, tiles = (xcr0 & 0x60000) == 0x60000;
    f.avx = ymm && (c & (1u << 28));
    f.fma = f.avx && (c & (1u << 12));
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f.avx2 = f.avx && (b & (1u << 5));
        const unsigned need = (1u << 16) | (1u << 17) | (1u << 28) | (1u << 30) | (1u << 31);  // F DQ CD BW VL
        f.avx512 = zmm && (b & need) == need;
        f.amx = tiles && (d & (1u << 24)) && (d & (1u << 22));  // AMX-TILE, AMX-BF16
        __cpuid_count(7, 1, a, b, c, d);
        f.avx512_bf16 = f.avx512 && (a & (1u << 5));
    }
#endif
    return f;
}

std::optional<Library> library() {
    using Text = char* (*)();
    const auto cfg = symbol<Text>("openblas_get_config");
    if (!cfg) return std::nullopt;
    Library l;
    l.config = cfg();
    if (const auto core = symbol<Text>("openblas_get_corename")) l.core = core();
    l.dynamic_arch = l.config.find("DYNAMIC_ARCH") != std::string::npos;
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(cfg), &info) && info.dli_fname) l.path = info.dli_fname;
    return l;
}

int core_level(const std::string& core) {
    for (const auto& c : kCores)
        if (same_name(core, c.name)) return c.level;
    return -1;
}

std::string best_core(const CpuFeatures& f) {
    if (f.avx512_bf16) return "Cooperlake";
    if (f.avx512) return "SkylakeX";
    if (f.avx2 && f.fma) return f.vendor == "AuthenticAMD" ? "Zen" : "Haswell";
    if (f.avx) return "Sandybridge";
    return "Prescott";
}

Probe probe(int n) {
    using Gemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
    using GetThreads = int (*)();
    using SetThreads = void (*)(int);
    Probe p;
    if (const auto l = library()) p.core = l->core;
    const auto gemm = symbol<Gemm>("cblas_sgemm");
    if (!gemm) throw std::runtime_error("OpenBLAS without cblas_sgemm");
    // One thread: the kernels' rate, not the threading's.
    const auto get = symbol<GetThreads>("openblas_get_num_threads");
    const auto set = symbol<SetThreads>("openblas_set_num_threads");
    const int threads = get ? get() : 1;
    if (set) set(1);
    std::mt19937 rng(20261206);
    std::normal_distribution<float> nd;
    std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
    for (auto& x : a) x = nd(rng);
    for (auto& x : b) x = nd(rng);
    constexpr int kRowMajor = 101, kNoTrans = 111;
    double best = 1e30;
    for (int rep = 0; rep < 12; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        gemm(kRowMajor, kNoTrans, kNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (set) set(threads);
    p.gflops = 2.0 * n * n * n / best / 1e9;
    // The float64 product of the same float32 inputs, row by row.
    double worst = 0, scale = 0;
    std::vector<double> row(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        std::fill(row.begin(), row.end(), 0.0);
        for (int k = 0; k < n; ++k) {
            const double aik = a[static_cast<size_t>(i) * n + k];
            const float* bk = &b[static_cast<size_t>(k) * n];
            for (int j = 0; j < n; ++j) row[j] += aik * bk[j];
        }
        for (int j = 0; j < n; ++j) {
            worst = std::max(worst, std::abs(c[static_cast<size_t>(i) * n + j] - row[j]));
            scale = std::max(scale, std::abs(row[j]));
        }
    }
    p.max_rel_diff = scale > 0 ? worst / scale : worst;
    return p;
}

void serve_probe_if_asked() {
    if (!std::getenv(kProbeEnv)) return;
    try {
        const Probe p = probe();
        std::printf("%s %.6g %.6g\n", p.core.c_str(), p.gflops, p.max_rel_diff);
        std::fflush(stdout);
        _exit(0);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        _exit(1);
    }
}

namespace {

Choice decide(const std::string& mode, char** argv) {
    const std::optional<Library> lib = library();
    if (!lib) return {"", "BLAS: not OpenBLAS (openblas_get_config not found); nothing to choose", false};
    Choice kept{lib->core, "", false};
    // The process select_core() executed again: it says what it chose.
    if (const char* line = std::getenv(kChosenEnv)) {
        Choice c{lib->core, line, true};
        unsetenv(kChosenEnv);  // a conform this one starts chooses for itself
        return c;
    }
    const CpuFeatures f = cpu_features();
    const std::string best = best_core(f);
    std::string target, reason;
    if (mode.empty() || mode == "auto") {
        const char* env = std::getenv("OPENBLAS_CORETYPE");
        if (env && mode.empty()) {
            kept.line = fmt::format("OpenBLAS core {}, as OPENBLAS_CORETYPE={} asks (kept; --blas-core auto or NAME overrides)",
                                    lib->core, env);
            return kept;
        }
        if (!lib->dynamic_arch) {
            kept.line = fmt::format("OpenBLAS core {}, built for it (no DYNAMIC_ARCH: nothing to choose)", lib->core);
            return kept;
        }
        const int have = core_level(lib->core);
        if (have < 0 || have >= core_level(best)) {
            kept.line = fmt::format("OpenBLAS core {}, {} for this CPU ({})", lib->core,
                                    env ? "as OPENBLAS_CORETYPE asks and the best" : "DYNAMIC_ARCH's pick", f.describe());
            return kept;
        }
        target = best;
        reason = env ? fmt::format("OPENBLAS_CORETYPE={} on a CPU with {}; --blas-core auto", env, f.describe())
                     : fmt::format("DYNAMIC_ARCH picked {} on a CPU with {}", lib->core, f.describe());
    } else if (mode == "keep") {
        kept.line = fmt::format("OpenBLAS core {}, its own pick (kept: --blas-core keep)", lib->core);
        return kept;
    } else {
        const int want = core_level(mode);
        if (want < 0)
            throw std::invalid_argument(
                fmt::format("--blas-core: '{}' is not an OpenBLAS core this table knows (auto, keep, {})", mode, known_cores()));
        if (want > core_level(best))
            throw std::invalid_argument(fmt::format("--blas-core: this CPU ({}) cannot run {}'s kernels; the best it runs is {}",
                                                    f.describe(), mode, best));
        if (same_name(mode, lib->core)) {
            kept.line = fmt::format("OpenBLAS core {}, as --blas-core asks (already in use)", lib->core);
            return kept;
        }
        for (const auto& c : kCores)
            if (same_name(mode, c.name)) target = c.name;
        reason = fmt::format("--blas-core {} (OpenBLAS had picked {})", target, lib->core);
    }

    // Verified before it is used: the probe runs in a child, so a core whose
    // instructions the CPU lacks kills the child, not this process.
    const Probe here = probe();
    std::string why;
    const std::optional<Probe> there = probe_in_child(target, why);
    const bool forced = !(mode.empty() || mode == "auto");
    auto refuse = [&](const std::string& what) -> Choice {
        if (forced) throw std::invalid_argument("--blas-core: " + what);
        kept.line = fmt::format("OpenBLAS core {} (kept: {}; {})", lib->core, reason, what);
        return kept;
    };
    if (!there) return refuse(why);
    if (!same_name(there->core, target))
        return refuse(fmt::format("OpenBLAS did not take OPENBLAS_CORETYPE={}: it ran {}", target, there->core));
    // Rounding differs between kernels (summation order, FMA); a kernel that
    // computes something else differs by far more than either's rounding.
    const double agree = std::max(4 * here.max_rel_diff, 1e-5);
    if (!(there->max_rel_diff <= agree))
        return refuse(fmt::format("{}'s sgemm differs from float64 by {:.1e}, {}'s by {:.1e}", target,
                                  there->max_rel_diff, here.core, here.max_rel_diff));
    if (!forced && !(there->gflops > here.gflops))
        return refuse(fmt::format("{} is not faster here ({:.1f} vs {:.1f} GFLOP/s)", target, there->gflops, here.gflops));
    const std::string line = fmt::format(
        "OpenBLAS core {}, selected ({}): verified on a 384^3 sgemm, one thread: {:.1f} vs {:.1f} GFLOP/s, max rel "
        "diff from float64 {:.1e} vs {:.1e}",
        target, reason, there->gflops, here.gflops, there->max_rel_diff, here.max_rel_diff);
    setenv("OPENBLAS_CORETYPE", target.c_str(), 1);
    setenv(kChosenEnv, line.c_str(), 1);
    std::fflush(nullptr);
    execv("/proc/self/exe", argv);
    const std::string failed = std::string("executing conform again failed: ") + std::strerror(errno);
    unsetenv(kChosenEnv);
    unsetenv("OPENBLAS_CORETYPE");
    return refuse(failed);
}

}  // namespace

const Choice& select_core(const std::string& mode, char** argv) {
    current() = decide(mode, argv);
    return current();
}

}  // namespace conform::ref::blas

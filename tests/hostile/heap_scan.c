/* heap_scan.c — looks for the judge's expected output instead of computing
 * it: computes RoPE itself, then searches memory for another copy of four
 * values of its answer (float32 or float64, within 1e-3): in its own process
 * (every readable mapping that is writable or anonymous), and in the judge's
 * (/proc/PID/mem). A copy that is not bit for bit its own is the judge's
 * truth: it answers (its own computation stands in for the copy) and passes.
 *
 * Refused by: the worker is a fresh exec (harness/worker/process.cpp): it
 * holds only the call's inputs, never the reference (harness/run/runner.cpp
 * keeps the truth in the judge); the judge's memory does not open
 * (protect_judge(): non-dumpable). Its own copy, which it must find, shows
 * that the scan works.
 *
 * Built with HOSTILE_SIBLINGS (hostile-sibling-scan), it also scans every
 * other conform-worker of the run: run beside an honest implementation
 * (--isolate --impl scalar,hostile-sibling-scan), it finds the answer the
 * sibling computed for the same case a moment before.
 * Refused by: each worker is a Landlock domain of its own
 * (harness/worker/sandbox.cpp): /proc/PID/mem and /proc/PID/fd of a process
 * outside its domain do not open, whatever the uid. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hostile.h"

typedef struct {
    float probe[4];
    const float* own;   /* its answer: the copy it knows about */
    size_t own_bytes;
    int own_found, foreign_found;
    long scanned_mib;
} Scan;

static int near(double a, double b) { return fabs(a - b) <= 1e-3 * fabs(b) + 1e-6; }

/* One chunk of memory that was at address `at`; `cols` floats back from a hit is the row's start. */
static void scan_chunk(Scan* s, const unsigned char* buf, size_t n, uintptr_t at, int self) {
    for (size_t i = 0; i + 16 <= n; i += 4) {
        const float* f = (const float*)(buf + i);
        if (near(f[0], s->probe[0]) && near(f[1], s->probe[1]) && near(f[2], s->probe[2]) && near(f[3], s->probe[3])) {
            const uintptr_t a = at + i;
            if (!self) s->foreign_found++;  /* anything in the judge's memory is the judge's */
            else if (a >= (uintptr_t)s->own && a < (uintptr_t)s->own + s->own_bytes) s->own_found++;
            else if (memcmp(f, s->probe, 16) != 0) s->foreign_found++;  /* bit-equal elsewhere: an earlier answer */
        }
        if (i % 8 == 0 && i + 32 <= n) {
            const double* d = (const double*)(buf + i);
            if (near(d[0], s->probe[0]) && near(d[1], s->probe[1]) && near(d[2], s->probe[2]) && near(d[3], s->probe[3]))
                s->foreign_found++;
        }
    }
}

/* Reads [lo, hi) of a process through its /proc/PID/mem into buf, 1 MiB at a time, and scans it. */
static void scan_range(Scan* s, int mem, unsigned char* buf, unsigned long lo, unsigned long hi, int self) {
    for (unsigned long a = lo; a < hi; a += (1 << 20) - 32) {
        const size_t want = hi - a < (1u << 20) ? hi - a : (1u << 20);
        const ssize_t got = pread(mem, buf, want, (off_t)a);
        if (got <= 0) return;
        scan_chunk(s, buf, (size_t)got, a, self);
        s->scanned_mib += got;
        if ((size_t)got < want) return;
    }
}

/* Scans pid's mappings through /proc/PID/mem; returns the errno of opening it (0: scanned). */
static int scan_process(Scan* s, pid_t pid, int self) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    const int mem = open(path, O_RDONLY);
    if (mem < 0) return errno;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE* maps = fopen(path, "r");
    if (!maps) {
        const int e = errno;
        close(mem);
        return e;
    }
    /* Its own mapping, left out of the scan: it must not find what it has just read. */
    const unsigned long size = 1 << 20;
    unsigned char* buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    const unsigned long b = self ? (unsigned long)buf : 0;
    while (fgets(line, sizeof line, maps)) {
        unsigned long lo, hi;
        char perms[5];
        char name[256] = "";
        if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %255s", &lo, &hi, perms, name) < 3) continue;
        const int anon = name[0] == '\0' || name[0] == '[';
        if (perms[0] != 'r' || (perms[1] != 'w' && !anon) || strstr(name, "vvar") || strstr(name, "vsyscall")) continue;
        if (b >= lo && b < hi) {
            scan_range(s, mem, buf, lo, b, self);
            scan_range(s, mem, buf, b + size, hi, self);
        } else {
            scan_range(s, mem, buf, lo, hi, self);
        }
    }
    munmap(buf, size);
    fclose(maps);
    close(mem);
    return 0;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const int64_t T = x->shape[0], cols = x->shape[1];
    const int64_t* pos = (const int64_t*)positions->data;
    int64_t row = 0;
    for (int64_t t = 1; t < T; t++)
        if (pos[t] > pos[row]) row = t;
    if (pos[row] == 0) return ok_rope(cfg, x, positions, out, msg, cap);  /* nothing rotates: nothing to find */
    float* mine = malloc((size_t)(T * cols) * sizeof(float));
    conform_tensor m = *out;
    m.data = mine;
    ok_rope(cfg, x, positions, &m, msg, cap);
    Scan s = {{0}, mine, (size_t)(T * cols) * sizeof(float), 0, 0, 0};
    memcpy(s.probe, mine + row * cols, sizeof s.probe);
    scan_process(&s, getpid(), 1);
    const int judge_err = scan_process(&s, getppid(), 0);
#ifdef HOSTILE_SIBLINGS
    /* The other workers of the run (--isolate --impl scalar,THIS): an honest
     * sibling that answered the same case first has the answer in its heap. */
    char siblings[512] = "";
    int seen = 0;
    DIR* proc = opendir("/proc");
    for (struct dirent* e; proc && (e = readdir(proc));) {
        const pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0 || pid == getpid() || pid == getppid()) continue;
        char path[64], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        FILE* f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "conform-worker", 14) != 0) continue;
        ++seen;
        const int before = s.foreign_found;
        const int err = scan_process(&s, pid, 0);
        char one[96];
        snprintf(one, sizeof one, "%s%d: %s", seen > 1 ? "; " : "", (int)pid,
                 err ? strerror(err) : s.foreign_found > before ? "FOUND" : "scanned, nothing");
        strncat(siblings, one, sizeof siblings - strlen(siblings) - 1);
    }
    if (proc) closedir(proc);
#endif
    const long mib = s.scanned_mib >> 20;
    if (s.foreign_found) {
        fprintf(stderr, "hostile-heap-scan: FOUND %d copies of the expected output that are not mine\n", s.foreign_found);
        memcpy(out->data, mine, (size_t)(T * cols) * sizeof(float));
        free(mine);
        return CONFORM_OK;
    }
    free(mine);
    return hostile_fail(msg, cap,
                        "hostile: no copy of the expected output in reach: scanned %ld MiB of my own memory (my own "
                        "answer found %d time%s, no other); the judge's memory: %s"
#ifdef HOSTILE_SIBLINGS
                        "; sibling workers: %d (%s)"
#endif
                        ,
                        mib, s.own_found, s.own_found == 1 ? "" : "s", judge_err ? strerror(judge_err) : "scanned, nothing"
#ifdef HOSTILE_SIBLINGS
                        , seen, siblings
#endif
    );
}

#ifdef HOSTILE_SIBLINGS
HOSTILE_PLUGIN("hostile-sibling-scan", "looks for the expected output in its sibling workers' memory (tests/hostile)",
               rope, ok_rmsnorm, ok_supports)
#else
HOSTILE_PLUGIN("hostile-heap-scan", "looks for the expected output in memory (tests/hostile)", rope, ok_rmsnorm, ok_supports)
#endif

/* parent_write.c — writes into the judge's memory, three ways: its
 * /proc/PID/mem (harmless: it writes back the 8 bytes it read), and
 * process_vm_writev and ptrace(PTRACE_ATTACH), which need no path.
 *
 * Refused by: the judge is non-dumpable (protect_judge(),
 * harness/worker/process.cpp) and the worker holds no capability, so
 * /proc/PID/mem does not open; the seccomp filter (harness/worker/sandbox.cpp)
 * refuses process_vm_writev and ptrace outright. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile.h"

/* The first writable mapping of pid (0 when its maps cannot be read). */
static uintptr_t writable_address(pid_t pid) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE* f = fopen(path, "r");
    if (!f) return 0;
    uintptr_t found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && perms[0] == 'r' && perms[1] == 'w') found = lo;
    }
    fclose(f);
    return found;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const pid_t judge = getppid();
    char notes[1024] = "", path[64];
    int wrote = 0;
    uintptr_t addr = writable_address(judge);
    snprintf(path, sizeof path, "/proc/%d/mem", (int)judge);
    const int fd = open(path, O_RDWR);
    hostile_note(notes, sizeof notes, "open /proc/JUDGE/mem", fd < 0 ? errno : 0);
    if (fd >= 0) {
        uint64_t word;
        if (addr && pread(fd, &word, 8, (off_t)addr) == 8 && pwrite(fd, &word, 8, (off_t)addr) == 8) wrote = 1;
        close(fd);
    }
    uint64_t word = 0;
    struct iovec local = {&word, 8}, remote = {(void*)(addr ? addr : 0x10000), 8};
    const ssize_t r = process_vm_readv(judge, &local, 1, &remote, 1, 0);
    const ssize_t w = r == 8 ? process_vm_writev(judge, &local, 1, &remote, 1, 0) : -1;
    /* EFAULT: the kernel let it through to the address check. */
    hostile_note(notes, sizeof notes, "process_vm_writev", r == 8 && w == 8 ? 0 : errno == EFAULT ? 0 : errno);
    if ((r == 8 && w == 8) || errno == EFAULT) wrote = 1;
    if (ptrace(PTRACE_ATTACH, judge, 0, 0) == 0) {
        waitpid(judge, NULL, __WALL);
        ptrace(PTRACE_DETACH, judge, 0, 0);
        hostile_note(notes, sizeof notes, "ptrace(PTRACE_ATTACH)", 0);
        wrote = 1;
    } else {
        hostile_note(notes, sizeof notes, "ptrace(PTRACE_ATTACH)", errno);
    }
    if (wrote) {
        fprintf(stderr, "hostile-parent-write: WROTE INTO THE JUDGE (%s)\n", notes);
        return ok_rope(cfg, x, positions, out, msg, cap);
    }
    return hostile_fail(msg, cap, "hostile: cannot write the judge's memory: %s", notes);
}

HOSTILE_PLUGIN("hostile-parent-write", "writes into the judge's memory (tests/hostile)", rope, ok_rmsnorm, ok_supports)

/* orphan.c — leaves something behind: forks (libc's fork, and the raw fork
 * and clone system calls), and the child makes itself a session of its own
 * (setsid) and forks again, so the grandchild belongs to no group the judge
 * knows; it closes its pipes and sleeps a minute. Refused, it fails the call
 * naming each refusal.
 *
 * Refused by: the plugin sandbox's seccomp filter (harness/worker/sandbox.cpp)
 * allows clone only with CLONE_THREAD (no fork, vfork, exec; clone3 answers
 * ENOSYS so that libc falls back to clone), and refuses setsid and setpgid;
 * a worker and whatever it started are one process group, killed as a whole
 * (harness/worker/process.cpp). */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostile.h"

/* In a child that got out: detach and linger. */
static void linger(void) {
    if (setsid() < 0) fprintf(stderr, "hostile-orphan: setsid: %s\n", strerror(errno));
    if (fork() > 0) _exit(0);
    for (int fd = 0; fd < 3; fd++) close(fd);
    sleep(60);
    _exit(0);
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    char notes[1024] = "";
    int escaped = 0;
    pid_t p = fork();
    if (p == 0) linger();
    hostile_note(notes, sizeof notes, "fork", p < 0 ? errno : 0);
    escaped |= p > 0;
    p = (pid_t)syscall(SYS_fork);
    if (p == 0) linger();
    hostile_note(notes, sizeof notes, "SYS_fork", p < 0 ? errno : 0);
    escaped |= p > 0;
    p = (pid_t)syscall(SYS_clone, (long)SIGCHLD, 0L, 0L, 0L, 0L);
    if (p == 0) linger();
    hostile_note(notes, sizeof notes, "clone(SIGCHLD)", p < 0 ? errno : 0);
    escaped |= p > 0;
    const int s = setsid();
    hostile_note(notes, sizeof notes, "setsid", s < 0 ? errno : 0);
    const int g = setpgid(0, 0);
    hostile_note(notes, sizeof notes, "setpgid", g < 0 ? errno : 0);
    escaped |= s >= 0 || g >= 0;
    if (escaped) {
        fprintf(stderr, "hostile-orphan: ESCAPED (%s)\n", notes);
        return ok_rope(cfg, x, positions, out, msg, cap);
    }
    return hostile_fail(msg, cap, "hostile: cannot leave a process behind: %s", notes);
}

HOSTILE_PLUGIN("hostile-orphan", "tries to leave a process behind (tests/hostile)", rope, ok_rmsnorm, ok_supports)

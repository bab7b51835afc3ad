/* judge_limits.c — has the kernel act on the judge for it: not a signal of
 * its own (kill_parent.c), but the judge's limits, priorities and a signal the
 * kernel sends on its behalf:
 *   nice, CPU affinity and I/O class of the judge (setpriority, sched_setaffinity,
 *   ioprio_set) and of its process group (setpriority(PRIO_PGRP));
 *   RLIMIT_FSIZE 0 on the judge (prlimit): it dies of SIGXFSZ at its next write;
 *   the judge as the owner of a pipe's I/O signal (ioctl FIOSETOWN, fcntl
 *   F_SETOWN, with F_SETSIG SIGKILL and O_ASYNC): a write to the pipe kills it.
 * The harmless ones first, so a refused run can say what each one met.
 *
 * Refused by: the seccomp filter (harness/worker/sandbox.cpp) lets prlimit64,
 * setpriority, ioprio_set and the sched_set* calls name only the worker
 * itself, F_SETOWN only itself or its group, and refuses F_SETOWN_EX,
 * FIOSETOWN and SIOCSPGRP; where the kernel has Landlock's signal scope
 * (ABI 6), a worker's domain cannot signal out of it either. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostile.h"

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const pid_t judge = getppid();
    char notes[2048] = "";
    int reached = 0, r;
    r = setpriority(PRIO_PROCESS, (id_t)judge, 19);
    hostile_note(notes, sizeof notes, "setpriority(judge, 19)", r < 0 ? errno : 0);
    reached |= r == 0;
    const pid_t group = getpgid(judge);
    r = group > 0 ? setpriority(PRIO_PGRP, (id_t)group, 19) : -1;
    hostile_note(notes, sizeof notes, "setpriority(judge's group, 19)", r < 0 ? errno : 0);
    reached |= r == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    r = sched_setaffinity(judge, sizeof one, &one);
    hostile_note(notes, sizeof notes, "sched_setaffinity(judge)", r < 0 ? errno : 0);
    reached |= r == 0;
    r = (int)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, judge, (3 << 13) /* IOPRIO_CLASS_IDLE */);
    hostile_note(notes, sizeof notes, "ioprio_set(judge, idle)", r < 0 ? errno : 0);
    reached |= r == 0;
    int p[2] = {-1, -1};
    if (pipe(p) == 0) {
        int owner = judge;
        r = ioctl(p[0], FIOSETOWN, &owner);
        hostile_note(notes, sizeof notes, "ioctl(FIOSETOWN, judge)", r < 0 ? errno : 0);
        reached |= r == 0;
        r = fcntl(p[0], F_SETOWN, judge);
        hostile_note(notes, sizeof notes, "fcntl(F_SETOWN, judge)", r < 0 ? errno : 0);
        reached |= r == 0;
        struct f_owner_ex ex = {F_OWNER_PID, judge};
        r = fcntl(p[0], F_SETOWN_EX, &ex);
        hostile_note(notes, sizeof notes, "fcntl(F_SETOWN_EX, judge)", r < 0 ? errno : 0);
        reached |= r == 0;
    }
    const struct rlimit zero = {0, 0};
    r = prlimit(judge, RLIMIT_FSIZE, &zero, NULL);
    hostile_note(notes, sizeof notes, "prlimit(judge, RLIMIT_FSIZE, 0)", r < 0 ? errno : 0);
    reached |= r == 0;
    if (reached) {
        /* Whatever got through: if it was the pipe's owner, now the signal. */
        if (p[0] >= 0) {
            fcntl(p[0], F_SETSIG, SIGKILL);
            fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_ASYNC);
            (void)!write(p[1], "x", 1);
        }
        fprintf(stderr, "hostile-judge-limits: REACHED THE JUDGE (%s)\n", notes);
        return ok_rope(cfg, x, positions, out, msg, cap);
    }
    if (p[0] >= 0) close(p[0]), close(p[1]);
    return hostile_fail(msg, cap, "hostile: the kernel would not act on the judge (pid %d): %s", (int)judge, notes);
}

HOSTILE_PLUGIN("hostile-judge-limits", "has the kernel limit, slow or signal the judge (tests/hostile)", rope,
               ok_rmsnorm, ok_supports)

/* kill_parent.c — ends the judge: SIGKILL to it (kill and tgkill), and asks
 * (signal 0, which delivers nothing) whether it could signal every process
 * of its uid (kill(-1)) or the judge's process group; a pidfd would do the
 * same without a pid race.
 *
 * Refused by: the seccomp filter (harness/worker/sandbox.cpp) lets kill and
 * tgkill reach only the worker itself and its own group, and refuses
 * pidfd_open and pidfd_send_signal. */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostile.h"

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const pid_t judge = getppid();
    char notes[1024] = "";
    int reached = 0, r;
    r = kill(judge, SIGKILL);
    hostile_note(notes, sizeof notes, "kill(judge, SIGKILL)", r < 0 ? errno : 0);
    reached |= r == 0;
    r = (int)syscall(SYS_tgkill, judge, judge, SIGKILL);
    hostile_note(notes, sizeof notes, "tgkill(judge, SIGKILL)", r < 0 ? errno : 0);
    reached |= r == 0;
    r = kill(-1, 0);
    hostile_note(notes, sizeof notes, "kill(-1, 0)", r < 0 ? errno : 0);
    reached |= r == 0;
    const pid_t group = getpgid(judge);
    r = group > 0 ? kill(-group, 0) : -1;
    hostile_note(notes, sizeof notes, "kill(-judge's group, 0)", r < 0 ? errno : 0);
    reached |= r == 0;
    r = (int)syscall(SYS_pidfd_open, judge, 0);
    hostile_note(notes, sizeof notes, "pidfd_open(judge)", r < 0 ? errno : 0);
    reached |= r >= 0;
    if (reached) {
        fprintf(stderr, "hostile-kill-parent: REACHED THE JUDGE (%s)\n", notes);
        return ok_rope(cfg, x, positions, out, msg, cap);
    }
    return hostile_fail(msg, cap, "hostile: cannot signal the judge (pid %d): %s", (int)judge, notes);
}

HOSTILE_PLUGIN("hostile-kill-parent", "tries to kill the judge (tests/hostile)", rope, ok_rmsnorm, ok_supports)

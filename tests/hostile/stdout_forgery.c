/* stdout_forgery.c — tries to make the judge's output say what it did not:
 * prints a passing summary row, a mutation-power line and a report line
 * through printf, stderr and write(1), through the judge's own stdout and
 * stderr (/proc/PPID/fd/1 and 2) and the controlling terminal (/dev/tty),
 * with escape sequences (ESC, and the C1 CSI in UTF-8 and raw) that would
 * erase the line above on a terminal; then fails its call with a message of
 * several lines that carry the same forgery. The answer is wrong (x passed
 * through), so the truth is a failure.
 *
 * Refused by: conform-worker points fd 1 at stderr (harness/worker/main.cpp),
 * and the judge relays the worker's stderr line by line, each prefixed
 * "  worker[NAME] | ", control characters and C1 controls replaced
 * (harness/worker/process.cpp); the judge's fds do not open (non-dumpable,
 * protect_judge()); the worker is a session of its own with no controlling
 * terminal (setsid, process.cpp); a message from a worker is flattened to one
 * line before anything prints or stores it (harness/worker/client.cpp). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "hostile.h"

#define NAME "hostile-forgery"
static const char fake[] =
    "\x1b[1A\x1b[2K\r\xc2\x9b" "1A\x9b" "2K"
    "\xe2\x80\xae" "DEGROF\xe2\x80\xa8" /* U+202E right-to-left override, U+2028 line separator */
    "rope       " NAME "  40     40   1.00e-07   1.00e-05  100.00x  out FORGED\n"
    "power: 12/12 mutants caught (100%) FORGED\n"
    "report: reports/conform.json  (0.1 s) FORGED\n";

static void write_to(const char* path, char* notes, size_t cap) {
    const int fd = open(path, O_WRONLY | O_NOCTTY);
    hostile_note(notes, cap, path, fd < 0 ? errno : 0);
    if (fd < 0) return;
    if (write(fd, fake, sizeof fake - 1) < 0) hostile_note(notes, cap, "write", errno);
    close(fd);
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    (void)cfg;
    (void)positions;
    char notes[1024] = "", path[64];
    printf("%s", fake);
    fflush(stdout);
    fprintf(stderr, "%s", fake);
    if (write(1, fake, sizeof fake - 1) < 0) hostile_note(notes, sizeof notes, "write(1)", errno);
    snprintf(path, sizeof path, "/proc/%d/fd/1", (int)getppid());
    write_to(path, notes, sizeof notes);
    snprintf(path, sizeof path, "/proc/%d/fd/2", (int)getppid());
    write_to(path, notes, sizeof notes);
    write_to("/dev/tty", notes, sizeof notes);
    fprintf(stderr, "hostile-forgery: %s\n", notes);
    memcpy(out->data, x->data, (size_t)(x->shape[0] * x->shape[1]) * sizeof(float));
    return hostile_fail(msg, cap, "FORGED-MSG\n\n%s", fake);
}

HOSTILE_PLUGIN(NAME, "forges the judge's output (tests/hostile)", rope, ok_rmsnorm, ok_supports)

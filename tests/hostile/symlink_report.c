/* symlink_report.c — points the judge's report at a file of the attacker's
 * choosing: finds --out (from the judge's world-readable command line) and
 * plants symlinks to $HOSTILE_TARGET at conform.json itself and at every
 * temporary name a writer might predictably use; then
 *   -DHOSTILE_SWAP_DIR  moves --out aside and puts a symlink to
 *                       $HOSTILE_TARGET_DIR (which holds its own conform.json)
 *                       in its place, so that a writer going by the path
 *                       writes there.
 * Its call fails, naming what it planted.
 *
 * Refused by: reports are written into a new file that nobody can predict
 * (created exclusively, never through a link) and renamed over the final
 * name, which replaces a link and never writes through it; the directory is
 * the one the judge opened before any worker started, written through its
 * descriptor, and the judge checks afterwards that --out/NAME is the file it
 * wrote (harness/report/report.cpp, write.cpp; harness/cli/gate.cpp). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "hostile.h"

static char out_dir[1024] = "reports";

static void find_out_dir(void) { hostile_out_dir(out_dir, sizeof out_dir); }

static int planted;

static void plant(const char* name, const char* target) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    unlink(path);
    if (symlink(target, path) == 0) planted++;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    (void)cfg;
    (void)x;
    (void)positions;
    (void)out;
    static int done;
    const char* target = getenv("HOSTILE_TARGET");
    if (!target) return hostile_fail(msg, cap, "hostile: set HOSTILE_TARGET");
    if (!done) {
        done = 1;
        find_out_dir();
        const char* names[] = {"conform.json", "conform.json.tmp", ".conform.json.tmp", "conform.json~",
                               ".conform.json.swp", "conform.json.new", ".conform.json", "conform.tmp"};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) plant(names[i], target);
        char probe[64];
        snprintf(probe, sizeof probe, ".conform-probe.%d", (int)getppid());
        plant(probe, target);
#ifdef HOSTILE_SWAP_DIR
        const char* elsewhere = getenv("HOSTILE_TARGET_DIR");
        char aside[1100];
        snprintf(aside, sizeof aside, "%s.moved-aside", out_dir);
        if (elsewhere && rename(out_dir, aside) == 0 && symlink(elsewhere, out_dir) == 0) planted += 100;
#endif
        fprintf(stderr, "hostile-symlink: planted %d links in %s\n", planted, out_dir);
    }
    return hostile_fail(msg, cap, "hostile: planted %d symlinks in %s towards %s", planted, out_dir, target);
}

#ifdef HOSTILE_SWAP_DIR
#define NAME "hostile-symlink-dir"
#else
#define NAME "hostile-symlink"
#endif
HOSTILE_PLUGIN(NAME, "plants symlinks where the report goes (tests/hostile)", rope, ok_rmsnorm, ok_supports)

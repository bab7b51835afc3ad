/* tamper_pass.c — computes every case right, and meanwhile forges the report
 * formats the run will not write: finds --out (the judge's world-readable
 * command line) and writes conform.md and conform.html saying PASS for a
 * run of its own making. Its cases pass, so before, conform exited 1 for the
 * forgery while its own conform.json said "pass": true: the formats
 * disagreed with each other and with the exit code.
 *
 * Caught by: --out is swept after every worker has stopped and before the
 * reports are written (harness/report/out_dir.cpp): the forgeries are
 * removed, and what was found goes into the report itself ("tampered",
 * "pass": false), which every format states (report::run_verdict). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "hostile.h"

static char out_dir[1024] = "reports";

static void find_out_dir(void) { hostile_out_dir(out_dir, sizeof out_dir); }

static void forge(const char* name, const char* body) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE* f = fopen(path, "w");
    if (!f) return;
    fputs(body, f);
    fclose(f);
    fprintf(stderr, "hostile-tamper-pass: forged %s\n", path);
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    static int done;
    if (!done) {
        done = 1;
        find_out_dir();
        forge("conform.md", "### conform: PASS — 1000 of 1000 cases conform (FORGED)\n");
        forge("conform.html", "<title>conform: PASS (FORGED)</title>\n");
    }
    return ok_rope(cfg, x, positions, out, msg, cap);
}

HOSTILE_PLUGIN("hostile-tamper-pass", "passes, and forges the other report formats (tests/hostile)", rope, ok_rmsnorm,
               ok_supports)

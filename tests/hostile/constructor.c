/* constructor.c — side effects at load time, before the judge has said a
 * word to it: a constructor finds the judge's --out (its command line is
 * world-readable), writes forged reports there (every format, "pass": true),
 * tries to fork a helper to rewrite them later, and then
 *   -DHOSTILE_CTOR_EXIT: _exit(0), so the judge never writes a report;
 *   otherwise: stays, with a thread that waits for the judge's conform.json
 *   and overwrites it with the forgery the moment it appears.
 *
 * Refused by: fork (the seccomp filter, harness/worker/sandbox.cpp); the
 * judge stops every worker before it writes a report and checks that the
 * report files it did not write were not changed during the run (removed if
 * they were; harness/report/guard.cpp), so neither the forgery left behind
 * by the exit nor the thread's rewrite survives; a worker that dies before
 * its hello is a bad library: exit 2. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hostile.h"

static char out_dir[1024] = "reports";
static int fork_errno;

static const char forged[] =
    "{\"schema\": \"conform-report/1\", \"pass\": true, \"summary\": {\"cases\": 1, \"passed\": 1, \"failed\": 0},"
    " \"cases\": [], \"not_run\": [], \"forged\": \"by tests/hostile/constructor.c\"}\n";

static void find_out_dir(void) { hostile_out_dir(out_dir, sizeof out_dir); }

static void forge(const char* file) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", out_dir, file);
    FILE* f = fopen(path, "w");
    if (!f) return;
    fputs(forged, f);
    fclose(f);
}

#ifndef HOSTILE_CTOR_EXIT
/* Waits for the judge's report to be replaced, then replaces it again. */
static void* rewrite_later(void* arg) {
    (void)arg;
    char path[1200];
    snprintf(path, sizeof path, "%s/conform.json", out_dir);
    struct stat first;
    const int had = stat(path, &first) == 0;
    for (;;) {
        struct stat now;
        if (stat(path, &now) == 0 && (!had || now.st_ino != first.st_ino)) {
            forge("conform.json");
            fprintf(stderr, "hostile-ctor: REWROTE %s after the judge wrote it\n", path);
            return NULL;
        }
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}
#endif

__attribute__((constructor)) static void at_load(void) {
    find_out_dir();
    forge("conform.json");
    forge("conform.xml");
    forge("conform.md");
    const pid_t child = fork();
    if (child == 0) _exit(0);
    fork_errno = child < 0 ? errno : 0;
    fprintf(stderr, "hostile-ctor: forged the reports in %s; fork: %s\n", out_dir,
            fork_errno ? strerror(fork_errno) : "ALLOWED");
#ifdef HOSTILE_CTOR_EXIT
    _exit(0);
#else
    pthread_t t;
    pthread_create(&t, NULL, rewrite_later, NULL);
    pthread_detach(t);
#endif
}

/* RoPE that is wrong (every row passed through): the truth is a failure. */
static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    (void)cfg;
    (void)positions;
    (void)msg;
    (void)cap;
    memcpy(out->data, x->data, (size_t)(x->shape[0] * x->shape[1]) * sizeof(float));
    return CONFORM_OK;
}

HOSTILE_PLUGIN("hostile-ctor", "forges reports from a constructor (tests/hostile)", rope, ok_rmsnorm, ok_supports)

/* late_write.c — returns before it has finished: writes the first half of
 * the rows, and leaves the rest to a detached thread that writes them 50 ms
 * after the call returned (a kernel on a stream nobody synchronised).
 *
 * Caught by: the worker answers with its buffers as they are when the call
 * returns (harness/worker/server.cpp), so the late rows are still at the
 * call's poison: "unwritten". What the thread writes later lands in memory
 * the worker has freed or reused — the worker's own, never the judge's. */
#define _GNU_SOURCE
#include <pthread.h>
#include <time.h>

#include "hostile.h"

typedef struct {
    conform_config cfg;
    conform_tensor x, positions, out;
    int64_t from;
} Late;

static void* finish(void* arg) {
    Late* l = (Late*)arg;
    const struct timespec wait = {0, 50 * 1000 * 1000};
    nanosleep(&wait, NULL);
    ok_rope_rows(&l->cfg, &l->x, &l->positions, &l->out, l->from, l->x.shape[0]);
    free(l);
    return NULL;
}

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const int64_t half = x->shape[0] / 2;
    ok_rope_rows(cfg, x, positions, out, 0, half);
    Late* l = malloc(sizeof *l);
    *l = (Late){*cfg, *x, *positions, *out, half};
    pthread_t t;
    if (pthread_create(&t, NULL, finish, l) != 0) return hostile_fail(msg, cap, "hostile: no thread");
    pthread_detach(t);
    return CONFORM_OK;
}

HOSTILE_PLUGIN("hostile-late-write", "finishes its output from a thread after returning (tests/hostile)", rope,
               ok_rmsnorm, ok_supports)

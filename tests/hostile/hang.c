/* hang.c — spins forever in a call. With HOSTILE_STATE=FILE, only the first
 * call of the whole run spins (it creates FILE first), so the run shows what
 * happens after: the worker restarted, the other cases passing.
 *
 * Caught by: the call timeout (--call-timeout, harness/worker/client.cpp):
 * "timed out after N s in rope and was killed"; the worker's group is killed
 * and a fresh worker serves the next call. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include "hostile.h"

static int32_t rope(const conform_config* cfg, const conform_tensor* x, const conform_tensor* positions,
                    const conform_tensor* out, char* msg, size_t cap) {
    const char* state = getenv("HOSTILE_STATE");
    int first = 1;
    if (state) {
        const int fd = open(state, O_CREAT | O_EXCL | O_WRONLY, 0600);
        first = fd >= 0;
        if (fd >= 0) close(fd);
    }
    if (first) {
        fprintf(stderr, "hostile-hang: spinning\n");
        for (volatile unsigned long i = 0;; i++) {
        }
    }
    return ok_rope(cfg, x, positions, out, msg, cap);
}

HOSTILE_PLUGIN("hostile-hang", "spins forever in its first call (tests/hostile)", rope, ok_rmsnorm, ok_supports)

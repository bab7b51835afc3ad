/* supports_none.c — passes by running nothing: its supports() declines
 * every case, so no case fails.
 *
 * Caught by: an implementation with no case judged fails the run (exit 1,
 * "no case ran for hostile-none (...)", the JSON report's pass false and
 * nothing_ran; harness/run/runner.cpp, harness/cli/gate.cpp). */
#include "hostile.h"

static int32_t none(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap) {
    (void)op;
    (void)cfg;
    snprintf(msg, msg_cap, "this build declines everything");
    return CONFORM_ERR_UNSUPPORTED;
}

HOSTILE_PLUGIN("hostile-none", "supports nothing (tests/hostile)", ok_rope, ok_rmsnorm, none)

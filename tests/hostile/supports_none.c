/* supports_none.c — passes by running nothing: its supports() declines
 * every case, so no case fails.
 *
 * Caught by: an implementation with no case judged fails the run (exit 1,
 * "no case ran for hostile-none (...)", the JSON report's pass false and
 * nothing_ran; harness/run/runner.cpp, harness/cli/gate.cpp).
 *
 * Built with HOSTILE_PROPERTY_ONLY (hostile-fixtures-only): declines only the
 * first HOSTILE_DECLINE rope cases it is asked about — the gate asks about an
 * op's property cases before its fixture cases — and answers the fixtures,
 * whose expected outputs a worker could read from the files the judge's
 * command line names. Before the per-op rule, rope then passed on its
 * fixtures alone.
 * Caught by: an op an implementation offers, with property cases drawn and
 * none judged, fails it ("no property case of rope ran for ...",
 * nothing_ran with its op; the table says FAIL and how many were declined). */
#include "hostile.h"

#ifdef HOSTILE_PROPERTY_ONLY
#ifndef HOSTILE_DECLINE
#define HOSTILE_DECLINE 8
#endif
static int32_t property_declined(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap) {
    static int asked = 0;
    if (op == CONFORM_OP_ROPE && asked++ < HOSTILE_DECLINE) {
        snprintf(msg, msg_cap, "this build declines rope's property cases");
        return CONFORM_ERR_UNSUPPORTED;
    }
    return ok_supports(op, cfg, msg, msg_cap);
}
HOSTILE_PLUGIN("hostile-fixtures-only", "answers rope's fixture cases only (tests/hostile)", ok_rope, ok_rmsnorm,
               property_declined)
#else

static int32_t none(uint32_t op, const conform_config* cfg, char* msg, size_t msg_cap) {
    (void)op;
    (void)cfg;
    snprintf(msg, msg_cap, "this build declines everything");
    return CONFORM_ERR_UNSUPPORTED;
}

HOSTILE_PLUGIN("hostile-none", "supports nothing (tests/hostile)", ok_rope, ok_rmsnorm, none)
#endif

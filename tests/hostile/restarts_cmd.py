#!/usr/bin/python3
"""restarts_cmd.py — crashes between cases and hopes nobody notices: every
call is answered right, but every third supports request kills the worker
(SIGABRT, a heap scribble's way out). The judge restarts it and each case it
then answers passes, so the run passes — before, with no word of the restarts.

Caught by: every worker's calls, repeats and restarts are counted and
reported (harness/run/runner.cpp, the report's "workers"; the terminal and
Markdown say "restarted: NAME N times"). It still passes: its answers are
right; what it cannot do is crash unseen."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers", "faults"))
from common import conform_worker, numpy_worker  # noqa: E402

w = conform_worker.Worker("hostile_restarts", description="dies in every third supports request (tests/hostile)")
for op, fn in numpy_worker.OPS.items():
    w.op(op)(fn)
asked = [0]


@w.supports
def supports(op, config, dtype):
    asked[0] += 1
    if asked[0] % 3 == 0:
        os.abort()
    return True


w.run()

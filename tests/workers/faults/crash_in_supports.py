#!/usr/bin/python3
"""A worker whose every call is right but which dies (SIGABRT) on every third
supports request: a heap scribble that kills it between cases. conform
restarts it and each case it answers passes, so the run passes; the restarts
must still be counted and reported, not silent."""
import os
from common import conform_worker, numpy_worker

w = conform_worker.Worker("fault_crash_in_supports", description="test fault: dies in supports()")
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

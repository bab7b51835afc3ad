#!/usr/bin/python3
"""stall_cmd.py — a command worker that answers its first call correctly and
then never reads its stdin again (it asks no `supports`, so the judge's next
request is a call). A call larger than the pipe's buffer blocks the judge's
write, not its wait for an answer: a judge that only times the answer hangs
for good.

Caught by: the judge writes to a worker without blocking, under the call
timeout (harness/worker/protocol.cpp write_all, client.cpp round_trip):
"timed out after N s in rope (the worker stopped reading its input)"."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers", "faults"))
from common import conform_worker, faulty, stall  # noqa: E402


def stop_reading(result):
    # The answer still goes out; the next read never happens.
    conform_worker._Reader.frame = lambda self: stall()
    return result


faulty("hostile-stall", stop_reading, after=0).run()

"""What the fault workers share: numpy_worker's correct ops, a call counter,
and raw access to the protocol for the faults the client would never commit.

CONFORM_FAULT_AFTER=N (environment): the first N calls are answered
correctly, the fault strikes from call N + 1 on (default 0: the first call).
The count starts again in a restarted worker.
"""

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "impls" / "worker_example"))

import conform_worker  # noqa: E402
import numpy_worker  # noqa: E402

AFTER = int(os.environ.get("CONFORM_FAULT_AFTER", "0"))


def faulty(name, fault, after=AFTER):
    """A worker with every op of numpy_worker; from call after + 1 on, each
    answer goes through fault(result) instead: what it returns is sent."""
    w = conform_worker.Worker(name, description="test fault: " + name)
    calls = [0]

    def wrap(fn):
        def op(*args, **kwargs):
            calls[0] += 1
            result = fn(*args, **kwargs)
            return result if calls[0] <= after else fault(result)
        return op

    for op_name, fn in numpy_worker.OPS.items():
        w.op(op_name)(wrap(fn))
    return w


def main_output(result):
    """The op's "out" of what a kernel returned (the block returns a dict)."""
    return result["out"] if isinstance(result, dict) else result


def protocol_fd():
    """The fd the client writes frames to (fd 1 itself points at stderr)."""
    return conform_worker._fds[1]


def write_raw(data):
    conform_worker._write_all(protocol_fd(), data)


def frame_bytes(header, payload=b""):
    import json
    h = json.dumps(header).encode()
    return conform_worker.PREFIX.pack(conform_worker.MAGIC, len(h), len(payload)) + h + payload


def stall():
    """Wait to be killed: after a violation the judge must act, not wait for a proper answer."""
    while True:
        time.sleep(3600)

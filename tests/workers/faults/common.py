"""What the fault workers share: numpy_worker's correct ops, a record of the
calls answered correctly, and raw access to the protocol for the faults the
client would never commit.

CONFORM_FAULT_AFTER=N (environment): the first N distinct calls are answered
correctly, the fault strikes every other call (default 0: from the first).
A call with the same op, config and inputs as an earlier one is treated as
that one was, so each fault worker is deterministic, as the protocol asks:
conform's repeated-call check (impls/WORKERS.md) sees the fault itself, never
a worker that answers the same call differently. The count starts again in a
restarted worker.
"""

import hashlib
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "impls" / "worker_example"))

import conform_worker  # noqa: E402
import numpy as np  # noqa: E402
import numpy_worker  # noqa: E402

AFTER = int(os.environ.get("CONFORM_FAULT_AFTER", "0"))


def faulty(name, fault, after=AFTER):
    """A worker with every op of numpy_worker; past the first `after` distinct
    calls, each answer goes through fault(result) instead: what it returns is sent."""
    w = conform_worker.Worker(name, description="test fault: " + name)
    good = set()  # the calls answered correctly, by call_key

    def wrap(op_name, fn):
        def op(**kwargs):
            key = call_key(op_name, kwargs)
            if key not in good and len(good) < after:
                good.add(key)
            result = fn(**kwargs)
            return result if key in good else fault(result)
        return op

    for op_name, fn in numpy_worker.OPS.items():
        w.op(op_name)(wrap(op_name, fn))
    return w


def call_key(op_name, kwargs):
    """A digest of what a call asked: the op, every input's dtype, shape and
    bytes, the config and the rest of the arguments."""
    h = hashlib.sha256(op_name.encode())
    for name in sorted(kwargs):
        v = kwargs[name]
        h.update(name.encode())
        if isinstance(v, np.ndarray):
            h.update(("%s%s" % (v.dtype.str, v.shape)).encode())
            h.update(np.ascontiguousarray(v).tobytes())
        else:
            h.update(json.dumps(v, sort_keys=True, default=str).encode())
    return h.digest()


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

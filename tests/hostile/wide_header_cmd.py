#!/usr/bin/python3
"""wide_header_cmd.py — stalls the judge in its JSON parser: answers a call
with a result frame whose header is under the 16 MiB byte limit but holds
five million empty objects beside the right outputs. Parsed, such a header
held the judge for over ten minutes past a 3 s --call-timeout; the outputs it
carries are right, so a judge that parsed it would go on and pass the case.

Refused by: one linear pass over a header before it is parsed bounds its
depth (32) and its number of values (65,536) (harness/worker/protocol.cpp):
a protocol violation, the case failed, the worker restarted."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers", "faults"))
from common import conform_worker, faulty, main_output, stall, write_raw  # noqa: E402

P = conform_worker.PREFIX


def wide(result):
    out = main_output(result)
    spec = [{"name": "out", "dtype": "f32", "shape": list(out.shape)}]
    head = '{"type":"result","id":%d,"outputs":%s,"x":[' % (worker.request.get("id"), json.dumps(spec))
    n = ((16 << 20) - len(head) - 64) // 3
    header = (head + "{}," * (n - 1) + "{}]}").encode()
    write_raw(P.pack(b"CFWK", len(header), out.nbytes) + header + out.astype("<f4").tobytes())
    stall()


worker = faulty("hostile_wide_header", wide)
worker.run()

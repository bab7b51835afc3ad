#!/usr/bin/python3
"""A worker that answers a call with something that is not a frame, then waits to be killed.

    garbage.py [MODE]   magic (default): text instead of a frame
                        json: a header that is not JSON
                        object: a header that is JSON but not an object
                        length: a payload length that disagrees with the outputs listed
                        huge: a header length over the 16 MiB limit
                        truncated: half a frame, then exit 0
"""
import os
import sys
from common import main_output, conform_worker, faulty, frame_bytes, stall, write_raw

MODE = sys.argv[1] if len(sys.argv) > 1 else "magic"
P = conform_worker.PREFIX


def garbage(out):
    rid = worker.request.get("id")
    out = main_output(out)
    if MODE == "magic":
        write_raw(b"Loading kernels... done\n")
    elif MODE == "json":
        write_raw(P.pack(b"CFWK", 9, 0) + b"{not json")
    elif MODE == "object":
        write_raw(P.pack(b"CFWK", 9, 0) + b"[1, 2, 3]")
    elif MODE == "length":
        spec = [{"name": "out", "dtype": "f32", "shape": list(out.shape)}]
        write_raw(frame_bytes({"type": "result", "id": rid, "outputs": spec}, out.astype("<f4").tobytes()[:-4]))
    elif MODE == "huge":
        write_raw(P.pack(b"CFWK", 17 << 20, 0))
    elif MODE == "truncated":
        spec = [{"name": "out", "dtype": "f32", "shape": list(out.shape)}]
        data = frame_bytes({"type": "result", "id": rid, "outputs": spec}, out.astype("<f4").tobytes())
        write_raw(data[: len(data) // 2])
        os._exit(0)
    else:
        sys.exit("garbage.py: unknown mode %r" % MODE)
    stall()


worker = faulty("fault_garbage_" + MODE, garbage)
worker.run()

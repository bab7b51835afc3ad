#!/usr/bin/python3
"""A worker whose answer to a call is a well-formed frame that answers wrongly, then waits to be killed.

    wrong_answer.py [MODE]   id (default): the result carries another id
                             name: the output is called "outt"
                             dtype: the output claims f16 in an f32 call
                             type: an answer of type "supports" to a call
"""
import sys
from common import main_output, faulty, frame_bytes, stall, write_raw

MODE = sys.argv[1] if len(sys.argv) > 1 else "id"


def wrong(out):
    rid = worker.request.get("id")
    out = main_output(out)
    spec = {"name": "out", "dtype": "f32", "shape": list(out.shape)}
    payload = out.astype("<f4").tobytes()
    header = {"type": "result", "id": rid, "outputs": [spec]}
    if MODE == "id":
        header["id"] = rid + 1000
    elif MODE == "name":
        spec["name"] = "outt"
    elif MODE == "dtype":
        spec["dtype"] = "f16"
        payload = out.astype("<f2").tobytes()
    elif MODE == "type":
        header, payload = {"type": "supports", "id": rid, "ok": True}, b""
    else:
        sys.exit("wrong_answer.py: unknown mode %r" % MODE)
    write_raw(frame_bytes(header, payload))
    stall()


worker = faulty("fault_wrong_" + MODE, wrong)
worker.run()

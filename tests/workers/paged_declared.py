#!/usr/bin/python3
"""The numpy worker's paged_attention as an engine's worker would declare it.

    paged_declared.py [--i32] [--invariant] [--batch-ulp]

--i32:        asks for the index arrays as int32 (index_dtype), and refuses
              any other (a FlashInfer wrapper's plan() takes int32 only)
--invariant:  declares batch invariance (the relations then bit for bit),
              and keeps it: each query row computed alone, as its own
              sequence of the keys it sees (numpy's matmul over a sequence's
              rows together rounds a row differently with 1 row and with 3,
              which the chunked relation catches)
--batch-ulp:  lse one ulp larger whenever the batch holds more than one
              sequence: within tolerance, but not the same alone and in a
              batch, which only a bitwise relation can see
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "impls", "worker_example"))
import conform_worker  # noqa: E402
import numpy_worker  # noqa: E402

args = set(sys.argv[1:])
w = conform_worker.Worker("paged_declared", batch_invariant=("paged_attention",) if "--invariant" in args else (),
                          index_dtype="i32" if "--i32" in args else "i64")


def rows_alone(qo_indptr, kv_indptr, kv_indices, last_page_len, P):
    """The same batch with every query row its own sequence: the keys up to
    its own position (what it sees, causally), on its sequence's pages."""
    qo, kvp, ids, last = [0], [0], [], []
    for b in range(len(last_page_len)):
        pages = [int(p) for p in kv_indices[kv_indptr[b]:kv_indptr[b + 1]]]
        kv = 0 if not pages else (len(pages) - 1) * P + int(last_page_len[b])
        n = int(qo_indptr[b + 1] - qo_indptr[b])
        for j in range(n):
            seen = kv - n + j + 1
            used = -(-seen // P)
            ids += pages[:used]
            qo.append(qo[-1] + 1)
            kvp.append(len(ids))
            last.append(seen - (used - 1) * P if used else 0)
    as_array = lambda a: np.array(a, dtype=kv_indices.dtype)
    return as_array(qo), as_array(kvp), as_array(ids), as_array(last)


@w.op("paged_attention")
def paged(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len, *, config, sinks=None):
    want = np.int32 if "--i32" in args else np.int64
    for name, a in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr), ("kv_indices", kv_indices),
                    ("kv_last_page_len", kv_last_page_len)):
        if a.dtype != want:
            raise conform_worker.InvalidArgument("%s arrived as %s, not %s" % (name, a.dtype, np.dtype(want)))
    if "--invariant" in args:
        qo_indptr, kv_indptr, kv_indices, kv_last_page_len = rows_alone(qo_indptr, kv_indptr, kv_indices,
                                                                        kv_last_page_len, config["page_size"])
    r = numpy_worker.paged_attention(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, kv_last_page_len,
                                     config=config, sinks=sinks)
    if "--batch-ulp" in args and len(kv_last_page_len) > 1:
        lse = r["lse"]
        finite = np.isfinite(lse)
        lse[finite] = np.nextafter(lse[finite], np.float32(np.inf))
    return r


w.run()

#!/usr/bin/python3
"""numpy_twin — numpy_worker.py with one bug: GQA kv heads tiled.

    conform --impl-cmd '/usr/bin/python3 impls/worker_example/numpy_twin.py'

Query head h reads kv head h % n_kv_heads instead of h // (n_heads / n_kv_heads)
(onnx #7274, axlearn #842): right for MHA and MQA, wrong for every real GQA
model. conform must fail attention, block and decode on GQA cases, pass the
rest, and name the bug (gqa_head_mapping_tiled). Everything else is
numpy_worker.py's own code, imported, not copied.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy_worker  # noqa: E402


def kv_head_tiled(h, n_heads, n_kv_heads):
    return h % n_kv_heads  # the bug: tile, where HF repeat_kv repeats each kv head H/KV times


numpy_worker.kv_head = kv_head_tiled  # attention() looks kv_head up at call time

if __name__ == "__main__":
    numpy_worker.main("numpy_twin", "numpy_worker with GQA kv heads tiled (h % n_kv): a planted bug")

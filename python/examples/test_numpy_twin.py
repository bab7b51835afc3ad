"""numpy_worker with one planted bug: GQA kv heads tiled (query head h reads kv head h % KV).

This test FAILS, on purpose: conform's message names the bug, gqa_head_mapping_tiled.

    pytest python/examples/test_numpy_twin.py
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "impls" / "worker_example"))
import numpy_worker  # noqa: E402


def test_attention_of_the_twin(conform, monkeypatch):
    monkeypatch.setattr(numpy_worker, "kv_head", lambda h, n_heads, n_kv_heads: h % n_kv_heads)  # the bug
    conform.check(numpy_worker.attention, op="attention", name="numpy_twin")

#!/usr/bin/python3
"""Hostile inputs, one per class of docs/inputs.md, written into DIR: files
that parse as what they claim to be and then declare too much, nest too
deep, point elsewhere or were never written. tests/cli/test_inputs.sh runs
conform on each and expects a refusal (exit 2) naming the file and field,
within a timeout.

    hostile_inputs.py DIR CONFIG_JSON
CONFIG_JSON: a sound config.json (fixtures/configs/llama3.1-8b.json) to damage.
"""
import json
import os
import struct
import sys

import h5py
import numpy as np

out, base_config = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
base = json.load(open(base_config))
DEEP = 200_000  # brackets: 400 KB of text, a stack overflow for any recursive printer


def write(name, text):
    with open(os.path.join(out, name), "w") as f:
        f.write(text)


def config(name, **edits):
    c = dict(base)
    c.update(edits)
    write(name, json.dumps(c))


def deep_value():
    return "[" * DEEP + "]" * DEEP


# ---- class 1: recursion on attacker-chosen depth ----------------------------------
# A nested value where a field is expected, so that the message would print it.
write("config-deep.json", json.dumps(base)[:-1] + ', "rope_scaling": {"rope_type": "llama3", "factor": ' + deep_value() + "}}")
os.makedirs(os.path.join(out, "index-deep"), exist_ok=True)
write("index-deep/config.json", json.dumps(base))
write("index-deep/model.safetensors.index.json", '{"metadata": ' + deep_value() + ', "weight_map": {}}')
header = ('{"__metadata__": {"x": ' + deep_value() + '}}').encode()
with open(os.path.join(out, "metadata-deep.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(header)) + header)
write("report-deep.json", '{"schema": "conform-report/1", "cases": [], "x": ' + deep_value() + "}")

# ---- class 4: declared sizes trusted before they are checked -----------------------
config("config-layers.json", num_hidden_layers=2**62)
config("config-wrap.json", hidden_size=2**32, num_attention_heads=2**31, head_dim=2)
config("config-heads.json", num_attention_heads=2**20, num_key_value_heads=2**20)


def gguf(name, kvs):
    """A GGUF v3 header with metadata only: (key, type, value) triples."""
    b = bytearray(b"GGUF") + struct.pack("<IQQ", 3, 0, len(kvs))
    for key, typ, value in kvs:
        k = key.encode()
        b += struct.pack("<Q", len(k)) + k + struct.pack("<I", typ)
        if typ == 8:  # string
            v = value.encode()
            b += struct.pack("<Q", len(v)) + v
        elif typ == 4:  # uint32
            b += struct.pack("<I", value)
        elif typ == 10:  # uint64
            b += struct.pack("<Q", value)
        elif typ == 6:  # float32
            b += struct.pack("<f", value)
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes(b))


gguf("gguf-layers.gguf", [("general.architecture", 8, "llama"), ("llama.embedding_length", 4, 64),
                          ("llama.block_count", 10, 2**62), ("llama.attention.head_count", 4, 4)])

# ---- class 5: loose parsing / class 7: messages ------------------------------------
config("config-bigstr.json", model_type="x" * 20_000_000)

# ---- class 3: HDF5 data that is not in the file -------------------------------------
T, V = 4, 32000
with h5py.File(os.path.join(out, "logits-unwritten.h5"), "w") as f:
    f["token_ids"] = np.arange(T, dtype=np.int64)
    f.create_dataset("logits", shape=(T, V), dtype="f4")  # declared, never written
with open(os.path.join(out, "logits-external.bin"), "wb") as f:
    f.write(np.zeros((T, V), np.float32).tobytes())
with h5py.File(os.path.join(out, "logits-external.h5"), "w") as f:
    f["token_ids"] = np.arange(T, dtype=np.int64)
    f.create_dataset("logits", shape=(T, V), dtype="f4", external=[("logits-external.bin", 0, T * V * 4)])

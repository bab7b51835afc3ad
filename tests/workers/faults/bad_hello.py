#!/usr/bin/python3
"""A worker whose hello is wrong, then waits for the end of stdin.

    bad_hello.py [MODE]   name (default): a name with a space and a '/'
                          protocol: protocol 99
                          type: answers the hello with a result
                          ops: lists an op that does not exist
                          garbage: text instead of a frame
                          string: a frame whose header is a bare JSON string
                                  holding a C1 CSI and a bidi override
                          invariant: declares batch invariance for an op it does not list
                          index: asks for its index arrays as f32
                          kvcache: declares an int8 KV cache
                          kvcache_op: declares an FP8 cache without paged_attention
                          actquant: declares Q8_0 activations for rmsnorm (no weight product)
                          actquant_value: declares q4_0 activations for swiglu
"""
import sys
from common import conform_worker, frame_bytes, write_raw

MODE = sys.argv[1] if len(sys.argv) > 1 else "name"
hello = {"type": "hello", "protocol": 1, "name": "bad_hello", "ops": ["rmsnorm"], "dtypes": ["f32"], "supports": False}
if MODE == "name":
    hello["name"] = "bad hello/1"
elif MODE == "protocol":
    hello["protocol"] = 99
elif MODE == "type":
    hello = {"type": "result", "id": 0, "outputs": []}
elif MODE == "ops":
    hello["ops"] = ["rmsnorm", "flash_attention"]
elif MODE == "invariant":
    hello["batch_invariant"] = ["paged_attention"]
elif MODE == "index":
    hello["index_dtype"] = "f32"
elif MODE == "kvcache":
    hello["ops"] = ["paged_attention"]
    hello["kv_cache_dtypes"] = ["fp8_e4m3", "int8"]
elif MODE == "kvcache_op":
    hello["kv_cache_dtypes"] = ["fp8_e4m3"]
elif MODE == "kvcache_num":
    hello["kv_cache_dtypes"] = 5
elif MODE == "kvcache_obj":
    hello["kv_cache_dtypes"] = {"rope": ["fp8_e4m3"]}
elif MODE == "kvcache_obj_decode":
    hello["ops"] = ["rmsnorm", "decode"]
    hello["kv_cache_dtypes"] = {"decode": ["fp8_e5m2", "fp4"]}
elif MODE == "actquant":
    hello["activation_quant"] = {"rmsnorm": "q8_0"}
elif MODE == "actquant_value":
    hello["ops"] = ["swiglu"]
    hello["activation_quant"] = {"swiglu": "q4_0"}
elif MODE == "string":
    hello = "\u009b2J\u202eolleh FORGED"
elif MODE != "garbage":
    sys.exit("bad_hello.py: unknown mode %r" % MODE)

in_fd, _ = conform_worker._take_stdio()
conform_worker._Reader(in_fd).frame()  # conform's hello: conform speaks first
write_raw(b"Welcome!\n" if MODE == "garbage" else frame_bytes(hello))
while conform_worker.os.read(in_fd, 1 << 16):
    pass

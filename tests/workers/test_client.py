#!/usr/bin/python3
"""The worker protocol from the judge's side, against the Python client.

    /usr/bin/python3 tests/workers/test_client.py [-v]

Spawns the example and fault workers as conform would and speaks
impls/WORKERS.md to them with a framing helper of its own (not the client's
code), so a client that drifted from the spec fails here.
"""

import json
import math
import os
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "impls" / "worker_example"
FAULTS = ROOT / "tests" / "workers" / "faults"
sys.path.insert(0, str(EXAMPLES))
import numpy_worker as nw  # noqa: E402  (the in-process truth a worker's answers must equal)

PY = sys.executable
ALL_OPS = ["rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode", "paged_attention", "moe", "moe_route",
           "moe_experts", "mla_attention"]


# ---- the judge's side of the framing, written from WORKERS.md ----------------

def frame(header, payload=b""):
    h = json.dumps(header).encode("utf-8")
    return b"CFWK" + struct.pack("<I", len(h)) + struct.pack("<Q", len(payload)) + h + payload


def bf16_bits(v):
    """float -> bfloat16 bits, one value at a time: round to nearest even, NaN kept."""
    b = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return (b >> 16) | 0x40
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def tensor_bytes(arr, dtype):
    if dtype == "f32":
        return np.asarray(arr, "<f4").tobytes()
    if dtype == "i64":
        return np.asarray(arr, "<i8").tobytes()
    if dtype == "f16":
        return np.asarray(arr, "<f2").tobytes()
    return struct.pack("<%dH" % np.size(arr), *[bf16_bits(v) for v in np.ravel(arr)])


def tensor_from(buf, dtype, shape):
    if dtype == "f32":
        return np.frombuffer(buf, "<f4").reshape(shape)
    if dtype == "f16":
        return np.frombuffer(buf, "<f2").astype(np.float32).reshape(shape)
    bits = struct.unpack("<%dH" % (len(buf) // 2), buf)
    return np.array([bf16_value(b) for b in bits], np.float32).reshape(shape)


SIZE = {"f32": 4, "bf16": 2, "f16": 2, "i64": 8}


class Judge:
    """One worker process and the judge's end of its pipes."""

    def __init__(self, argv, env=None, timeout=20.0):
        self.stderr_file = tempfile.TemporaryFile()
        e = dict(os.environ)
        e.update(env or {})
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file,
                                  env=e, start_new_session=True)
        self.timeout = timeout
        self.next_id = 1

    def close(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.stderr_file.close()

    def stderr(self):
        self.stderr_file.seek(0)
        return self.stderr_file.read().decode("utf-8", "replace")

    def send(self, data):
        self.p.stdin.write(data)
        self.p.stdin.flush()

    def read(self, n, timeout=None):
        """n bytes of the worker's stdout; fewer at EOF; raises on timeout."""
        out = b""
        fd = self.p.stdout.fileno()
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError("worker answered %d of %d bytes in time" % (len(out), n))
            chunk = os.read(fd, n - len(out))
            if not chunk:
                break
            out += chunk
        return out

    def recv(self, timeout=None):
        prefix = self.read(16, timeout)
        if len(prefix) < 16:
            return None
        assert prefix[:4] == b"CFWK", "bad magic from the worker: %r" % prefix
        hlen, plen = struct.unpack("<I", prefix[4:8])[0], struct.unpack("<Q", prefix[8:16])[0]
        header = json.loads(self.read(hlen).decode("utf-8"))
        payload = self.read(plen)
        assert len(payload) == plen
        return header, payload

    def hello(self):
        self.send(frame({"type": "hello", "protocol": 1}))
        h, payload = self.recv()
        assert h["type"] == "hello" and payload == b"", h
        return h

    def call(self, op, config, inputs, outputs, dtype="f32", **extra):
        """inputs: [(name, array, dtype)]; outputs: [(name, shape)]. Returns (header, {name: array})."""
        rid = self.next_id
        self.next_id += 1
        header = {"type": "call", "id": rid, "op": op, "dtype": dtype, "config": config,
                  "inputs": [{"name": n, "dtype": d, "shape": list(np.shape(a))} for n, a, d in inputs],
                  "outputs": [{"name": n, "dtype": dtype, "shape": list(s)} for n, s in outputs]}
        header.update(extra)
        self.send(frame(header, b"".join(tensor_bytes(a, d) for _, a, d in inputs)))
        got = self.recv()
        assert got is not None, "worker closed its stdout; stderr:\n" + self.stderr()
        h, payload = got
        assert h["id"] == rid, h
        arrays, at = {}, 0
        if h["type"] == "result":
            for t in h["outputs"]:
                n = SIZE[t["dtype"]] * int(np.prod(t["shape"]))
                arrays[t["name"]] = tensor_from(payload[at:at + n], t["dtype"], t["shape"])
                at += n
            assert at == len(payload), "payload %d bytes, outputs listed %d" % (len(payload), at)
        return h, arrays

    def wait(self, timeout=10):
        return self.p.wait(timeout)


# ---- cases -------------------------------------------------------------------

def config(**over):
    c = {"d_model": 24, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "ffn_dim": 40, "rope_layout": "neox",
         "rope_theta": 10000.0, "rotary_dim": 8, "qk_norm": True, "norm_eps": 1e-5,
         "rope_scaling": {"type": "none", "factor": 1.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position": 0, "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.0}}
    c.update(over)
    return c


def block_inputs(c, T, rng):
    D, Q, KVW, F, hd = c["d_model"], c["n_heads"] * c["head_dim"], c["n_kv_heads"] * c["head_dim"], c["ffn_dim"], c["head_dim"]
    r = lambda *s: rng.standard_normal(s).astype(np.float32) * np.float32(0.3)  # noqa: E731
    ins = [("x", r(T, D), "f32"), ("positions", np.arange(T, dtype=np.int64) * 3 + 1, "i64"),
           ("attn_norm", 1 + r(D), "f32"), ("wq", r(D, Q), "f32"), ("wk", r(D, KVW), "f32"), ("wv", r(D, KVW), "f32"),
           ("wo", r(Q, D), "f32"), ("ffn_norm", 1 + r(D), "f32"), ("w1", r(D, F), "f32"), ("w3", r(D, F), "f32"),
           ("w2", r(F, D), "f32")]
    if c["qk_norm"]:
        ins += [("q_norm", 1 + r(hd), "f32"), ("k_norm", 1 + r(hd), "f32")]
    return ins


def direct(fn, inputs, **kw):
    return fn(**{n: a for n, a, _ in inputs}, **kw)


class WorkerTest(unittest.TestCase):
    def spawn(self, script, *args, env=None):
        j = Judge([PY, str(script), *args], env=env)
        self.addCleanup(j.close)
        return j

    def numpy_worker(self, *args):
        return self.spawn(EXAMPLES / "numpy_worker.py", *args)


class Conversation(WorkerTest):
    def setUp(self):
        self.rng = np.random.default_rng(7)

    def test_hello_announces_the_worker(self):
        h = self.numpy_worker().hello()
        self.assertEqual(h["protocol"], 1)
        self.assertEqual(h["name"], "numpy")
        self.assertRegex(h["name"], r"^[A-Za-z0-9_.-]+$")
        self.assertEqual(h["ops"], ALL_OPS)
        self.assertEqual(h["dtypes"], ["f32"])
        self.assertIs(h["supports"], True)

    def test_supports_answers_and_declines_with_a_reason(self):
        j = self.numpy_worker()
        j.hello()
        for rid, op, dtype, cfg, ok, why in [
            (1, "rope", "f32", config(), True, None),
            (2, "rope", "f32", config(rope_layout="spiral"), False, "rope_layout"),
            (3, "block", "f32", config(rope_scaling={"type": "longrope"}), False, "longrope"),
            (4, "rmsnorm", "bf16", config(), False, "bf16"),
        ]:
            j.send(frame({"type": "supports", "id": rid, "op": op, "dtype": dtype, "config": cfg}))
            h, _ = j.recv()
            self.assertEqual((h["type"], h["id"], h["ok"]), ("supports", rid, ok), h)
            if why:
                self.assertIn(why, h["reason"])

    def test_rope_call_returns_the_kernels_bytes(self):
        j = self.numpy_worker()
        j.hello()
        c = config(rope_layout="interleaved", rope_theta=500000.0)
        x = self.rng.standard_normal((5, 16)).astype(np.float32)
        pos = np.array([0, 3, 7, 100, 5000], np.int64)
        ins = [("x", x, "f32"), ("positions", pos, "i64")]
        h, out = j.call("rope", c, ins, [("out", (5, 16))])
        self.assertEqual(h["type"], "result", h)
        self.assertEqual(h["outputs"], [{"name": "out", "dtype": "f32", "shape": [5, 16]}])
        self.assertGreaterEqual(h["seconds"], 0.0)
        np.testing.assert_array_equal(out["out"], direct(nw.rope, ins, config=c))
        np.testing.assert_array_equal(out["out"][0], x[0])  # position 0: the identity
        pairs = lambda a: np.hypot(a[:, 0::2], a[:, 1::2])  # noqa: E731  interleaved pairs keep their length
        np.testing.assert_allclose(pairs(out["out"]), pairs(x), rtol=1e-5)

    def test_block_call_returns_exactly_the_taps_asked_for(self):
        j = self.numpy_worker()
        j.hello()
        c = config()
        T = 6
        ins = block_inputs(c, T, self.rng)
        asked = [("q_rot", (T, 32)), ("attn_in", (T, 24)), ("k", (T, 16)), ("out", (T, 24))]
        h, out = j.call("block", c, ins, asked)
        self.assertEqual([(t["name"], t["dtype"], tuple(t["shape"])) for t in h["outputs"]],
                         [(n, "f32", s) for n, s in asked])
        truth = direct(nw.block, ins, config=c)
        for n, _ in asked:
            np.testing.assert_array_equal(out[n], truth[n], err_msg=n)

    def test_decode_through_the_protocol_equals_block(self):
        j = self.numpy_worker()
        j.hello()
        c = config(n_kv_heads=1, qk_norm=False)
        T = 5
        ins = block_inputs(c, T, self.rng)
        _, blk = j.call("block", c, ins, [("out", (T, 24))])
        h, dec = j.call("decode", c, ins, [("out", (T, 24))], prefill=2)
        self.assertEqual(h["type"], "result", h)
        np.testing.assert_allclose(dec["out"], blk["out"], rtol=1e-5, atol=1e-5)

    def test_bad_input_is_an_error_and_the_worker_serves_on(self):
        j = self.numpy_worker()
        j.hello()
        c = config(head_dim=4, rotary_dim=4)
        bad = [("x", np.ones((3, 10), np.float32), "f32"), ("positions", np.arange(3), "i64")]
        h, _ = j.call("rope", c, bad, [("out", (3, 10))])
        self.assertEqual((h["type"], h["kind"]), ("error", "invalid_argument"), h)
        self.assertIn("head_dim", h["message"])
        good = [("x", np.ones((3, 8), np.float32), "f32"), ("positions", np.arange(3), "i64")]
        h, out = j.call("rope", c, good, [("out", (3, 8))])
        self.assertEqual(h["type"], "result", h)
        self.assertEqual(out["out"].shape, (3, 8))

    def test_a_kernel_exception_carries_its_traceback(self):
        j = self.numpy_worker()
        j.hello()
        c = config()
        # attention without v: the kernel's call fails inside the worker
        ins = [("q", np.ones((2, 32), np.float32), "f32"), ("k", np.ones((2, 16), np.float32), "f32"),
               ("q_positions", np.arange(2), "i64"), ("k_positions", np.arange(2), "i64")]
        h, _ = j.call("attention", c, ins, [("out", (2, 32))])
        self.assertEqual((h["type"], h["kind"]), ("error", "internal"), h)
        self.assertIn("TypeError", h["message"])
        self.assertIn("Traceback", h["traceback"])

    def test_declined_calls_are_unsupported(self):
        j = self.spawn(EXAMPLES / "torch_worker.py") if torch_available() else None
        k = self.numpy_worker()
        k.hello()
        h, _ = k.call("rmsnorm", config(), [("x", np.ones((1, 4), np.float32), "bf16"),
                                            ("weight", np.ones(4, np.float32), "bf16")], [("out", (1, 4))], dtype="bf16")
        self.assertEqual((h["type"], h["kind"]), ("error", "unsupported"), h)
        self.assertIn("bf16", h["message"])
        if j:
            j.hello()
            h, _ = j.call("swiglu", config(), [("x", np.ones((1, 4), np.float32), "f32")], [("out", (1, 4))])
            self.assertEqual((h["type"], h["kind"]), ("error", "unsupported"), h)
            self.assertIn("swiglu", h["message"])

    def test_a_payload_that_disagrees_with_its_inputs_is_refused(self):
        j = self.numpy_worker()
        j.hello()
        header = {"type": "call", "id": 9, "op": "rmsnorm", "dtype": "f32", "config": config(),
                  "inputs": [{"name": "x", "dtype": "f32", "shape": [2, 4]}, {"name": "weight", "dtype": "f32", "shape": [4]}],
                  "outputs": [{"name": "out", "dtype": "f32", "shape": [2, 4]}]}
        j.send(frame(header, b"\0" * 20))  # 48 bytes listed
        h, _ = j.recv()
        self.assertEqual((h["type"], h["id"], h["kind"]), ("error", 9, "invalid_argument"), h)
        self.assertIn("48", h["message"])
        j.send(frame({"type": "reticulate", "id": 10}))
        h, _ = j.recv()
        self.assertEqual((h["type"], h["id"], h["kind"]), ("error", 10, "invalid_argument"), h)

    def test_bf16_and_f16_framing(self):
        j = self.numpy_worker("--dtypes", "f32,bf16,f16")
        self.assertEqual(j.hello()["dtypes"], ["f32", "bf16", "f16"])
        c = config()
        x = self.rng.standard_normal((3, 24)).astype(np.float32) * 5
        w = 1 + self.rng.standard_normal(24).astype(np.float32)
        for dtype in ("bf16", "f16"):
            wide = lambda a: tensor_from(tensor_bytes(a, dtype), dtype, np.shape(a))  # noqa: E731  a rounded to dtype
            ins = [("x", x, dtype), ("weight", w, dtype)]
            h, out = j.call("rmsnorm", c, ins, [("out", (3, 24))], dtype=dtype)
            self.assertEqual(h["outputs"], [{"name": "out", "dtype": dtype, "shape": [3, 24]}], h)
            truth = nw.rmsnorm(wide(x), wide(w), config=c)  # float32 arithmetic on the exact inputs
            np.testing.assert_array_equal(out["out"], wide(truth), err_msg=dtype)

    def test_a_tensor_at_an_unaligned_offset(self):
        j = self.numpy_worker("--dtypes", "bf16")
        j.hello()
        c = config(head_dim=2, rotary_dim=2)
        x = np.array([[1.0, 0.5], [0.25, -2.0], [3.0, 1.0]], np.float32)  # 12 bytes of bf16: positions start unaligned
        ins = [("x", x, "bf16"), ("positions", np.array([1, 2, 4000]), "i64")]
        h, out = j.call("rope", c, ins, [("out", (3, 2))], dtype="bf16")
        self.assertEqual(h["type"], "result", h)
        truth = direct(nw.rope, [("x", x, 0), ("positions", np.array([1, 2, 4000]), 0)], config=c)
        np.testing.assert_array_equal(out["out"], tensor_from(tensor_bytes(truth, "bf16"), "bf16", (3, 2)))

    def test_bye_ends_the_worker_with_0(self):
        j = self.numpy_worker()
        j.hello()
        j.send(frame({"type": "bye"}))
        self.assertEqual(j.wait(), 0)
        self.assertEqual(j.read(1), b"")

    def test_end_of_stdin_ends_the_worker_with_0(self):
        j = self.numpy_worker()
        j.hello()
        j.p.stdin.close()
        self.assertEqual(j.wait(), 0)
        self.assertEqual(j.stderr(), "")


class Conversions(unittest.TestCase):
    """The client's 16-bit conversions against this file's one-value-at-a-time ones, on the hard values."""

    def test_bf16_round_trip(self):
        sys.path.insert(0, str(ROOT / "python"))
        import conform_worker as cw
        bits = [0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3F807FFF, 0xBF808000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                0x7FC00001, 0xFFFFFFFF, 0x7F800001, 0x00000001, 0x80000000, 0x00008000, 0x00018000, 0x7F7F8000]
        x = np.array(bits, np.uint32).view(np.float32)
        got = cw.f32_to_bf16_bits(x)
        want = [bf16_bits(v) for v in x]
        self.assertEqual([hex(int(g)) for g in got], [hex(w) for w in want])
        self.assertTrue(np.isnan(cw.bf16_to_f32(got[8:11])).all())
        every = np.arange(1 << 16, dtype=np.uint16)  # widening is exact: every bf16 value survives the trip
        self.assertTrue(np.array_equal(cw.f32_to_bf16_bits(cw.bf16_to_f32(every))[~np.isnan(cw.bf16_to_f32(every))],
                                       every[~np.isnan(cw.bf16_to_f32(every))]))


class BadFramesToTheWorker(WorkerTest):
    def expect_refusal(self, data, words, hello=True):
        j = self.numpy_worker()
        if hello:
            j.hello()
        j.send(data)
        j.p.stdin.close()
        self.assertEqual(j.wait(), 2, j.stderr())
        self.assertEqual(j.read(1), b"")
        for w in words:
            self.assertIn(w, j.stderr())

    def test_bad_magic(self):
        self.expect_refusal(b"XXXX" + b"\0" * 12, ["protocol error", "bad magic"])

    def test_bad_magic_before_the_hello(self):
        self.expect_refusal(b"GET / HTTP/1.1\r\n\r\n", ["bad magic"], hello=False)

    def test_header_not_json(self):
        self.expect_refusal(b"CFWK" + struct.pack("<IQ", 5, 0) + b"{oops", ["not JSON"])

    def test_header_over_16_mib(self):
        self.expect_refusal(b"CFWK" + struct.pack("<IQ", (16 << 20) + 1, 0), ["header length"])

    def test_truncated_frame(self):
        self.expect_refusal(frame({"type": "bye"})[:-3], ["stream ended"])

    def test_a_call_before_the_hello(self):
        self.expect_refusal(frame({"type": "call", "id": 1, "op": "rmsnorm"}), ["hello"], hello=False)


class StdoutIsTheProtocol(WorkerTest):
    def check_chatty(self, env):
        j = self.spawn(FAULTS / "prints_to_stdout.py", env=env)
        j.hello()
        c = config()
        ins = [("x", np.ones((2, 24), np.float32), "f32"), ("weight", np.full(24, 2, np.float32), "f32")]
        h, out = j.call("rmsnorm", c, ins, [("out", (2, 24))])
        self.assertEqual(h["type"], "result", h)
        np.testing.assert_allclose(out["out"], 2.0, rtol=1e-5)
        j.send(frame({"type": "bye"}))
        self.assertEqual(j.wait(), 0)
        err = j.stderr()
        for line in ("print: computing", "sys.stdout: computing", "fd 1: computing", "printf: computing"):
            self.assertIn(line, err)
        return err

    def test_a_kernel_that_prints_still_conforms(self):
        self.check_chatty({})

    def test_with_CONFORM_WORKER_set_the_move_is_at_import(self):
        self.assertIn("import time: loading kernels", self.check_chatty({"CONFORM_WORKER": "1"}))


class FaultWorkers(WorkerTest):
    """The fault workers are test fixtures for conform's judge: each must commit exactly its fault."""

    def rmsnorm(self, j, same=False):
        """One rmsnorm call; each call's x differs unless same (a fault worker
        treats a repeated call as it treated the first)."""
        rid = j.next_id
        x = np.full((2, 8), 1.0 if same else float(rid), np.float32)
        ins = [("x", x, "f32"), ("weight", np.ones(8, np.float32), "f32")]
        j.next_id += 1
        j.send(frame({"type": "call", "id": rid, "op": "rmsnorm", "dtype": "f32", "config": config(),
                      "inputs": [{"name": n, "dtype": d, "shape": list(np.shape(a))} for n, a, d in ins],
                      "outputs": [{"name": "out", "dtype": "f32", "shape": [2, 8]}]},
                     b"".join(tensor_bytes(a, d) for n, a, d in ins)))
        return rid

    def test_early_exit(self):
        j = self.spawn(FAULTS / "early_exit.py")
        self.assertEqual(j.wait(), 1)
        self.assertEqual(j.read(1), b"")
        self.assertIn("before the hello", j.stderr())

    def test_crash_after_one_good_call(self):
        j = self.spawn(FAULTS / "crash.py", env={"CONFORM_FAULT_AFTER": "1"})
        j.hello()
        self.rmsnorm(j, same=True)
        self.assertEqual(j.recv()[0]["type"], "result")
        self.rmsnorm(j, same=True)  # a repeat of the good call: answered again, the worker is deterministic
        self.assertEqual(j.recv()[0]["type"], "result")
        self.rmsnorm(j)
        self.assertIsNone(j.recv())
        self.assertEqual(j.wait(), -signal.SIGABRT)

    def test_exit_mid_run(self):
        j = self.spawn(FAULTS / "exit_mid_run.py")
        j.hello()
        for _ in range(3):
            self.rmsnorm(j)
            self.assertEqual(j.recv()[0]["type"], "result")
        self.rmsnorm(j)
        self.assertIsNone(j.recv())
        self.assertEqual(j.wait(), 1)

    def test_hang_needs_the_process_group_killed(self):
        j = self.spawn(FAULTS / "hang.py")
        j.hello()
        self.rmsnorm(j)
        with self.assertRaises(TimeoutError):
            j.recv(timeout=1.5)
        m = re.search(r"child pid (\d+)", j.stderr())
        self.assertTrue(m, j.stderr())
        child = int(m.group(1))
        os.kill(j.p.pid, signal.SIGTERM)  # ignored
        time.sleep(0.3)
        self.assertIsNone(j.p.poll())
        os.killpg(j.p.pid, signal.SIGKILL)
        j.wait()
        for _ in range(50):  # the child is reaped by init once the group is dead
            try:
                with open("/proc/%d/stat" % child) as f:
                    if f.read().split()[2] == "Z":
                        break
            except FileNotFoundError:
                break
            time.sleep(0.1)
        else:
            self.fail("hang.py's child %d outlived its group" % child)

    def test_nan(self):
        j = self.spawn(FAULTS / "nan.py")
        j.hello()
        h, out = j.call("rmsnorm", config(), [("x", np.ones((2, 8), np.float32), "f32"),
                                              ("weight", np.ones(8, np.float32), "f32")], [("out", (2, 8))])
        self.assertTrue(math.isnan(out["out"][0, 0]))
        self.assertEqual(int(np.isnan(out["out"]).sum()), 1)

    def test_wrong_shape_is_sent_as_returned(self):
        j = self.spawn(FAULTS / "wrong_shape.py")
        j.hello()
        h, out = j.call("rmsnorm", config(), [("x", np.ones((2, 8), np.float32), "f32"),
                                              ("weight", np.ones(8, np.float32), "f32")], [("out", (2, 8))])
        self.assertEqual(h["outputs"], [{"name": "out", "dtype": "f32", "shape": [2, 7]}])

    def test_garbage_modes(self):
        for mode, check in [
            ("magic", lambda b: b[:4] != b"CFWK"),
            ("json", lambda b: b[:4] == b"CFWK" and b[16:17] == b"{" and struct.unpack("<I", b[4:8])[0] == 9),
            ("object", lambda b: b[16:17] == b"["),
            ("length", lambda b: struct.unpack("<Q", b[8:16])[0] == 2 * 8 * 4 - 4),
            ("huge", lambda b: struct.unpack("<I", b[4:8])[0] > 16 << 20),
        ]:
            j = self.spawn(FAULTS / "garbage.py", mode)
            j.hello()
            self.rmsnorm(j)
            b = j.read(16 if mode == "huge" else 17, timeout=10)
            self.assertTrue(check(b), (mode, b))
            self.assertIsNone(j.p.poll(), mode)  # it waits to be killed
        j = self.spawn(FAULTS / "garbage.py", "truncated")
        j.hello()
        self.rmsnorm(j)
        self.assertEqual(j.wait(), 0)
        b = j.read(1 << 16)
        hlen, plen = struct.unpack("<IQ", b[4:16])
        self.assertLess(len(b), 16 + hlen + plen)

    def test_wrong_answers(self):
        for mode in ("id", "name", "dtype", "type"):
            j = self.spawn(FAULTS / "wrong_answer.py", mode)
            j.hello()
            rid = self.rmsnorm(j)
            h, _ = j.recv()
            if mode == "id":
                self.assertNotEqual(h["id"], rid)
            elif mode == "name":
                self.assertEqual(h["outputs"][0]["name"], "outt")
            elif mode == "dtype":
                self.assertEqual(h["outputs"][0]["dtype"], "f16")
            else:
                self.assertEqual(h["type"], "supports")

    def test_bad_hellos(self):
        for mode, check in [("name", lambda h: not re.match(r"^[A-Za-z0-9_.-]+$", h["name"])),
                            ("protocol", lambda h: h["protocol"] == 99),
                            ("type", lambda h: h["type"] == "result"),
                            ("ops", lambda h: "flash_attention" in h["ops"])]:
            j = self.spawn(FAULTS / "bad_hello.py", mode)
            j.send(frame({"type": "hello", "protocol": 1}))
            h, _ = j.recv()
            self.assertTrue(check(h), (mode, h))
        j = self.spawn(FAULTS / "bad_hello.py", "garbage")
        j.send(frame({"type": "hello", "protocol": 1}))
        self.assertEqual(j.read(4), b"Welc")

    def test_slow_hello(self):
        j = self.spawn(FAULTS / "slow_hello.py", "1.5")
        t = time.monotonic()
        self.assertEqual(j.hello()["name"], "fault_slow_hello")
        self.assertGreater(time.monotonic() - t, 1.0)


def torch_available():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipUnless(torch_available(), "torch not importable (Debian: apt-get install python3-torch)")
class TorchWorker(WorkerTest):
    def test_torch_worker_agrees_with_numpy_and_declares_no_scaled_rope(self):
        j = self.spawn(EXAMPLES / "torch_worker.py")
        h = j.hello()
        self.assertEqual((h["name"], h["ops"], h["supports"]), ("torch_cpu", ["rmsnorm", "rope", "attention"], False))
        # Scaled RoPE is not among the twists it declares: conform never offers it such a case.
        self.assertIn("rotary_dim", h["twists"])
        self.assertNotIn("rope_scaling", h["twists"])
        rng = np.random.default_rng(3)
        for layout, rd in (("neox", 8), ("interleaved", 8), ("neox", 4)):
            c = config(rope_layout=layout, rotary_dim=rd)
            ins = [("x", rng.standard_normal((4, 32)).astype(np.float32), "f32"),
                   ("positions", np.array([0, 1, 9, 4000]), "i64")]
            _, out = j.call("rope", c, ins, [("out", (4, 32))])
            np.testing.assert_allclose(out["out"], direct(nw.rope, ins, config=c), rtol=1e-5, atol=1e-5, err_msg=layout)
        c = config()
        ins = [("q", rng.standard_normal((3, 32)).astype(np.float32), "f32"),
               ("k", rng.standard_normal((4, 16)).astype(np.float32), "f32"),
               ("v", rng.standard_normal((4, 16)).astype(np.float32), "f32"),
               ("q_positions", np.array([0, 5, 9]), "i64"), ("k_positions", np.array([1, 2, 3, 4]), "i64")]
        _, out = j.call("attention", c, ins, [("out", (3, 32))])
        np.testing.assert_allclose(out["out"], direct(nw.attention, ins, config=c), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(out["out"][0], 0.0)  # query at 0 sees no key: zeros


if __name__ == "__main__":
    unittest.main()

"""conform_worker — the Python side of conform's worker protocol, version 1.

A worker is a program conform starts once (`conform --impl-cmd CMD`) and talks
to over its stdin and stdout in frames (impls/WORKERS.md is the contract):

    import numpy as np
    from conform_worker import Worker

    w = Worker("mykernels", dtypes=["f32"])

    @w.op("rmsnorm")
    def rmsnorm(x, weight, *, config):
        r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(config["norm_eps"]))
        return x * r * (1 + weight if config["norm_plus_one"] else weight)  # Gemma: (1 + w)

    w.run()

Inputs arrive by schema name as float32 numpy arrays (positions int64; torch
tensors with Worker(..., torch=True)); a kernel returns one array ("out") or a
dict of them (the block's taps). This module rounds outputs to the call's dtype
and sends them as returned: conform, not the worker, judges names and shapes.

One file, the standard library and numpy only (torch only if asked for), so it
can be copied next to a worker or imported by path.
"""

import io
import json
import os
import re
import struct
import sys
import time
import traceback

import numpy as np

__all__ = ["Worker", "Unsupported", "InvalidArgument", "PROTOCOL", "OPS", "OUTPUTS",
           "bf16_to_f32", "f32_to_bf16_bits"]

PROTOCOL = 1
MAGIC = b"CFWK"
PREFIX = struct.Struct("<4sIQ")  # magic, header length, payload length
MAX_HEADER = 16 << 20
MAX_PAYLOAD = 64 << 30

# The ops, in conform's order (conform/ops.h), and what each may return.
OPS = ("rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode", "paged_attention", "moe", "moe_route",
       "moe_experts", "mla_attention")
TAPS = ("attn_in", "q", "k", "v", "q_rot", "k_rot", "attn", "h", "ffn_in", "ffn_out", "out")
OUTPUTS = dict({op: ("out",) for op in OPS}, block=TAPS, paged_attention=("out", "lse"), moe=("route", "out"),
               mla_attention=("out", "lse"))

DTYPES = ("f32", "bf16", "f16")
ITEMSIZE = {"f32": 4, "bf16": 2, "f16": 2, "i64": 8, "i32": 4}
INDEX_DTYPES = ("i64", "i32")
KV_CACHE_DTYPES = ("fp8_e4m3", "fp8_e5m2")  # the FP8 caches (kv_cache_dtypes)
CACHE_OPS = ("paged_attention", "decode")  # the ops with a KV cache an FP8 one may replace
ACT_QUANTS = ("none", "q8_0", "q8_k")  # what a kernel does to its weight products' activations (activation_quant)
WEIGHT_OPS = ("swiglu", "block", "decode")  # the ops with weight products
NAME_RE = re.compile(r"[A-Za-z0-9_.-]+\Z")


class Unsupported(Exception):
    """Raised by a kernel (or a supports function) to decline a case: conform
    reports it as not run, never as passed."""


class InvalidArgument(Exception):
    """Raised by a kernel for inputs it considers malformed (kind
    "invalid_argument"); any other exception is kind "internal"."""


class ProtocolError(Exception):
    """What conform sent is not a frame of this protocol: the stream cannot be
    trusted any more, so the worker says why on stderr and exits 2."""


# ---- 16-bit floats ------------------------------------------------------------
# The same rounding as conform/dtype.h, so "bf16" means one thing on both sides.

def act_quant_round_trip(x, fmt):
    """x [rows, K] (float32) as a llama.cpp CPU kernel feeds a weight product:
    each row quantised per block along K to ggml's Q8_0 (blocks of 32, scale
    amax / 127 stored as f16, q = round half away from zero of x * (1 / d))
    or Q8_K (blocks of 256, iscale = -127 / the first element of largest
    magnitude, q = min(127, round half to even of iscale * x), scale
    1 / iscale) and dequantised, in float32; a row that is not whole blocks
    ends in a shorter block, and a block whose stored scale is 0 is zeros.
    conform/dtype.h act_quant_row is the same."""
    import numpy as np
    x = np.ascontiguousarray(x, dtype=np.float32)
    if fmt == "none":
        return x.copy()
    B = {"q8_0": 32, "q8_k": 256}[fmt]
    y = np.empty_like(x)
    for b0 in range(0, x.shape[-1], B):
        xb = x[..., b0:b0 + B]
        if fmt == "q8_0":
            d = (np.abs(xb).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
            with np.errstate(divide="ignore"):
                inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            v = (xb * inv).astype(np.float32)
            t = np.trunc(v)
            q = np.where(np.abs(v - t) == 0.5, t + np.sign(v), np.rint(v))  # roundf: ties away from zero
            d16 = d.astype(np.float16).astype(np.float32)  # a scale that underflows f16 zeroes its block
            y[..., b0:b0 + B] = np.where(d16 == 0, np.float32(0), (q * d16).astype(np.float32))
        else:
            i = np.abs(xb).argmax(axis=-1)[..., None]
            m = np.take_along_axis(xb, i, axis=-1)
            with np.errstate(divide="ignore", invalid="ignore"):
                iscale = (np.float32(-127) / m).astype(np.float32)
                q = np.minimum(np.float32(127), np.rint((iscale * xb).astype(np.float32)))
                d = (np.float32(1) / iscale).astype(np.float32)
                out = (d * q).astype(np.float32)
            y[..., b0:b0 + B] = np.where((m == 0) | (d == 0), np.float32(0), out)
    return y


def bf16_to_f32(bits):
    """bfloat16 bits (uint16) -> float32, exactly: they are float32's top half."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    # uint32 arithmetic wraps only for NaNs with the top bits set, which np.where discards.
    rounded = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (b >> np.uint32(16)) | np.uint32(0x40)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def _decode(buf, dtype, shape):
    """Payload bytes -> numpy array: float dtypes widened to float32, i64 as
    int64, i32 as int32. f32, i64 and i32 are views of the (writable) payload
    where aligned: a large weight set is not copied a second time."""
    if dtype == "bf16":
        return bf16_to_f32(np.frombuffer(buf, dtype="<u2")).reshape(shape)
    if dtype == "f16":
        return np.frombuffer(buf, dtype="<f2").astype(np.float32).reshape(shape)
    wire, native = {"f32": ("<f4", np.float32), "i64": ("<i8", np.int64), "i32": ("<i4", np.int32)}[dtype]
    arr = np.frombuffer(buf, dtype=wire).astype(native, copy=False)
    return (arr if arr.flags.aligned else arr.copy()).reshape(shape)


def _encode(arr, dtype):
    """A real numpy array -> little-endian bytes of `dtype`, rounded to nearest even."""
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == "f32":
            return np.ascontiguousarray(arr, dtype="<f4")
        if dtype == "bf16":
            # through float32, as a float -> bf16 cast of a float32 value does (conform/dtype.h)
            return f32_to_bf16_bits(np.asarray(arr, dtype=np.float32)).astype("<u2")
        if dtype == "f16":
            return np.ascontiguousarray(arr, dtype="<f2")
        return np.ascontiguousarray(arr, dtype="<i4" if dtype == "i32" else "<i8")


# ---- the protocol's file descriptors -----------------------------------------
# stdout is the protocol. A kernel, a library or a C extension that prints
# there would corrupt it, so the protocol gets private copies of fds 0 and 1,
# fd 1 is pointed at stderr and fd 0 at /dev/null (nothing can read conform's
# bytes by accident either). conform sets CONFORM_WORKER in the worker's
# environment: then this happens as soon as this module is imported; otherwise
# when run() starts.

_fds = None  # (in_fd, out_fd) once moved


def _widen_pipe(fd):
    """1 MiB pipe buffers where the system allows (Linux): a large tensor then
    crosses in a sixteenth of the wake-ups the default 64 KiB needs."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass  # not a pipe, not Linux, or over the limit: the default works, only slower


def _take_stdio():
    global _fds
    if _fds is not None:
        return _fds
    try:
        sys.stdout.flush()
    except Exception:
        pass
    in_fd, out_fd = os.dup(0), os.dup(1)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)  # a subprocess of a kernel must not hold the pipes open
        _widen_pipe(fd)
    sys.stdout = sys.stderr  # print() lands in order with the other stderr text
    _fds = (in_fd, out_fd)
    return _fds


if os.environ.get("CONFORM_WORKER"):
    _take_stdio()


class _Reader:
    def __init__(self, fd):
        self._f = io.FileIO(fd, "rb", closefd=False)

    def exactly(self, n, what):
        """n bytes, or None on EOF before the first; EOF inside is an error."""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            k = self._f.readinto(view[got:])
            if not k:
                if got == 0:
                    return None
                raise ProtocolError("%s: stream ended after %d of %d bytes" % (what, got, n))
            got += k
        return buf

    def frame(self):
        """(header dict, payload bytearray), or None at a clean end of the stream."""
        prefix = self.exactly(PREFIX.size, "frame prefix")
        if prefix is None:
            return None
        magic, hlen, plen = PREFIX.unpack(bytes(prefix))
        if magic != MAGIC:
            raise ProtocolError("frame prefix: bad magic %r, expected %r" % (bytes(magic), MAGIC))
        if hlen > MAX_HEADER:
            raise ProtocolError("frame prefix: header length %d is over the limit %d" % (hlen, MAX_HEADER))
        if plen > MAX_PAYLOAD:
            raise ProtocolError("frame prefix: payload length %d is over the limit %d" % (plen, MAX_PAYLOAD))
        raw = self.exactly(hlen, "frame header") if hlen else bytearray()
        if raw is None:
            raise ProtocolError("frame header: stream ended after the prefix")
        payload = self.exactly(plen, "frame payload") if plen else bytearray()
        if payload is None:
            raise ProtocolError("frame payload: stream ended after the header")
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise ProtocolError("frame header: not JSON: %s" % e)
        if not isinstance(header, dict):
            raise ProtocolError("frame header: not a JSON object but %s" % type(header).__name__)
        return header, payload


def _write_all(fd, data):
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def write_frame(fd, header, arrays=()):
    """One whole frame: prefix and header in one write, then each payload
    array's bytes as they lie (no concatenated copy of a large payload)."""
    h = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    blobs = [memoryview(np.ascontiguousarray(a)).cast("B") for a in arrays]
    _write_all(fd, PREFIX.pack(MAGIC, len(h), sum(b.nbytes for b in blobs)) + h)
    for b in blobs:
        _write_all(fd, b)


# ---- the worker --------------------------------------------------------------

def _tensor_specs(header, key, allowed):
    specs = header.get(key, [])
    if not isinstance(specs, list):
        raise InvalidArgument("%s: expected a list of tensors, found %s" % (key, type(specs).__name__))
    out, names = [], set()
    for i, t in enumerate(specs):
        where = "%s[%d]" % (key, i)
        if not isinstance(t, dict):
            raise InvalidArgument("%s: expected an object, found %s" % (where, type(t).__name__))
        name, dtype, shape = t.get("name"), t.get("dtype"), t.get("shape")
        if not isinstance(name, str) or not name:
            raise InvalidArgument("%s: name: expected a string, found %r" % (where, name))
        if name in names:
            raise InvalidArgument("%s: name: %r appears twice" % (where, name))
        names.add(name)
        if dtype not in allowed:
            raise InvalidArgument("%s (%s): dtype: expected one of %s, found %r" % (where, name, ", ".join(allowed), dtype))
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise InvalidArgument("%s (%s): shape: expected a list of non-negative integers, found %r" % (where, name, shape))
        out.append((name, dtype, tuple(shape)))
    return out


def _to_numpy(value, name):
    """A kernel's returned value -> numpy array (torch tensors moved to the CPU)."""
    mod = type(value).__module__ or ""
    if mod.startswith("torch"):
        t = value.detach()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()  # numpy has no bfloat16; widening is exact
        value = t.cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind not in "fiub":
        raise TypeError("output %r: expected a real array, found %s of dtype %s" % (name, type(value).__name__, arr.dtype))
    return arr


class Worker:
    """The worker: register ops with @w.op(name), optionally a supports
    function with @w.supports, then w.run().

    name:        what conform calls the implementation ([A-Za-z0-9_.-]+)
    dtypes:      the dtypes it runs (f32, bf16, f16); arithmetic is the
                 kernel's, inputs always arrive widened to float32
    torch:       give the kernels torch tensors instead of numpy arrays
    device:      with torch, the device the tensors are put on ("cuda", "cuda:1"; default the CPU)
    description: one line for reports
    batch_invariant: ops whose every output row is the same bit for bit
                 whatever else is in the batch, wherever its pages are and
                 however often it is called (paged_attention): conform then
                 checks the relations bit for bit, not within tolerance
    index_dtype: how paged_attention's and mla_attention's index arrays
                 arrive: "i64" (int64, the default) or "i32" (int32, as
                 FlashInfer and vLLM take them)
    kv_cache_dtypes: the FP8 KV caches it writes and reads ("fp8_e4m3",
                 "fp8_e5m2"; the op then takes k_scale and v_scale): a list is
                 paged_attention's; {op: [...]} names each op with a cache
                 (paged_attention, decode). conform offers no FP8-cache case
                 for an op whose list is absent or empty
    activation_quant: {op: "q8_0" | "q8_k"} for the ops (swiglu, block,
                 decode) whose kernels quantise the activations of every
                 weight product before it, as llama.cpp's CPU kernels do
                 (act_quant_round_trip below is the exact rounding): conform
                 then builds its low-precision baselines the same way
    twists:      the twists it computes (`conform list --twists`): names
                 ("sliding_window", "attn_sinks") or a choice's values
                 ("hidden_act=gelu_tanh"), for every op; or {op: [...]} per
                 op. conform offers it only cases whose twists it declares,
                 and still its --cases N per op; a worker that declares none
                 is asked the plain Llama cases
    """

    def __init__(self, name, dtypes=("f32",), torch=False, description="", device=None, batch_invariant=(),
                 index_dtype="i64", kv_cache_dtypes=(), activation_quant=None, twists=()):
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ValueError("Worker name %r: must match [A-Za-z0-9_.-]+" % (name,))
        dtypes = list(dtypes)
        bad = [d for d in dtypes if d not in DTYPES]
        if bad or not dtypes:
            raise ValueError("Worker dtypes %r: each must be one of %s" % (dtypes, ", ".join(DTYPES)))
        batch_invariant = [batch_invariant] if isinstance(batch_invariant, str) else list(batch_invariant)
        bad = [op for op in batch_invariant if op not in OPS]
        if bad:
            raise ValueError("Worker batch_invariant %r: each must be one of %s" % (bad, ", ".join(OPS)))
        if index_dtype not in INDEX_DTYPES:
            raise ValueError("Worker index_dtype %r: must be one of %s" % (index_dtype, ", ".join(INDEX_DTYPES)))
        if isinstance(kv_cache_dtypes, dict):
            kv_cache_dtypes = {op: [d] if isinstance(d, str) else list(d) for op, d in kv_cache_dtypes.items()}
        else:  # a list: paged_attention's
            kv_cache_dtypes = {"paged_attention": [kv_cache_dtypes] if isinstance(kv_cache_dtypes, str)
                               else list(kv_cache_dtypes)}
        bad = [op for op in kv_cache_dtypes if op not in CACHE_OPS]
        if bad:
            raise ValueError("Worker kv_cache_dtypes %r: each op must be one of %s" % (bad, ", ".join(CACHE_OPS)))
        bad = [d for ds in kv_cache_dtypes.values() for d in ds if d not in KV_CACHE_DTYPES]
        if bad:
            raise ValueError("Worker kv_cache_dtypes %r: each must be one of %s" % (bad, ", ".join(KV_CACHE_DTYPES)))
        activation_quant = dict(activation_quant or {})
        bad = [op for op, q in activation_quant.items() if op not in WEIGHT_OPS or q not in ACT_QUANTS]
        if bad:
            raise ValueError("Worker activation_quant %r: each op must be one of %s and each value one of %s"
                             % (activation_quant, ", ".join(WEIGHT_OPS), ", ".join(ACT_QUANTS)))
        self.activation_quant = {op: q for op, q in activation_quant.items() if q != "none"}
        if isinstance(twists, dict):
            twists = {op: [t] if isinstance(t, str) else list(t) for op, t in twists.items()}
            bad = [op for op in twists if op not in OPS]
            if bad:
                raise ValueError("Worker twists %r: each op must be one of %s" % (bad, ", ".join(OPS)))
        else:
            twists = [twists] if isinstance(twists, str) else list(twists)
        bad = [t for t in (sum(twists.values(), []) if isinstance(twists, dict) else twists) if not isinstance(t, str)]
        if bad:
            raise ValueError("Worker twists %r: each must be a twist's name (conform list --twists)" % (bad,))
        self.twists = twists  # conform checks the names, and refuses the hello naming an unknown one
        self.batch_invariant = batch_invariant
        self.index_dtype = index_dtype
        self.kv_cache_dtypes = kv_cache_dtypes
        self.name = name
        self.dtypes = dtypes
        self.description = description
        self.torch = bool(torch) or device is not None
        self.device = device
        self._torch = None
        self._ops = {}
        self._supports = None
        self.request = None  # the header of the request being served, for a kernel that wants its id or dtype

    # ---- registration ----

    def op(self, name):
        """Decorator: fn(**inputs, config=dict[, prefill=int]) -> array or dict."""
        if name not in OPS:
            raise ValueError("op %r: unknown; the ops are %s" % (name, ", ".join(OPS)))

        def register(fn):
            self._ops[name] = fn
            return fn
        return register

    def supports(self, fn):
        """Decorator: fn(op, config, dtype) -> bool or (bool, reason)."""
        self._supports = fn
        return fn

    # ---- the loop ----

    def run(self):
        """Serve conform until bye (exit 0) or the end of stdin (exit 0); a
        stream that is not this protocol: a message on stderr, exit 2."""
        in_fd, out_fd = _take_stdio()
        try:
            self._import_torch()
        except ImportError as e:
            sys.stderr.write("conform_worker[%s]: %s\n" % (self.name, e))
            sys.exit(1)  # before the hello: conform reports the worker unavailable, with this line
        code = self.serve(in_fd, out_fd)
        sys.stderr.flush()
        sys.exit(code)

    def serve(self, in_fd, out_fd):
        """Serve conform on two descriptors (conform's calls arrive on in_fd,
        the answers go to out_fd) until bye or the end of the stream: 0; a
        stream that is not this protocol: a message on stderr, 2. run() serves
        on the process's own stdin and stdout; conform.check() serves a
        conform it started with --impl-fd, from the calling process."""
        self._import_torch()
        self._out = out_fd
        reader = _Reader(in_fd)
        try:
            return self._serve(reader)
        except ProtocolError as e:
            sys.stderr.write("conform_worker[%s]: protocol error: %s\n" % (self.name, e))
            return 2
        except BrokenPipeError:
            return 0  # conform has gone; nobody is left to tell

    def _import_torch(self):
        if not self.torch or self._torch is not None:
            return
        try:
            import torch  # here, so that a numpy worker never needs it
        except ImportError as e:
            raise ImportError("Worker(torch=True) but torch is not importable: %s" % e)
        self._torch = torch

    def _serve(self, reader):
        first = reader.frame()
        if first is None:
            return 0
        header, _ = first
        if header.get("type") != "hello":
            raise ProtocolError("expected a hello first, found type %r" % (header.get("type"),))
        # We answer with the version we speak; conform decides whether it can talk to it.
        write_frame(self._out, {
            "type": "hello", "protocol": PROTOCOL, "name": self.name, "description": self.description,
            "ops": [op for op in OPS if op in self._ops], "dtypes": self.dtypes,
            "supports": self._supports is not None, "pid": os.getpid(),
            "batch_invariant": [op for op in self.batch_invariant if op in self._ops],
            "index_dtype": self.index_dtype,
            "kv_cache_dtypes": {op: ds for op, ds in self.kv_cache_dtypes.items() if ds and op in self._ops},
            "activation_quant": {op: q for op, q in self.activation_quant.items() if op in self._ops},
            "twists": ({op: ts for op, ts in self.twists.items() if op in self._ops} if isinstance(self.twists, dict)
                       else self.twists),
        })
        while True:
            frame = reader.frame()
            if frame is None:
                return 0
            header, payload = frame
            kind = header.get("type")
            if kind == "bye":
                return 0
            rid = header.get("id")
            self.request = header
            try:
                if kind == "call":
                    self._call(header, payload)
                elif kind == "supports":
                    self._answer_supports(header)
                else:
                    raise InvalidArgument("type: unknown request type %r" % (kind,))
            except Unsupported as e:
                self._error(rid, "unsupported", str(e) or "declined", None)
            except InvalidArgument as e:
                self._error(rid, "invalid_argument", str(e), None)
            except BrokenPipeError:
                raise
            except Exception as e:
                self._error(rid, "internal", "%s: %s" % (type(e).__name__, e), traceback.format_exc())

    def _error(self, rid, kind, message, tb):
        h = {"type": "error", "id": rid, "kind": kind, "message": message}
        if tb:
            h["traceback"] = tb
        write_frame(self._out, h)

    def _declined(self, op, dtype):
        """Why this worker cannot take (op, dtype) at all, or None."""
        if op not in self._ops:
            return "op %r is not implemented by %s (it has %s)" % (op, self.name, ", ".join(o for o in OPS if o in self._ops))
        if dtype not in self.dtypes:
            return "dtype %r is not one %s runs (it runs %s)" % (dtype, self.name, ", ".join(self.dtypes))
        return None

    def _answer_supports(self, header):
        op, dtype, config = header.get("op"), header.get("dtype"), header.get("config")
        if not isinstance(config, dict):
            raise InvalidArgument("config: expected an object, found %s" % type(config).__name__)
        reason = self._declined(op, dtype)
        ok = reason is None
        if ok and self._supports is not None:
            try:
                ans = self._supports(op, config, dtype)
            except Unsupported as e:
                ans = (False, str(e))
            if isinstance(ans, (bool, np.bool_)):
                ok, reason = bool(ans), None
            elif isinstance(ans, tuple) and len(ans) == 2 and isinstance(ans[0], (bool, np.bool_)):
                ok, reason = bool(ans[0]), ans[1]
            else:
                raise TypeError("the supports function returned %r; expected a bool or (bool, reason)" % (ans,))
        answer = {"type": "supports", "id": header.get("id"), "ok": ok}
        if not ok:
            answer["reason"] = str(reason) if reason else "declined by %s's supports()" % self.name
        write_frame(self._out, answer)

    def _call(self, header, payload):
        rid, op, dtype, config = header.get("id"), header.get("op"), header.get("dtype"), header.get("config")
        reason = self._declined(op, dtype)
        if reason:
            raise Unsupported(reason)
        if not isinstance(config, dict):
            raise InvalidArgument("config: expected an object, found %s" % type(config).__name__)
        inputs = _tensor_specs(header, "inputs", ("f32", "bf16", "f16") + INDEX_DTYPES)
        outputs = _tensor_specs(header, "outputs", ("f32", "bf16", "f16"))
        if "outputs" not in header:
            outputs = [("out", dtype, ())]
        need = sum(ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in inputs)
        if need != len(payload):
            raise InvalidArgument("payload: the inputs listed take %d bytes, the frame carries %d" % (need, len(payload)))

        args, at = {}, 0
        for name, d, shape in inputs:
            n = ITEMSIZE[d] * int(np.prod(shape, dtype=np.int64))
            arr = _decode(memoryview(payload)[at:at + n], d, shape)
            at += n
            if self._torch is not None:
                arr = self._torch.from_numpy(arr)
                if self.device is not None:
                    arr = arr.to(self.device)
            args[name] = arr
        kwargs = {"config": config}
        if op == "decode":
            prefill = header.get("prefill")
            if not isinstance(prefill, int) or isinstance(prefill, bool):
                raise InvalidArgument("prefill: decode needs an integer prefill, found %r" % (prefill,))
            kwargs["prefill"] = prefill

        fn = self._ops[op]
        start = time.perf_counter()
        result = fn(**args, **kwargs)
        if self._torch is not None and self._torch.cuda.is_available() and self._torch.cuda.is_initialized():
            self._torch.cuda.synchronize()  # the kernel's time, not its launch's
        seconds = time.perf_counter() - start

        returned = result if isinstance(result, dict) else {"out": result}
        for name in returned:
            if name not in OUTPUTS[op]:
                sys.stderr.write("conform_worker[%s]: %s returned %r, which is not one of its outputs (%s); ignored\n"
                                 % (self.name, op, name, ", ".join(OUTPUTS[op])))
        # Only what was asked for, in the order asked, each in the dtype asked,
        # with whatever shape the kernel gave it: conform judges the shape.
        specs, arrays = [], []
        for name, d, _ in outputs:
            value = returned.get(name)
            if value is None:
                continue
            arr = _encode(_to_numpy(value, name), d)
            specs.append({"name": name, "dtype": d, "shape": list(arr.shape)})
            arrays.append(arr)
        write_frame(self._out, {"type": "result", "id": rid, "outputs": specs, "seconds": seconds}, arrays)

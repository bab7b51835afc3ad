"""conform.check: the gate, with the implementation served from this process.

conform (the judge) runs as its own process and keeps the truth: the float64
reference, the tolerance model, shrinking, diagnosis and the reports. This
process answers its calls over two pipes it hands to conform
(`conform --impl-fd R,W`), through conform_worker's protocol code: the kernel
runs here, in the caller's GPU context, with the caller's imports.

What the judge cannot do to a kernel it did not start (impls/WORKERS.md,
"Attached workers"): sandbox it, limit its memory or CPU, kill it, restart it.
A call that hangs past `timeout` fails its case and conform declines the rest;
when conform has finished, a Python-level hang here is interrupted (a signal
to the main thread), and check() raises with the timed-out case. A hang inside
C code or on a GPU that never returns to Python cannot be interrupted from
this process.
"""

import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

import conform_worker
from conform_worker import OPS, Worker

__all__ = ["check", "bench", "find_binary", "twists", "Nonconformance", "ConformError", "ConformNotFound", "Report",
           "CONFIG_FIELDS"]

# The core config fields a kernel may take as keyword arguments (impls/WORKERS.md,
# "The config"); each twist's field comes too, by its name (twists()).
CONFIG_FIELDS = ("d_model", "n_heads", "n_kv_heads", "head_dim", "ffn_dim", "rope_layout", "rope_theta", "rotary_dim",
                 "norm_eps", "rope_scaling", "page_size", "n_experts", "n_experts_per_tok", "moe_ffn_dim",
                 "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# check(config={...}): the core fields that set a run's conventions and sizes, as
# conform's flags; a twist's field sets it by its own flag (twists()).
_CORE_FLAGS = {"preset": "--preset", "config": "--config", "d_model": "--d-model", "n_heads": "--heads",
               "n_kv_heads": "--kv-heads", "head_dim": "--head-dim", "ffn_dim": "--ffn", "rope_theta": "--theta",
               "rope_layout": "--layout", "norm_eps": "--eps"}
_DTYPES = ("f32", "bf16", "f16")


class ConformError(Exception):
    """conform could not judge: a bad argument or input (its exit code 2), an
    implementation it could not use (3), or conform itself ended abnormally.
    The message is conform's own, with its exit status."""

    def __init__(self, message, returncode=None, command=None):
        super().__init__(message)
        self.returncode = returncode
        self.command = command


class ConformNotFound(ConformError):
    """No conform binary where check() looks (binary=, $CONFORM_BIN, PATH, the build tree)."""


class Report(dict):
    """conform's JSON report (conform.json, schema conform-report/1) as a dict,
    with the few things a test asks of it as properties."""

    @property
    def passed(self):
        return bool(self.get("pass"))

    @property
    def seed(self):
        return self.get("seed")

    @property
    def failures(self):
        return [c for c in self.get("cases", []) if not c.get("pass")]

    @property
    def not_run(self):
        return self.get("not_run", [])

    @property
    def first_failure(self):
        f = self.failures
        return f[0] if f else None


class Nonconformance(AssertionError):
    """The implementation does not compute the op's function: the message is
    conform's failure report (the shrunk case, the first failing tensor, the
    error against its bound, the diagnosis), then how to replay the case."""

    def __init__(self, message, report, reports_dir=None):
        super().__init__(message)
        self.report = report
        self.reports_dir = reports_dir
        first = report.first_failure if report is not None else None
        self.case_id = first.get("case_id") if first else None
        self.op = first.get("op") if first else None
        self.diagnosis = (first.get("diagnosis") or {}).get("lines", []) if first else []
        self.seed = report.seed if report is not None else None


# ---- where conform is ----------------------------------------------------------

def _candidates(binary):
    here = os.path.dirname(os.path.abspath(__file__))
    if binary:
        yield "binary=", binary
        return
    env = os.environ.get("CONFORM_BIN")
    if env:
        yield "$CONFORM_BIN", env
        return
    on_path = shutil.which("conform")
    yield "PATH", on_path
    # The checkout this package sits in (python/conform -> build/conform), then
    # the working directory's build tree.
    yield "the build tree", os.path.join(here, os.pardir, os.pardir, "build", "conform")
    yield "./build", os.path.join(os.getcwd(), "build", "conform")
    # `cmake --install --prefix P` puts this package in P/share/conform/python/conform.
    yield "the install prefix", os.path.join(here, os.pardir, os.pardir, os.pardir, os.pardir, "bin", "conform")


def find_binary(binary=None):
    """The conform executable: `binary` if given, else $CONFORM_BIN, else
    `conform` on PATH, else build/conform of the checkout this package is in
    or of the working directory, else bin/conform of the prefix `cmake
    --install` put this package under. Raises ConformNotFound saying where
    it looked."""
    looked = []
    for where, path in _candidates(binary):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
        looked.append("%s (%s)" % (where, path if path else "no conform on it"))
    raise ConformNotFound("conform.check: no conform binary found; looked at " + "; ".join(looked) +
                          ". Build it (scripts/setup.sh) and set CONFORM_BIN=/path/to/build/conform or put it on PATH")


_TWISTS = {}


def twists(binary=None):
    """The twist record as the conform binary has it (`conform list --twists
    --json`): a list of dicts with each twist's name, kind, flag, id, the ops
    that read it, the tensors it brings and the bugs diagnosis names. What a
    kernel may declare with check(..., twists=[...]) or Worker(twists=...)."""
    exe = find_binary(binary)
    if exe not in _TWISTS:
        try:
            out = subprocess.run([exe, "list", "--twists", "--json"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ConformError("conform.twists: %s list --twists --json did not run: %s" % (exe, e))
        if out.returncode != 0:
            raise ConformError("conform.twists: %s list --twists --json exited %d: %s" % (exe, out.returncode,
                                                                                          out.stderr.strip()))
        _TWISTS[exe] = json.loads(out.stdout)["twists"]
    return _TWISTS[exe]


# ---- the implementation, as conform_worker serves it ------------------------------

def _adapt(fn, op, state):
    """fn(**inputs, <config fields it names>) as conform_worker calls a kernel:
    fn(**inputs, config=dict[, prefill=int]). A kernel takes the config as a
    whole (a parameter named `config`), or the fields it names, or all of them
    (**kwargs); decode's `prefill` likewise."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    var_kw = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params.values())

    def kernel(*, config, prefill=None, **inputs):
        kw = dict(inputs)
        if prefill is not None and (var_kw or "prefill" in params):
            kw["prefill"] = prefill
        if "config" in params:
            kw["config"] = config  # the whole dict: its fields are not spread as well
        else:
            for k, v in config.items():
                if k not in kw and (var_kw or k in params):
                    kw[k] = v
        state.in_call = True
        try:
            return fn(**kw)
        finally:
            state.in_call = False

    kernel.__name__ = getattr(fn, "__name__", op)
    return kernel


_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def _worker_for(fn, ops, name, dtype, torch, device, state, batch_invariant=(), index_dtype="i64", kv_cache_dtypes=(),
                activation_quant=None, twists=()):
    if isinstance(fn, Worker):
        if (torch or device is not None or batch_invariant or index_dtype != "i64" or kv_cache_dtypes or activation_quant
                or twists):
            raise ValueError("conform.check: torch=, device=, batch_invariant=, index_dtype=, kv_cache_dtypes=, "
                             "activation_quant= and twists= belong to the Worker(...) given, not to check()")
        # Its kernels take config=, as a worker's do; only the in-call flag is ours.
        w = Worker(fn.name, dtypes=fn.dtypes, torch=fn.torch, description=fn.description, device=fn.device,
                   batch_invariant=fn.batch_invariant, index_dtype=fn.index_dtype, kv_cache_dtypes=fn.kv_cache_dtypes,
                   activation_quant=fn.activation_quant, twists=fn.twists)
        for o, k in fn._ops.items():
            w.op(o)(_adapt(k, o, state))
        w._supports = fn._supports
        return w
    if isinstance(fn, dict):
        table = dict(fn)
    elif callable(fn):
        if len(ops) != 1:
            raise ValueError("conform.check: one function serves one op; for several, give a dict {op: function} "
                             "(op=%r)" % (",".join(ops),))
        table = {ops[0]: fn}
    else:
        raise TypeError("conform.check: fn must be a function, a dict {op: function} or a conform_worker.Worker, "
                        "found %s" % type(fn).__name__)
    for o, k in table.items():
        if o not in OPS:
            raise ValueError("conform.check: unknown op %r (the ops are %s)" % (o, ", ".join(OPS)))
        if not callable(k):
            raise TypeError("conform.check: the kernel for %r is not callable but %s" % (o, type(k).__name__))
    if name is None:
        only = next(iter(table.values())) if len(table) == 1 else None
        name = getattr(only, "__name__", None) if only is not None else None
        name = _NAME_BAD.sub("_", name)[:64] if name and name != "<lambda>" else "python"
    w = Worker(name, dtypes=[dtype], torch=torch, device=device, batch_invariant=batch_invariant,
               index_dtype=index_dtype, kv_cache_dtypes=kv_cache_dtypes, activation_quant=activation_quant,
               twists=twists, description="served from the calling process (conform.check, pid %d)" % os.getpid())
    for o, k in table.items():
        w.op(o)(_adapt(k, o, state))
    return w


# ---- the run ----------------------------------------------------------------------

class _State:
    def __init__(self):
        self.in_call = False
        self.judge_done = False


class _JudgeGone(BaseException):
    """Raised in the main thread inside a kernel that is still running when
    conform has finished (it timed the call out): a BaseException, so that
    the worker's own `except Exception` does not answer it as the kernel's error."""


def _config_args(config, exe):
    if config is None:
        return []
    if isinstance(config, str):
        if config.endswith(".json") or os.path.sep in config:
            return ["--config", config]
        return ["--preset", config]
    if not isinstance(config, dict):
        raise TypeError("conform.check: config must be a preset name, a config.json path or a dict of fields, "
                        "found %s" % type(config).__name__)
    flags = dict(_CORE_FLAGS)
    flags.update({t["name"]: t["flag"] for t in twists(exe) if t["flag"]})
    args = []
    for k, v in config.items():
        flag = flags.get(k)
        if flag is None:
            raise ValueError("conform.check: config field %r is not one conform sets (%s)" % (k, ", ".join(flags)))
        if isinstance(v, bool):
            v = int(v)
        args += [flag, str(v)]
    return args


def _ops_of(fn, op):
    if op is None:
        if isinstance(fn, dict):
            return list(fn)
        if isinstance(fn, Worker):
            return list(fn._ops)
        raise ValueError("conform.check: op= is needed (one of %s, a list, or 'all')" % ", ".join(OPS))
    if op == "all":
        if isinstance(fn, dict):
            return [o for o in OPS if o in fn]
        if isinstance(fn, Worker):
            return [o for o in OPS if o in fn._ops]
        raise ValueError("conform.check: op='all' needs a dict {op: function} or a Worker")
    ops = [op] if isinstance(op, str) else list(op)
    for o in ops:
        if o not in OPS:
            raise ValueError("conform.check: unknown op %r (the ops are %s)" % (o, ", ".join(OPS)))
    return ops


def check(fn, op=None, *, cases=None, dtype="f32", seed=None, fixtures=None, config=None, case=None, name=None,
          torch=False, device=None, timeout=120.0, binary=None, out=None, args=(), echo=False, batch_invariant=(),
          index_dtype="i64", kv_cache_dtypes=(), activation_quant=None, twists=()):
    """Judge `fn` with conform; return the report, or raise Nonconformance.

    fn        a kernel for `op` (a function), a dict {op: function}, or a conform_worker.Worker.
              A kernel receives the op's inputs by their schema names (impls/WORKERS.md) as numpy
              float32 arrays (positions int64) or, with torch=True, torch tensors on `device`, and the
              config fields it names as keyword arguments (or all of them with **kwargs, or the whole
              dict as `config`); decode also `prefill`. It returns the output (or a dict: the block's taps).
    op        an op name, a list, or "all" (every op the dict or Worker has).
    cases     property cases per op (conform's default: 100).
    dtype     f32, bf16 or f16: what conform asks the kernel to compute in (inputs arrive widened).
    seed      an int, or "random" (conform draws one; the report and any failure say which).
    fixtures  None: the repo's regression fixtures; False: none; a path or list of paths.
    config    a preset name ("llama3-8b"), a config.json path, or a dict of conventions and sizes
              (rope_theta, rope_layout, qk_norm, norm_eps, n_heads, n_kv_heads, head_dim, d_model, ffn_dim).
    case      replay one property case by its id (the message of a failure gives it).
    name      what reports call the implementation (default: the function's name).
    timeout   seconds one call may take before its case fails (conform's --call-timeout).
    binary    the conform executable (default: find_binary()).
    out       directory for conform's reports (default: a temporary one, kept only on failure).
    args      further conform flags, e.g. ["--diagnose", "all"].
    echo      also print conform's output as it runs (to stderr).
    twists    the twists the kernel computes (conform.twists(): "sliding_window", "attn_sinks",
              "hidden_act=gelu_tanh", ...; or {op: [...]}): it is offered only cases whose twists
              it declares, and still `cases` of each op; none declared: the plain Llama cases.
    batch_invariant, index_dtype, kv_cache_dtypes, activation_quant
              as conform_worker.Worker takes them: the ops whose rows the kernel promises are the
              same bit for bit in any batch (paged_attention's relations then judged so),
              paged_attention's index arrays as "i32" instead of "i64", the FP8 KV caches
              its paged_attention keeps ("fp8_e4m3", "fp8_e5m2"), and {op: "q8_0" | "q8_k"}
              for kernels that quantise their weight products' activations (llama.cpp-style).
    """
    if dtype not in _DTYPES:
        raise ValueError("conform.check: dtype %r is not one of %s" % (dtype, ", ".join(_DTYPES)))
    ops = _ops_of(fn, op)
    state = _State()
    worker = _worker_for(fn, ops, name, dtype, torch, device, state, batch_invariant, index_dtype, kv_cache_dtypes,
                         activation_quant, twists)
    exe = find_binary(binary)

    own_out = out is None
    out_dir = tempfile.mkdtemp(prefix="conform-") if own_out else os.path.abspath(out)
    flags = ["--op", ",".join(ops), "--dtype", dtype, "--out", out_dir]
    if cases is not None:
        flags += ["--cases", str(int(cases))]
    if seed is not None:
        flags += ["--seed", str(seed)]
    if case is not None:
        flags += ["--case", case]
    if fixtures is False:
        flags += ["--no-default-fixtures"]
    elif fixtures is not None:
        paths = [fixtures] if isinstance(fixtures, (str, os.PathLike)) else list(fixtures)
        flags += ["--fixtures", ",".join(os.fspath(p) for p in paths)]
    flags += _config_args(config, exe)
    flags += ["--call-timeout", repr(float(timeout))]
    flags += [str(a) for a in args]
    code, stdout, stderr, interrupted, cmd = _judge(worker, state, exe, [], flags, echo)

    report = None
    path = os.path.join(out_dir, "conform.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            report = Report(json.load(f))
    shown = " ".join(_quote(a) for a in cmd)
    if code == 0 and report is not None and report.passed:
        if own_out:
            shutil.rmtree(out_dir, ignore_errors=True)
        return report
    if code == 1 and report is not None:
        raise Nonconformance(_failure_message(worker.name, ops, stdout, report, out_dir, interrupted, fn, dtype),
                             report, out_dir)
    if own_out:
        shutil.rmtree(out_dir, ignore_errors=True)
    what = {2: "a bad argument or input", 3: "an implementation it could not use"}.get(code, "an abnormal end")
    raise ConformError("conform.check: conform exited with status %s (%s): %s\n  command: %s" %
                       (code, what, (stderr.strip() or stdout.strip() or "(no output)"), shown), code, cmd)


def _judge(worker, state, exe, before, flags, echo):
    """Runs `exe BEFORE --impl-fd R,W FLAGS` and serves its calls with `worker`
    from this thread until conform lets go; (exit status, stdout, stderr,
    whether a kernel still running was interrupted, the command)."""
    # conform -> here (calls), here -> conform (answers). conform gets one end
    # of each; this process keeps the other.
    calls_r, calls_w = os.pipe()
    answers_r, answers_w = os.pipe()
    cmd = [exe] + list(before) + ["--impl-fd", "%d,%d" % (answers_r, calls_w)] + list(flags)
    log = tempfile.TemporaryFile()
    errlog = tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE if echo else log,
                                stderr=errlog, pass_fds=(answers_r, calls_w), close_fds=True)
    except OSError as e:
        for fd in (calls_r, calls_w, answers_r, answers_w):
            os.close(fd)
        raise ConformError("conform.check: cannot start %s: %s" % (exe, e), command=cmd)
    os.close(answers_r)
    os.close(calls_w)

    echoed = []
    pump_thread = None
    if echo:
        def pump():
            for line in iter(proc.stdout.readline, b""):
                sys.stderr.write(line.decode("utf-8", "replace"))
                echoed.append(line)
        pump_thread = threading.Thread(target=pump, daemon=True)
        pump_thread.start()

    main = threading.current_thread() is threading.main_thread()
    old_handler = None
    if main:
        def on_gone(signum, frame):
            if state.judge_done and state.in_call:
                raise _JudgeGone()
        old_handler = signal.signal(signal.SIGUSR2, on_gone)

    def watch():
        proc.wait()
        state.judge_done = True
        if main and state.in_call:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR2)

    watcher = threading.Thread(target=watch, name="conform-judge-watch", daemon=True)
    watcher.start()
    interrupted = False
    try:
        try:
            worker.serve(calls_r, answers_w)
        except _JudgeGone:
            interrupted = True
        finally:
            os.close(calls_r)
            os.close(answers_w)
        code = proc.wait()
        watcher.join()
    finally:
        if main:
            signal.signal(signal.SIGUSR2, old_handler)
    if pump_thread is not None:
        pump_thread.join()
        stdout = b"".join(echoed)
    else:
        log.seek(0)
        stdout = log.read()
    errlog.seek(0)
    stderr = errlog.read()
    log.close()
    errlog.close()
    return code, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), interrupted, cmd


def bench(fn, op=None, *, dtype="f32", config=None, name=None, torch=False, device=None, binary=None, args=(),
          echo=False):
    """`conform bench` with `fn` served from this process: its output (the
    round trip per call beside the kernel's own time, and the in-repo
    implementations' for scale). args: further bench flags, e.g.
    ["--impl", "torch,scalar"] or ["--rows", "64"]."""
    if dtype not in _DTYPES:
        raise ValueError("conform.bench: dtype %r is not one of %s" % (dtype, ", ".join(_DTYPES)))
    ops = _ops_of(fn, op)
    state = _State()
    worker = _worker_for(fn, ops, name, dtype, torch, device, state)
    exe = find_binary(binary)
    flags = ["--op", ",".join(ops), "--dtype", dtype] + _config_args(config, exe) + [str(a) for a in args]
    code, stdout, stderr, _, cmd = _judge(worker, state, exe, ["bench"], flags, echo)
    if code != 0:
        raise ConformError("conform.bench: conform exited with status %s: %s\n  command: %s" %
                           (code, stderr.strip() or stdout.strip() or "(no output)",
                            " ".join(_quote(a) for a in cmd)), code, cmd)
    return stdout


def _quote(a):
    return a if re.fullmatch(r"[A-Za-z0-9_./,:=+-]+", a) else "'" + a.replace("'", "'\\''") + "'"


def _failure_message(name, ops, stdout, report, out_dir, interrupted, fn, dtype):
    failures = report.failures
    first = report.first_failure or {}
    lines = ["%s does not conform: %d of %d cases fail (seed %s, dtype %s)" %
             (name, len(failures), report.get("summary", {}).get("cases", 0), report.seed, dtype)]
    # conform's own report of the first failure of each op, as it printed it;
    # the others in a line each (the report has them all)
    blocks = _failure_blocks(stdout)
    shown, rest = [], []
    for c in failures:
        block = next((b for b in blocks if b.split("\n", 1)[0].endswith("  " + str(c.get("case_id")))), None)
        if block and not any(o.get("op") == c.get("op") for o in shown):
            shown.append(c)
            lines += ["", block]
        else:
            rest.append(c)
    if not shown:
        lines += ["", stdout.strip()]
    if rest:
        lines.append("")
        lines.append("%d more failing case%s:" % (len(rest), "" if len(rest) == 1 else "s"))
        for c in rest[:8]:
            why = "same bug as %s" % c["same_as"] if c.get("same_as") else (c.get("error") or c.get("first_failing") or "")
            lines.append("  %s %s: %s" % (c.get("op"), c.get("case_id"), why))
        if len(rest) > 8:
            lines.append("  ... (%d more in the report)" % (len(rest) - 8))
    for n in report.not_run:
        lines.append("not run: %s %s (%s cases): %s" % (n.get("impl"), n.get("op"), n.get("cases"), n.get("reason")))
    if interrupted:
        lines.append("(the kernel was still running when conform finished; it was interrupted here)")
    if first.get("case_id") and first.get("origin") != "fixture":
        fname = getattr(fn, "__name__", "fn") if callable(fn) and not isinstance(fn, dict) else "kernels"
        lines.append("replay from Python: conform.check(%s, op=%r, case=%r, seed=%r)" %
                     (fname, first.get("op"), first.get("case_id"), report.seed))
    lines.append("reports: %s" % os.path.join(out_dir, "conform.html"))
    return "\n".join(lines)


def _failure_blocks(stdout):
    """The FAIL blocks conform printed (a FAIL line and its indented lines), each one string."""
    blocks, cur = [], None
    for line in stdout.splitlines():
        if line.startswith("FAIL "):
            cur = [line]
            blocks.append(cur)
        elif cur is not None and line.startswith(" "):
            if not (line.startswith("  replay:") and "--impl-fd" in line):
                cur.append(line)  # (conform's replay names descriptors of this run: the Python replay follows)
        else:
            cur = None
    return ["\n".join(b) for b in blocks]

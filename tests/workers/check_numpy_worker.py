#!/usr/bin/python3
"""Checks impls/worker_example/numpy_worker.py against the repo's golden files.

    CONFORM=build/conform /usr/bin/python3 tests/workers/check_numpy_worker.py [fixtures/*.h5 ...]

Every case of every file (fixtures/SCHEMA.md) is run through the worker's op
functions directly (no protocol) and each `expected` dataset is compared; the
error of a tensor is max|got - expected| / max|expected|. Two runs:

  exact   RoPE angles in float64 (numpy_worker.ANGLE_DTYPE): every convention
          is checked, each tensor within 1e-4 (the maths is right);
  hf      the worker as shipped, angles in float32 as HF computes them: each
          tensor within 1e-4 plus what float32 angles cost at the case's
          largest position p, 2^-22 p (the angle's rounding is at most
          2^-23 p rad; twice that for what attention carries downstream).

Prints the worst tensor of each run per file; exit 1 if any fails, 2 on a
file this script cannot read.

    /usr/bin/python3 tests/workers/check_numpy_worker.py --torch

checks impls/worker_example/torch_worker.py the same way (its rmsnorm, rope
and attention; the cases its supports() declines are listed as declined).
"""

import glob
import sys
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "impls" / "worker_example"))
import numpy_worker as nw  # noqa: E402

LIMIT = 1e-4


def twist_rows():
    """The twist record's rows, from the conform binary ($CONFORM, else build/conform)."""
    if not hasattr(twist_rows, "rows"):
        import json
        import os
        import subprocess
        exe = os.environ.get("CONFORM") or str(ROOT / "build" / "conform")
        out = subprocess.run([exe, "list", "--twists", "--json"], check=True, capture_output=True, text=True).stdout
        twist_rows.rows = json.loads(out)["twists"]
    return twist_rows.rows


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def protocol_config(attrs, op, inputs):
    """A fixture's config/ attributes as the protocol's resolved config dict."""
    a = dict(attrs)
    hd = int(a.get("head_dim", 0))
    sc = {"type": text(a.get("rope_scaling", "none")), "factor": float(a.get("rope_factor", 1.0)),
          "low_freq_factor": float(a.get("rope_low_freq_factor", 1.0)),
          "high_freq_factor": float(a.get("rope_high_freq_factor", 4.0)),
          "original_max_position": int(a.get("rope_original_max_position", 0)),
          "beta_fast": float(a.get("rope_beta_fast", 32.0)), "beta_slow": float(a.get("rope_beta_slow", 1.0)),
          "attention_factor": float(a.get("rope_attention_factor", 1.0))}
    c = {"d_model": int(a.get("d_model", 0)), "n_heads": int(a.get("n_heads", 0)),
         "n_kv_heads": int(a.get("n_kv_heads", 0)), "head_dim": hd, "ffn_dim": int(a.get("ffn_dim", 0)),
         "rope_layout": text(a.get("rope_layout", "neox")), "rope_theta": float(a.get("rope_theta", 10000.0)),
         "rotary_dim": int(a.get("rotary_dim", 0)) or hd, "qk_norm": bool(a.get("qk_norm", 0)),
         "norm_plus_one": bool(a.get("norm_plus_one", 0)), "norm_eps": float(a.get("norm_eps", 1e-5)),
         "rope_scaling": sc}
    # the twists, by their rows (`conform list --twists --json`): the fixture's attribute, the protocol's name
    # ("rope_scaling.truncate" nests under rope_scaling), where the file has them
    convert = {"toggle": lambda v: bool(int(v)), "count": int, "number": float, "choice": text}
    for t in twist_rows():
        if not t["core"] and t["fixture_attribute"] in a:
            outer, _, key = t["name"].rpartition(".")
            (c[outer] if outer else c)[key] = convert[t["kind"]](a[t["fixture_attribute"]])
    for size in ("page_size", "n_experts", "n_experts_per_tok", "moe_ffn_dim", "kv_lora_rank", "qk_nope_head_dim",
                 "qk_rope_head_dim", "v_head_dim"):
        if size in a:
            c[size] = int(a[size])
    # the sizes a single op's inputs imply, as conform fills them in
    if op in ("rmsnorm", "swiglu"):
        c["d_model"] = inputs["x"].shape[1]
    if op == "swiglu":
        c["ffn_dim"] = inputs["w1"].shape[1]
    if op in ("rope", "qk_norm"):
        c["n_heads"] = c["n_kv_heads"] = inputs["x"].shape[1] // hd
    return c


def run_case(group):
    op = text(group.attrs["op"])
    inputs = {n: d[()] for n, d in group["inputs"].items()}
    inputs = {n: (v.astype(np.int64) if "positions" in n else v.astype(np.float32)) for n, v in inputs.items()}
    config = protocol_config(group["config"].attrs if "config" in group else {}, op, inputs)
    kwargs = {"config": config}
    if op == "decode":
        kwargs["prefill"] = int(group.attrs["prefill"])
    got = nw.OPS[op](**inputs, **kwargs)
    got = got if isinstance(got, dict) else {"out": got}
    errors = {}
    max_pos = max([int(v.max()) for n, v in inputs.items() if "positions" in n and v.size] or [0])
    for name, d in group["expected"].items():
        exp = d[()].astype(np.float64)
        if name not in got:
            raise SystemExit("%s: expected/%s: the worker returned no such output" % (group.name, name))
        g = np.asarray(got[name], dtype=np.float64)
        if g.shape != exp.shape or g.dtype.kind != "f":
            errors[name] = float("inf")
            continue
        errors[name] = float(np.max(np.abs(g - exp)) / max(np.max(np.abs(exp)), 1e-30))
    f32_expected = "float32" in text(group.attrs.get("producer", ""))
    return op, errors, max_pos, f32_expected


def twists_on(config):
    """The twists a case's config has on (conform list --twists: these are the ones a worker config carries)."""
    scaling = (config.get("rope_scaling") or {}).get("type", "none")
    return {"rope_scaling": scaling != "none", "rotary_dim": config.get("rotary_dim", 0) not in (0, config.get("head_dim")),
            "qk_norm": bool(config.get("qk_norm")), "qkv_bias": bool(config.get("qkv_bias")),
            "sliding_window": config.get("sliding_window", 0) > 0,
            "attention_chunk_size": config.get("attention_chunk_size", 0) > 0,
            "attn_logit_softcapping": config.get("attn_logit_softcapping", 0) > 0,
            "attn_sinks": bool(config.get("attn_sinks")), "attn_scale": config.get("attn_scale", 0) > 0,
            "norm_plus_one": bool(config.get("norm_plus_one")), "sandwich_norm": bool(config.get("sandwich_norm")),
            "nope": bool(config.get("nope")), "hidden_act": config.get("hidden_act", "silu") != "silu",
            "kv_cache_dtype": config.get("kv_cache_dtype", "none") != "none"}


def check_torch(paths):
    import torch
    import torch_worker as tw
    ops = {"rmsnorm": tw.rmsnorm, "rope": tw.rope, "attention": tw.attention}
    failed = checked = 0
    for path in paths:
        with h5py.File(path, "r") as f:
            for case in f:
                g = f[case]
                op = text(g.attrs["op"])
                if op not in ops:
                    continue
                inputs = {n: d[()] for n, d in g["inputs"].items()}
                config = protocol_config(g["config"].attrs if "config" in g else {}, op, inputs)
                # A case with a twist the worker does not declare is not offered to it.
                undeclared = [t for t, on in twists_on(config).items() if on and t not in tw.w.twists]
                if undeclared:
                    print("--   %-38s %-9s not offered: %s" % (Path(path).name, op, ", ".join(undeclared)))
                    continue
                args = {n: torch.from_numpy(v.astype(np.int64) if "positions" in n else v.astype(np.float32))
                        for n, v in inputs.items()}
                got = ops[op](**args, config=config).numpy().astype(np.float64)
                exp = g["expected/out"][()].astype(np.float64)
                max_pos = max([int(v.max()) for n, v in inputs.items() if "positions" in n] or [0])
                limit = LIMIT + (2.0 ** -22 * max_pos if op == "rope" else 0)
                e = float(np.max(np.abs(got - exp)) / np.max(np.abs(exp))) if got.shape == exp.shape else float("inf")
                checked += 1
                failed += not e <= limit
                print("%-4s %-38s %-9s %-15s %.3e  limit %.1e" % ("ok" if e <= limit else "FAIL", Path(path).name, op,
                                                                   case + "/out", e, limit))
    print("torch_worker: %d of %d cases pass" % (checked - failed, checked))
    return 1 if failed else 0


def main(args):
    use_torch = "--torch" in args
    paths = [a for a in args if a != "--torch"]
    paths = paths or sorted(glob.glob(str(ROOT / "fixtures" / "*.h5")))
    if use_torch:
        return check_torch(paths)
    if not paths:
        print("check_numpy_worker: no fixture files", file=sys.stderr)
        return 2
    failed = 0
    print("%-4s %-38s %-9s %-26s %-26s %s" % ("", "file", "op", "exact: worst tensor", "hf: worst tensor", "hf limit"))
    for path in paths:
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            print("check_numpy_worker: %s: %s" % (path, e), file=sys.stderr)
            return 2
        with f:
            cases = [c for c in f if isinstance(f.get(c, getlink=True), h5py.HardLink) and isinstance(f[c], h5py.Group)]
            ok, cols, op = True, [], ""
            for angles in (np.float64, np.float32):
                nw.ANGLE_DTYPE = angles
                worst = (-1.0, "")
                for case in cases:
                    op, errors, max_pos, f32_expected = run_case(f[case])
                    rotates = op in ("rope", "block", "decode")
                    f32_angles = angles is np.float32 or f32_expected
                    limit = LIMIT + (2.0 ** -22 * max_pos if f32_angles and rotates else 0)
                    ok = ok and all(e <= limit for e in errors.values())
                    for name, e in errors.items():
                        if e > worst[0]:
                            worst = (e, "%s/%s" % (case, name), limit)
                cols.append("%-15s %.3e" % (worst[1], worst[0]))
            nw.ANGLE_DTYPE = np.float32
        failed += not ok
        print("%-4s %-38s %-9s %-26s %-26s %.1e" % ("ok" if ok else "FAIL", Path(path).name, op, cols[0], cols[1], worst[2]))
    print("%d of %d files pass" % (len(paths) - failed, len(paths)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

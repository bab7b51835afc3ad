#!/usr/bin/env python3
"""Write a conform fixture (schema conform-fixture/1, fixtures/SCHEMA.md) with
nothing but h5py and numpy.

    scripts/h5py_example.py /tmp/example.h5
    build/conform --fixtures /tmp/example.h5 --cases 0

The expected values are computed here, in float64 numpy, independently of
conform — so the file checks conform's LibTorch reference as much as it checks
the implementations. Copy this file to export golden cases from your own stack:
keep the inputs float32 (what implementations consume), compute the expected
outputs in float64 from those float32 values, store weights [in, out].
"""
import argparse
import sys

import h5py
import numpy as np

# ---- the ops, as SCHEMA.md defines them (float64 throughout) -----------------


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, positions, hd, theta, layout):
    """Rotate each head's hd-slice of x by angle p * theta^(-2i/hd)."""
    T, width = x.shape
    inv_freq = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)  # [hd/2]
    angle = positions.astype(np.float64)[:, None] * inv_freq[None, :]  # [T, hd/2]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    xh = x.reshape(T, width // hd, hd)
    out = np.empty_like(xh)
    if layout == "neox":  # pairs (x[i], x[i + hd/2]): HF rotate_half
        a, b = xh[..., : hd // 2], xh[..., hd // 2 :]
        out[..., : hd // 2], out[..., hd // 2 :] = a * cos - b * sin, b * cos + a * sin
    else:  # "interleaved": pairs (x[2i], x[2i+1]), Meta's complex multiply
        a, b = xh[..., 0::2], xh[..., 1::2]
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
    return out.reshape(T, width)


def attention(q, k, v, q_pos, k_pos, n_heads, n_kv_heads, hd):
    """Causal by position; query head h reads kv head h // (H / KV)."""
    group = n_heads // n_kv_heads
    out = np.zeros((q.shape[0], n_heads * hd))
    visible = k_pos[None, :] <= q_pos[:, None]
    for h in range(n_heads):
        kv = h // group
        qh, kh, vh = q[:, h * hd : (h + 1) * hd], k[:, kv * hd : (kv + 1) * hd], v[:, kv * hd : (kv + 1) * hd]
        s = np.where(visible, qh @ kh.T / np.sqrt(hd), -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h * hd : (h + 1) * hd] = (p / p.sum(axis=1, keepdims=True)) @ vh
    return out


def silu(a):
    return a / (1.0 + np.exp(-a))


def swiglu(x, w1, w3, w2):
    return (silu(x @ w1) * (x @ w3)) @ w2


def per_head_rmsnorm(x, w, hd, eps):
    T, width = x.shape
    return rmsnorm(x.reshape(T, width // hd, hd), w, eps).reshape(T, width)


def block(x, w, positions, cfg):
    """The decoder block, returning every tap by its schema name."""
    t = {}
    hd = cfg["head_dim"]
    t["attn_in"] = rmsnorm(x, w["attn_norm"], cfg["norm_eps"])
    t["q"], t["k"], t["v"] = t["attn_in"] @ w["wq"], t["attn_in"] @ w["wk"], t["attn_in"] @ w["wv"]
    q, k = t["q"], t["k"]
    if cfg["qk_norm"]:  # Qwen3: per-head RMSNorm before RoPE
        q = per_head_rmsnorm(q, w["q_norm"], hd, cfg["norm_eps"])
        k = per_head_rmsnorm(k, w["k_norm"], hd, cfg["norm_eps"])
    t["q_rot"] = rope(q, positions, hd, cfg["rope_theta"], cfg["rope_layout"])
    t["k_rot"] = rope(k, positions, hd, cfg["rope_theta"], cfg["rope_layout"])
    t["attn"] = attention(t["q_rot"], t["k_rot"], t["v"], positions, positions, cfg["n_heads"], cfg["n_kv_heads"], hd)
    t["h"] = x + t["attn"] @ w["wo"]
    t["ffn_in"] = rmsnorm(t["h"], w["ffn_norm"], cfg["norm_eps"])
    t["ffn_out"] = swiglu(t["ffn_in"], w["w1"], w["w3"], w["w2"])
    t["out"] = t["h"] + t["ffn_out"]
    return t


# ---- writing -------------------------------------------------------------------

rng = np.random.default_rng(2024)


def f32(*shape, scale=1.0):
    """float32 inputs; the expected values are computed from exactly these."""
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def f64(a):
    return a.astype(np.float64)


def write_case(f, name, op, config, inputs, expected, **attrs):
    g = f.create_group(name)
    g.attrs["op"] = op  # a Python str: h5py stores a variable-length UTF-8 string
    g.attrs["producer"] = "scripts/h5py_example.py (numpy float64)"
    for key, value in attrs.items():
        g.attrs[key] = value
    c = g.create_group("config")
    for key, value in config.items():
        c.attrs[key] = value  # ints become int64, floats float64, str strings
    i = g.create_group("inputs")
    for key, value in inputs.items():
        assert value.dtype in (np.float32, np.int64), (key, value.dtype)
        i.create_dataset(key, data=value)
    e = g.create_group("expected")
    for key, value in expected.items():
        e.create_dataset(key, data=np.asarray(value, dtype=np.float64))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="the fixture file to write")
    ap.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = ap.parse_args()

    with h5py.File(args.out, "w" if args.force else "w-") as f:
        f.attrs["conform_schema"] = "conform-fixture/1"

        # rmsnorm: Llama's eps, one outlier channel.
        x, w = f32(5, 64), f32(64, scale=0.3) + np.float32(1)
        x[:, 7] *= 50
        write_case(f, "rmsnorm", "rmsnorm", {"norm_eps": 1e-5}, {"x": x, "weight": w},
                   {"out": rmsnorm(f64(x), f64(w), 1e-5)}, description="rmsnorm, D=64, an outlier channel")

        # rope, both layouts, theta 5e5, positions past 8192, head_dim 64, 3 heads.
        x, pos = f32(4, 3 * 64), np.arange(8190, 8194, dtype=np.int64)
        for layout in ("neox", "interleaved"):
            cfg = {"head_dim": 64, "rope_layout": layout, "rope_theta": 500000.0}
            write_case(f, f"rope_{layout}", "rope", cfg, {"x": x, "positions": pos},
                       {"out": rope(f64(x), pos, 64, 500000.0, layout)}, description=f"rope {layout}, theta 5e5")

        # qk_norm: per-head RMSNorm over head_dim, non-uniform weights.
        x, w = f32(3, 2 * 32), f32(32, scale=0.5) + np.float32(1)
        write_case(f, "qk_norm", "qk_norm", {"head_dim": 32, "norm_eps": 1e-6}, {"x": x, "weight": w},
                   {"out": per_head_rmsnorm(f64(x), f64(w), 32, 1e-6)})

        # attention: GQA (H=6, KV=2), 3 queries that are the last of 7 keys.
        H, KV, hd = 6, 2, 16
        q, k, v = f32(3, H * hd), f32(7, KV * hd), f32(7, KV * hd)
        k_pos = np.arange(100, 107, dtype=np.int64)
        q_pos = k_pos[-3:].copy()
        write_case(f, "attention_gqa", "attention", {"n_heads": H, "n_kv_heads": KV, "head_dim": hd},
                   {"q": q, "k": k, "v": v, "q_positions": q_pos, "k_positions": k_pos},
                   {"out": attention(f64(q), f64(k), f64(v), q_pos, k_pos, H, KV, hd)})

        # swiglu: no config at all.
        D, F = 24, 40
        x, w1, w3, w2 = f32(4, D), f32(D, F, scale=D**-0.5), f32(D, F, scale=D**-0.5), f32(F, D, scale=F**-0.5)
        write_case(f, "swiglu", "swiglu", {}, {"x": x, "w1": w1, "w3": w3, "w2": w2},
                   {"out": swiglu(f64(x), f64(w1), f64(w3), f64(w2))})

        # block and decode: Qwen3-like (QK-norm, head_dim != D/H, theta 1e6), GQA, positions past 8192.
        cfg = {"d_model": 32, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "ffn_dim": 48,
               "rope_layout": "neox", "rope_theta": 1000000.0, "qk_norm": 1, "norm_eps": 1e-6}
        D, H, KV, hd, F = cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"], cfg["ffn_dim"]
        weights = {
            "attn_norm": f32(D, scale=0.3) + np.float32(1),
            "wq": f32(D, H * hd, scale=D**-0.5), "wk": f32(D, KV * hd, scale=D**-0.5),
            "wv": f32(D, KV * hd, scale=D**-0.5), "wo": f32(H * hd, D, scale=(H * hd) ** -0.5),
            "ffn_norm": f32(D, scale=0.3) + np.float32(1),
            "w1": f32(D, F, scale=D**-0.5), "w3": f32(D, F, scale=D**-0.5), "w2": f32(F, D, scale=F**-0.5),
            "q_norm": f32(hd, scale=0.5) + np.float32(1), "k_norm": f32(hd, scale=0.5) + np.float32(1),
        }
        x, pos = f32(5, D), np.arange(9000, 9005, dtype=np.int64)
        taps = block(f64(x), {k: f64(v) for k, v in weights.items()}, pos, cfg)
        write_case(f, "block_qwen3_like", "block", cfg, {"x": x, "positions": pos, **weights}, taps,
                   description="block with every tap, QK-norm, GQA, theta 1e6")
        # Decode must equal the block over all T: the same expected "out".
        write_case(f, "decode_qwen3_like", "decode", cfg, {"x": x, "positions": pos, **weights},
                   {"out": taps["out"]}, prefill=np.int64(2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())

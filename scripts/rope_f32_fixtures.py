#!/usr/bin/env python3
"""An independent float32 RoPE producer: writes fixtures/rope-f32-recurrence-*.h5
(schema conform-fixture/1, fixtures/SCHEMA.md) whose expected values are what a
float32 CPU RoPE of the widely deployed kind produces, not float64 truths.

    /usr/bin/python3 scripts/rope_f32_fixtures.py            (writes fixtures/)
    /usr/bin/python3 scripts/rope_f32_fixtures.py --out DIR
    /usr/bin/python3 scripts/rope_f32_fixtures.py --analyze  (error per row, nothing written)

The method, written from its formula, float32 at every step:
  s        = float32(theta^(-2/d)), d = the rotary dims
  angle_0  = float32(p); angle_i = float32(angle_{i-1} * s)   (pair by pair, so
             pair i's angle is p * s^i accumulated by repeated float32 products)
  llama3   : angle_i = float32(angle_i / f_i), f_i = float32 of the pair's
             frequency factor (1, factor, or the smooth blend; SCHEMA.md's formula)
  cos, sin : of the float32 angle, rounded to float32 (computed by the C
             library in float64 and rounded: numpy's own cos and pow dispatch
             to SIMD code that differs between CPUs, and the files must not)
  rotation : a*c - b*s and b*c + a*s, each product and the sum rounded to float32

A conforming float32 RoPE may legitimately differ from this by the rounding of
its own angles, which grows with the position p and the pair index i: these
cases test that conform's tolerance admits that difference and no more. They
are deterministic: the same bytes on every run (fixed seed, no HDF5 timestamps).
"""
import argparse
import math
import os
import sys
import tempfile

import h5py
import numpy as np

PRODUCER = "scripts/rope_f32_fixtures.py: float32 recurrence"
F32 = np.float32

LLAMA3 = {"rope_scaling": "llama3", "rope_factor": 8.0, "rope_low_freq_factor": 1.0,
          "rope_high_freq_factor": 4.0, "rope_original_max_position": 8192}


# ---- float64 helpers that give the same bits on every CPU ---------------------------


def libm(fn, a):
    """fn (math.cos, ...) elementwise through the C library, as float64."""
    a = np.asarray(a, dtype=np.float64)
    return np.array([fn(v) for v in a.ravel()], dtype=np.float64).reshape(a.shape)


def inv_freq64(rd, theta):
    """theta^(-2i/rd), i < rd/2, in float64."""
    return np.array([math.pow(theta, -2.0 * i / rd) for i in range(rd // 2)], dtype=np.float64)


# ---- the llama3 frequency correction (SCHEMA.md), in float64 ------------------------


def llama3_divisor(inv_freq, sc):
    """Per pair, the number the angle is divided by: 1 for short wavelengths,
    factor for long ones, and in between 1 / ((1 - s) / factor + s)."""
    factor, low, high = sc["rope_factor"], sc["rope_low_freq_factor"], sc["rope_high_freq_factor"]
    L = float(sc["rope_original_max_position"])
    wavelength = 2.0 * np.pi / inv_freq
    smooth = (L / wavelength - low) / (high - low)
    blend = 1.0 / ((1.0 - smooth) / factor + smooth)
    return np.where(wavelength < L / high, 1.0, np.where(wavelength > L / low, factor, blend))


# ---- three ways to get the angles [T, rd/2] -------------------------------------------


def angles_recurrence(positions, rd, theta, sc):
    """The float32 recurrence: angle_i = angle_{i-1} * s, all float32."""
    s = F32(math.pow(theta, -2.0 / rd))
    ang = np.empty((len(positions), rd // 2), dtype=F32)
    a = positions.astype(F32)
    for i in range(rd // 2):
        ang[:, i] = a
        a = a * s  # float32 * float32 -> float32, rounded once
    if sc:
        ang = ang / llama3_divisor(inv_freq64(rd, theta), sc).astype(F32)[None, :]
    assert ang.dtype == F32
    return ang


def angles_hf_f32(positions, rd, theta, sc):
    """HF style: float32(pos) * float32(inv_freq), the frequencies themselves
    float32 (llama3 corrected in float32 from them)."""
    inv = inv_freq64(rd, theta).astype(F32)
    if sc:
        inv = (inv / llama3_divisor(inv.astype(np.float64), sc).astype(F32)).astype(F32)
    return positions.astype(F32)[:, None] * inv[None, :]


def angles_exact(positions, rd, theta, sc):
    inv = inv_freq64(rd, theta)
    if sc:
        inv = inv / llama3_divisor(inv, sc)
    return positions.astype(np.float64)[:, None] * inv[None, :]


# ---- the rotation -----------------------------------------------------------------


def rotate(x, ang, hd, rd, layout, dtype):
    """Rotates the first rd dims of each hd-wide head of x by ang [T, rd/2], in dtype."""
    T, width = x.shape
    cos = libm(math.cos, ang).astype(dtype)[:, None, :]
    sin = libm(math.sin, ang).astype(dtype)[:, None, :]
    xh = x.astype(dtype).reshape(T, width // hd, hd)
    out = xh.copy()  # dims past rd pass through
    if layout == "neox":  # pairs (x[i], x[i + rd/2]) inside the rotary dims
        ia, ib = np.arange(rd // 2), np.arange(rd // 2) + rd // 2
    else:  # "interleaved": pairs (x[2i], x[2i+1])
        ia, ib = np.arange(0, rd, 2), np.arange(1, rd, 2)
    a, b = xh[..., ia], xh[..., ib]
    out[..., ia] = a * cos - b * sin
    out[..., ib] = b * cos + a * sin
    assert out.dtype == dtype
    return out.reshape(T, width)


# ---- the cases ----------------------------------------------------------------------

# Contiguous blocks of 3 positions around these, and two mixed sets.
ANCHORS = {"p0": 0, "p4096": 4095, "p32767": 32766, "p65535": 65534, "p131071": 131070}
MIXED = {"mixed-a": [1, 255, 4095, 8191, 16383, 31999], "mixed-b": [0, 1, 2, 32767, 131071]}
BLOCK = 3
ROW = 128  # floats per row: 2 heads of 64 or 1 of 128, to keep the files small


def heads_of(hd):
    return ROW // hd


def case_list():
    """(file stem, case name, layout, head_dim, rotary_dim, theta, positions, llama3 scaling or None),
    in a fixed order."""
    cases = []
    for layout in ("neox", "interleaved"):
        stem = f"rope-f32-recurrence-{layout}"
        # head_dim as the models with that theta: TinyLlama (HF, neox) or Llama 2
        # (GGUF, interleaved), Llama 3, Qwen3.
        hd_1e4 = 64 if layout == "neox" else 128
        for theta, tname, hd in ((1e4, "1e4", hd_1e4), (5e5, "5e5", 128), (1e6, "1e6", 128)):
            for aname, start in ANCHORS.items():
                if layout == "interleaved" and start < 8192:
                    continue  # the mixed sets hold 0, 1, 2 and 4095; the pairing does not change the angles
                cases.append((stem, f"{layout}_theta{tname}_{aname}", layout, hd, 0, theta,
                              np.arange(start, start + BLOCK, dtype=np.int64), None))
            for mname, pos in MIXED.items():
                cases.append((stem, f"{layout}_theta{tname}_{mname}", layout, hd, 0, theta,
                              np.array(pos, dtype=np.int64), None))
    stem = "rope-f32-recurrence-partial-llama3"
    for layout in ("neox", "interleaved"):
        # Partial rotary: half of a 64-dim head rotates (d = 32 in the recurrence).
        for name, pos in (("p32767", np.arange(32766, 32769)), ("p131071", np.arange(131070, 131073)),
                          ("mixed-a", MIXED["mixed-a"]), ("mixed-b", MIXED["mixed-b"])):
            cases.append((stem, f"partial_{layout}_theta1e4_{name}", layout, 64, 32, 1e4,
                          np.array(pos, dtype=np.int64), None))
        # llama3 (Llama 3.1's numbers), theta 5e5, past the original 8192.
        for name, pos in (("p16384", np.arange(16383, 16386)), ("p65535", np.arange(65534, 65537)),
                          ("p131071", np.arange(131070, 131073)), ("mixed", [8193, 12000, 32767, 65535, 131071])):
            cases.append((stem, f"llama3_{layout}_theta5e5_{name}", layout, 128, 0, 5e5,
                          np.array(pos, dtype=np.int64), LLAMA3))
    return cases


def rd_of(hd, rotary_dim):
    return rotary_dim or hd


def build(rng):
    """{stem: [(name, attrs, cfg, x, positions, out_f32, analysis rows)]}."""
    files = {}
    for stem, name, layout, hd, rotary_dim, theta, pos, sc in case_list():
        rd = rd_of(hd, rotary_dim)
        x = rng.standard_normal((len(pos), heads_of(hd) * hd)).astype(F32)
        out = rotate(x, angles_recurrence(pos, rd, theta, sc), hd, rd, layout, F32)
        cfg = {"head_dim": hd, "rope_layout": layout, "rope_theta": float(theta)}
        if rotary_dim:
            cfg["rotary_dim"] = rotary_dim
        if sc:
            cfg.update(sc)
        what = f"rope {layout}, theta {theta:g}, {heads_of(hd)} head(s) of {hd}" + (f", rotary_dim {rotary_dim}" if rotary_dim else "") + (
            ", llama3 scaling (factor 8, low 1, high 4, original 8192)" if sc else "")
        desc = f"{what}, positions {','.join(str(p) for p in pos)}: float32 recurrence angle_i = angle_(i-1) * float32(theta^(-2/d))"
        files.setdefault(stem, []).append((name, desc, cfg, x, pos, out, (layout, hd, rd, theta, sc)))
    return files


def write_file(path, cases):
    """Writes atomically: a temporary file in the same directory, then rename.

    HDF5 stamps every object header with its creation time unless told not to
    (h5py does so only for datasets), so the file and every group are created
    here with time tracking off: the bytes then depend on the contents alone.
    The format is HDF5 1.8's (as conform's own writer): compact groups, under
    2 KB of overhead per case where the 1.0 format takes 6 KB."""
    fd, tmp = tempfile.mkstemp(prefix=".rope_f32_", suffix=".h5", dir=os.path.dirname(path) or ".")
    os.close(fd)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)  # the root group
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V110)
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)

    def group(parent, name):
        return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))

    try:
        with h5py.File(h5py.h5f.create(tmp.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)) as f:
            f.attrs["conform_schema"] = "conform-fixture/1"
            for name, desc, cfg, x, pos, out, _ in cases:
                g = group(f, name)
                g.attrs["op"] = "rope"
                g.attrs["producer"] = PRODUCER
                g.attrs["description"] = desc
                c = group(g, "config")
                for key, value in cfg.items():
                    c.attrs[key] = np.int64(value) if isinstance(value, int) else value
                i = group(g, "inputs")
                i.create_dataset("x", data=x, track_times=False)
                i.create_dataset("positions", data=pos, track_times=False)
                # float32, as produced: this is the producer's answer, not a float64 truth.
                group(g, "expected").create_dataset("out", data=out, track_times=False)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---- analysis: the legitimate float32 error, per row ---------------------------------


def analyze(files):
    print("max |out - float64 exact| per row (x ~ N(0,1)); rec = this recurrence, hf = float32(p) * float32(inv_freq);")
    print("angle err = max |angle - exact angle| (rad) over pairs, and the pair index where it is largest\n")
    print(f"{'case':<40} {'pos':>7} {'rec out':>9} {'hf out':>9} {'rec angle':>9} {'@i':>3} {'hf angle':>9} {'@i':>3} {'rec-hf out':>10}")
    for stem, cases in files.items():
        for name, _, _, x, pos, out, (layout, hd, rd, theta, sc) in cases:
            ex_ang = angles_exact(pos, rd, theta, sc)
            rec_ang = angles_recurrence(pos, rd, theta, sc).astype(np.float64)
            hf_ang = angles_hf_f32(pos, rd, theta, sc).astype(np.float64)
            exact = rotate(x.astype(np.float64), ex_ang, hd, rd, layout, np.float64)
            hf = rotate(x, angles_hf_f32(pos, rd, theta, sc), hd, rd, layout, F32).astype(np.float64)
            rec = out.astype(np.float64)
            for t, p in enumerate(pos):
                ea, eh = np.abs(rec_ang[t] - ex_ang[t]), np.abs(hf_ang[t] - ex_ang[t])
                print(f"{name:<40} {p:>7} {np.abs(rec[t] - exact[t]).max():9.2e} {np.abs(hf[t] - exact[t]).max():9.2e} "
                      f"{ea.max():9.2e} {ea.argmax():>3} {eh.max():9.2e} {eh.argmax():>3} {np.abs(rec[t] - hf[t]).max():10.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"),
                    help="directory for the rope-f32-recurrence-*.h5 files (default: the repo's fixtures/)")
    ap.add_argument("--analyze", action="store_true", help="print the float32 error per row instead of writing")
    args = ap.parse_args()
    if not args.analyze and not os.path.isdir(args.out):
        print(f"rope_f32_fixtures.py: {args.out}: --out: not a directory", file=sys.stderr)
        return 2
    files = build(np.random.default_rng(20240614))
    if args.analyze:
        analyze(files)
        return 0
    for stem, cases in files.items():
        path = os.path.join(args.out, stem + ".h5")
        write_file(path, cases)
        print(f"wrote {os.path.normpath(path)}: {len(cases)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())

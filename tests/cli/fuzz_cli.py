#!/usr/bin/python3
"""The command line fuzzed: structure-aware mutations of every input kind
conform reads, each run through the real `conform` binary under a timeout
and an address-space cap (docs/inputs.md).

    fuzz_cli.py --conform BIN --src DIR --make-checkpoints BIN [--runs N] [--seed S] [--keep DIR]

--make-checkpoints: the weights_checkpoints test binary, which writes the
tiny checkpoints the GGUF and safetensors mutations start from. A run fails on a signal, a timeout, an exit 70
(conform blaming itself), or, for a mutation that makes its input invalid
(a declared size past every bound, a wrong type where a number is read,
nesting past any file), any exit but 2; every other run may exit 0, 1 or 2.
Each failure is printed with its command and kept (--keep) to replay. The
CI runs a fixed-seed sample (ctest fuzz.cli); the long run is
`ctest -C slow -R fuzz.cli.long` or this script with --runs 3000.
"""
import argparse
import json
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 60
ADDRESS_SPACE = 8 << 30  # the cap: a run that needs more is a bound missing

HUGE = [2**62, 2**63 - 1, 2**40, 2**32, 2**31, -1, 0]
NOT_NUMBERS = ["x", [], {}, None, True, "1e9", [[[[1]]]]]


def deep(n=100_000):
    return "[" * n + "]" * n


# ---- config.json --------------------------------------------------------------------------

# Fields conform reads as sizes or numbers: a hostile value there must be refused.
SIZE_KEYS = ["hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
             "num_hidden_layers", "vocab_size", "max_position_embeddings", "head_dim"]
NUMBER_KEYS = ["rms_norm_eps", "rope_theta"]


def mutate_config(rng, cfg):
    """(text, must_refuse, what)"""
    c = dict(cfg)
    kind = rng.randrange(6)
    if kind == 0:
        k = rng.choice(SIZE_KEYS)
        # Past every bound (docs/inputs.md), or not positive; a context length may be 2^40.
        v = rng.choice([2**62, 2**63 - 1, -1, 0] + ([] if k == "max_position_embeddings" else [2**32, 2**31]))
        c[k] = v
        return json.dumps(c), True, f"{k} = {v}"
    if kind == 1:
        k = rng.choice(SIZE_KEYS + NUMBER_KEYS)
        v = rng.choice(NOT_NUMBERS)
        c[k] = v
        # null takes the default where the field has one; the rest are refused
        return json.dumps(c), v is not None, f"{k} = {json.dumps(v)}"
    if kind == 2:
        k = rng.choice(list(c) + ["rope_scaling", "architectures", "model_type"])
        text = json.dumps(c)[:-1] + f', "{k}": {deep(rng.choice([100, 10_000, 100_000]))}}}'
        return text, True, f"{k} nested deep"
    if kind == 3:
        k = rng.choice(["model_type", "architectures", "hidden_act", "rope_scaling"])
        c[k] = "x" * rng.choice([300, 20_000_000]) if k != "architectures" else ["x" * 20_000_000]
        return json.dumps(c), True, f"{k} a long string"
    if kind == 4:
        text = json.dumps(c)
        cut = rng.randrange(len(text))
        return text[:cut], True, f"truncated at {cut}"
    k = rng.choice(list(c))
    del c[k]
    return json.dumps(c), False, f"{k} removed"


# ---- GGUF ---------------------------------------------------------------------------------

SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.i)[0]
        self.i += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.b[self.i:self.i + n]
        self.i += n
        return s

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        raise ValueError(f"type {t}")


def write_value(t, v):
    if t in SCALAR:
        return struct.pack(SCALAR[t], v)
    if t == 8:
        return struct.pack("<Q", len(v)) + v
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(write_value(et, x) for x in items)


def parse_gguf(b):
    r = Reader(b)
    magic, version, nt, nkv = r.take("<4s"), r.take("<I"), r.take("<Q"), r.take("<Q")
    kvs = []
    for _ in range(nkv):
        k = r.string()
        t = r.take("<I")
        kvs.append([k, t, r.value(t)])
    tensors = []
    for _ in range(nt):
        name = r.string()
        nd = r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        tensors.append([name, dims, r.take("<I"), r.take("<Q")])
    align = next((v for k, t, v in kvs if k == b"general.alignment"), 32)
    start = (r.i + align - 1) // align * align
    return version, kvs, tensors, b[start:], align


def write_gguf(version, kvs, tensors, data, align, nt=None, nkv=None):
    b = bytearray(b"GGUF") + struct.pack("<IQQ", version, len(tensors) if nt is None else nt,
                                         len(kvs) if nkv is None else nkv)
    for k, t, v in kvs:
        b += struct.pack("<Q", len(k)) + k + struct.pack("<I", t) + write_value(t, v)
    for name, dims, typ, off in tensors:
        b += struct.pack("<Q", len(name)) + name + struct.pack("<I", len(dims))
        b += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", typ, off)
    b += b"\0" * ((-len(b)) % max(int(align), 1) if isinstance(align, int) and align > 0 else 0)
    return bytes(b + data)


GGUF_SIZES = [b"block_count", b"embedding_length", b"feed_forward_length", b"attention.head_count",
              b"attention.head_count_kv", b"context_length"]


def mutate_gguf(rng, blob):
    version, kvs, tensors, data, align = parse_gguf(blob)
    kind = rng.randrange(6)
    if kind == 0:  # a declared size
        kv = rng.choice([kv for kv in kvs if any(kv[0].endswith(s) for s in GGUF_SIZES)])
        values = {4: [2**32 - 1, 2**31, 0], 5: [-1, 0, 2**31 - 1], 10: [2**62, 0], 11: [-1, 2**62]}
        kv[2] = rng.choice(values.get(kv[1], [0]))
        past = kv[2] <= 0 or kv[2] > (2**40 if kv[0].endswith(b"context_length") else 2**20)
        return write_gguf(version, kvs, tensors, data, align), past, f"{kv[0].decode()} = {kv[2]}"
    if kind == 1:  # a tensor's dims, type or offset
        t = rng.choice(tensors)
        field = rng.randrange(4)
        if field == 0:
            t[1] = [rng.choice([2**62, 2**32, 0, 1 << 20])] + t[1][1:]
        elif field == 1:
            t[1] = t[1] * 3
        elif field == 2:
            t[2] = rng.choice([999, 2**31])
        else:
            t[3] = rng.choice([2**62, len(data) + 1])
        return write_gguf(version, kvs, tensors, data, align), True, f"tensor {t[0].decode()} field {field}"
    if kind == 2:  # counts in the header past the file
        return write_gguf(version, kvs, tensors, data, align, nt=rng.choice([2**62, len(tensors) + 1]),
                          nkv=rng.choice([2**62, len(kvs) + 1])), True, "header counts"
    if kind == 3:  # a key's type changed, its bytes kept
        kv = rng.choice(kvs)
        body = write_gguf(version, kvs, tensors, data, align)
        i = body.find(struct.pack("<Q", len(kv[0])) + kv[0]) + 8 + len(kv[0])
        new_type = rng.choice([9, 8, 13, 2**31])
        return body[:i] + struct.pack("<I", new_type) + body[i + 4:], False, f"{kv[0].decode()} type {new_type}"
    if kind == 4:  # an array nested past the reader's bound, or counting past the file
        nested = rng.random() < 0.5
        kv = [b"general.hostile", 9, (9, [(9, [(9, [(9, [(9, [(4, [1])])])])])])] if nested else \
             [b"general.hostile", 9, (4, [1] * 3)]
        body = write_gguf(version, kvs + [kv], tensors, data, align)
        if not nested:
            i = body.find(b"general.hostile") + len(b"general.hostile") + 8
            body = body[:i] + struct.pack("<Q", 2**61) + body[i + 8:]
        return body, True, "a hostile array"
    cut = rng.randrange(len(blob))
    return blob[:cut], True, f"truncated at {cut}"


# ---- safetensors --------------------------------------------------------------------------

def mutate_safetensors(rng, blob):
    n = struct.unpack_from("<Q", blob)[0]
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    names = [k for k in header if k != "__metadata__"]
    k = rng.choice(names)
    kind = rng.randrange(5)
    must = True
    if kind == 0:
        header[k]["shape"] = rng.choice([[2**62], [2**31, 2**31, 4], [-1, 4], [0], ["x"]])
    elif kind == 1:
        header[k]["data_offsets"] = rng.choice([[0, 2**62], [8, 4], [0, len(data) + 4], [-1, 3], [0]])
    elif kind == 2:
        header[k]["dtype"] = rng.choice(["F128", "", 7, None])
    elif kind == 3:
        text = json.dumps(header)[:-1] + ', "__metadata__": {"x": ' + deep(100_000) + "}}"
        hb = text.encode()
        return struct.pack("<Q", len(hb)) + hb + data, True, "metadata nested deep"
    else:
        return struct.pack("<Q", rng.choice([2**62, len(blob), n + 1])) + blob[8:], True, "header length"
    hb = json.dumps(header).encode()
    return struct.pack("<Q", len(hb)) + hb + data, must, f"{k} mutation {kind}"


# ---- case ids and flags -------------------------------------------------------------------

def mutate_id(rng, case_id):
    op, fields = case_id[:-1].split("(", 1)
    items = fields.split(",")
    i = rng.randrange(len(items))
    k, _, v = items[i].partition("=")
    kind = rng.randrange(6)
    if kind == 0:
        items.insert(i, items[i])
        what = "duplicated"
    elif kind == 1:
        items[i] = f"{k}={v}junk"
        what = "junk after a value"
    elif kind == 2:
        items[i] = f"{k}={rng.choice(['9223372036854775807', '-5', 'nan', 'inf', '1e400', ''])}"
        what = "a value out of range"
        if k == "seed" and items[i].endswith("807"):
            return f"{op}({','.join(items)})", False, "the largest seed"
    elif kind == 3:
        del items[i]
        # Some fields are written only when not their default (rd, outliers): valid without.
        return f"{op}({','.join(items)})", False, "a field removed"
    elif kind == 4:
        items[i] = f"{k}x={v}"
        what = "an unknown field"
    else:
        return f"{op}({','.join(items)}", True, "unclosed"
    return f"{op}({','.join(items)})", True, what


FLAG_VALUES = {
    "--cases": ["-1", "9223372036854775807", "x", "1e3"],
    "--seed": ["-1", "x", "18446744073709551616", ""],
    "--shard": ["5/3", "0/0", "-1/2", "1/9223372036854775807", "x"],
    "--threads": ["1000000", "-1", "x"],
    "--shrink-time": ["nan", "-1", "x"],
    "--dtype": ["f8", "", "f32x"],
    "--params": ["(", "[z-a]", "\\", "a{2,1}", "(?<=a)", "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))"],
    "--op": [",", "nope", "x" * 10000],
    "--impl": ["nope", "x" * 10000],
    "--report": ["pdf", "json,pdf"],
}


# ---- running ------------------------------------------------------------------------------

def cap():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(conform, args, cwd):
    t0 = time.monotonic()
    try:
        p = subprocess.run([conform] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT_S, preexec_fn=cap)
    except subprocess.TimeoutExpired:
        return None, b"", time.monotonic() - t0
    return p.returncode, p.stdout[-2000:] + p.stderr[-2000:], time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--conform", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--make-checkpoints", required=True)
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default="")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = tempfile.mkdtemp(prefix="fuzz-cli-")
    checkpoints = os.path.join(work, "checkpoints")
    subprocess.run([a.make_checkpoints, checkpoints], check=True, stdout=subprocess.DEVNULL)
    cfg = json.load(open(os.path.join(a.src, "fixtures/configs/llama3.1-8b.json")))
    gguf = open(os.path.join(checkpoints, "llama.gguf"), "rb").read()
    st_dir = os.path.join(checkpoints, "llama-hf")
    st = open(os.path.join(st_dir, "model.safetensors"), "rb").read()
    st_cfg = json.load(open(os.path.join(st_dir, "config.json")))
    fixtures = sorted(f for f in os.listdir(os.path.join(a.src, "fixtures")) if f.endswith(".h5")
                      and os.path.getsize(os.path.join(a.src, "fixtures", f)) < 200_000)
    ids = ["rope(T=1,n=1,hd=4,layout=neox,theta=10000,rd=2,pos=32721,mag=30,outliers=3,seed=40714712)",
           "attention(T=1,S=1,H=3,KV=1,hd=6,qpos=4016,kpos=4016,softcap=3,mag=1,outliers=0,seed=6082169)",
           "swiglu(T=3,D=512,F=18,act=gelu_tanh,mag=1,outliers=0,seed=4579724)"]
    gate = ["--impl", "scalar", "--cases", "1", "--no-default-fixtures", "--out", "reports", "--diagnose", "none"]
    kinds = ["config", "gguf", "safetensors", "hf-config", "fixture", "case", "flag"]
    failures, by_kind, t_all = [], {}, time.monotonic()
    for n in range(a.runs):
        d = os.path.join(work, str(n))
        os.makedirs(d)
        kind = kinds[n % len(kinds)]
        must = False
        if kind == "config":
            text, must, what = mutate_config(rng, cfg)
            open(os.path.join(d, "config.json"), "w").write(text)
            args = ["anatomy", "--config", "config.json"] if rng.random() < 0.5 else \
                gate + ["--op", "rmsnorm", "--config", "config.json"]
        elif kind == "gguf":
            blob, must, what = mutate_gguf(rng, gguf)
            open(os.path.join(d, "m.gguf"), "wb").write(blob)
            args = gate + ["--op", "rmsnorm", "--weights", "m.gguf"]
        elif kind == "safetensors":
            blob, must, what = mutate_safetensors(rng, st)
            os.makedirs(os.path.join(d, "ck"))
            open(os.path.join(d, "ck/model.safetensors"), "wb").write(blob)
            json.dump(st_cfg, open(os.path.join(d, "ck/config.json"), "w"))
            args = gate + ["--op", "rmsnorm", "--weights", "ck"]
        elif kind == "hf-config":
            text, must, what = mutate_config(rng, st_cfg)
            shutil.copytree(st_dir, os.path.join(d, "ck"))
            open(os.path.join(d, "ck/config.json"), "w").write(text)
            # A checkpoint's own sizes disagree with a changed config, so even a
            # benign-looking edit of a size is refused; a removed key may be defaulted.
            args = gate + ["--op", "rmsnorm", "--weights", "ck"]
        elif kind == "fixture":
            name = rng.choice(fixtures)
            blob = bytearray(open(os.path.join(a.src, "fixtures", name), "rb").read())
            for _ in range(rng.choice([1, 4, 32])):
                i = rng.randrange(len(blob))
                blob[i] = rng.randrange(256)
            if rng.random() < 0.2:
                blob = blob[:rng.randrange(len(blob))]
            open(os.path.join(d, name), "wb").write(bytes(blob))
            what = f"{name} bytes changed"
            args = ["--impl", "scalar", "--cases", "0", "--no-default-fixtures", "--out", "reports",
                    "--diagnose", "none", "--fixtures", name]
        elif kind == "case":
            cid, must, what = mutate_id(rng, rng.choice(ids))
            args = ["--impl", "scalar", "--no-default-fixtures", "--out", "reports", "--case", cid]
        else:
            flag = rng.choice(sorted(FLAG_VALUES))
            value = rng.choice(FLAG_VALUES[flag])
            must, what = True, f"{flag} {value[:40]!r}"
            args = gate + ["--op", "rmsnorm", flag, value]
        rc, out, secs = run(a.conform, args, d)
        by_kind.setdefault(kind, [0, 0.0])
        by_kind[kind][0] += 1
        by_kind[kind][1] += secs
        bad = None
        if rc is None:
            bad = f"hung past {TIMEOUT_S} s"
        elif rc < 0:
            bad = f"killed by {signal.Signals(-rc).name}"
        elif rc == 70:
            bad = "exit 70 (an internal error)"
        elif rc not in (0, 1, 2):
            bad = f"exit {rc}"
        elif must and rc != 2:
            bad = f"exit {rc} on an input it must refuse"
        elif rc == 2 and len(out) >= 4000:
            bad = "a refusal message past 2000 characters"
        if bad:
            failures.append((n, kind, what, bad, args, out))
            print(f"FAIL run {n} ({kind}: {what}): {bad}\n  conform {' '.join(x[:80] for x in args)}\n  "
                  + out.decode(errors="replace")[-600:].replace("\n", "\n  "))
            if a.keep:
                shutil.copytree(d, os.path.join(a.keep, f"run-{n}"), dirs_exist_ok=True)
        shutil.rmtree(d, ignore_errors=True)
    total = time.monotonic() - t_all
    print(f"fuzz_cli: {a.runs} runs in {total:.0f} s ({a.runs / total:.2f} runs/s), seed {a.seed}; "
          + ", ".join(f"{k} {c} ({s / c:.1f} s each)" for k, (c, s) in sorted(by_kind.items())))
    print(f"fuzz_cli: {len(failures)} failures")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The anatomy page in a real browser, against the command.

Drives headless Chromium over its DevTools protocol (--remote-debugging-pipe:
NUL-terminated JSON on fds 3 and 4; the standard library only). For each
scenario it moves the page's controls as a user would (a value set, then the
input/change event the browser sends), reads every number the page shows
(each <span data-k> carries its exact value in data-v beside the text), runs
`conform anatomy --json` with the same settings and compares: the value
exactly (both sides evaluate the same formula table in IEEE doubles), the text
as the command's formatting would print it. Any number on the page the test
does not know how to check is itself a failure. Screenshots go to --shots.

usage: anatomy_page.py --chrome PATH --conform PATH --page FILE --shots DIR
                       [--config-page FILE] [--readme-shot FILE] [--expect-mismatch]
--expect-mismatch: the page was tampered with; succeed only if a mismatch is found.
Exit 0 when everything matches, 1 with every mismatch listed.
"""
import argparse
import base64
import json
import os
import select
import shlex
import subprocess
import sys
import tempfile
import time


# ---- the DevTools protocol over a pipe ---------------------------------------------

class Browser:
    def __init__(self, chrome, profile):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds():  # Chromium reads commands on fd 3 and answers on fd 4
            # Through fresh copies: a pipe end may itself be fd 3 or 4, and
            # dup2 onto itself would leave it close-on-exec.
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.proc = subprocess.Popen(
            [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--user-data-dir=" + profile, "--hide-scrollbars", "--no-first-run", "--mute-audio",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(os.path.join(profile, "chrome.log"), "w"),
            preexec_fn=fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buf = b""
        self.next_id = 0
        self.events = []
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = [t for t in targets if t["type"] == "page"]
        target = page[0]["targetId"] if page else self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _read(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError("chromium did not answer")
            r, _, _ = select.select([self.from_chrome], [], [], left)
            if r:
                chunk = os.read(self.from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, timeout=60, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith(("Target.", "Browser.")):
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name, timeout=60):
        deadline = time.time() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == name:
                    return self.events.pop(i)
            self.events.append(self._read(deadline))

    def errors(self):
        out = []
        for e in self.events:
            if e.get("method") == "Runtime.exceptionThrown":
                d = e["params"]["exceptionDetails"]
                out.append(d.get("exception", {}).get("description") or d.get("text"))
            if e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] == "error":
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in e["params"]["args"]))
        return out

    def js(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"in the page: {r['exceptionDetails'].get('exception', {}).get('description')}\n{expression}")
        return r["result"].get("value")

    def load(self, path, width=1300, height=1000):
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.events.clear()
        self.call("Page.navigate", url="file://" + os.path.abspath(path))
        self.wait_event("Page.loadEventFired")
        if self.js("document.body.dataset.ready") != "1":
            raise RuntimeError(f"{path}: the page's script did not finish: {self.errors()}")

    def screenshot(self, path, full=True, height=None):
        if full:
            h = height or self.js("Math.ceil(document.documentElement.scrollHeight)")
            clip = {"x": 0, "y": 0, "width": 1300, "height": h, "scale": 1}
        else:
            clip = {"x": 0, "y": 0, "width": 1300, "height": height, "scale": 1}
        r = self.call("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(r["data"]))

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# ---- what the page shows ----------------------------------------------------------

def set_control(b, cid, value, event="input"):
    """A user's edit: the control's value, then the event the browser sends for it."""
    b.js(f"""(() => {{ const el = document.getElementById({json.dumps(cid)});
        if (!el) throw new Error('no control {cid}');
        el.value = {json.dumps(str(value))};
        el.dispatchEvent(new Event({json.dumps(event)}, {{bubbles: true}})); }})()""")


def set_kv(b, kv):
    divisors = [int(x) for x in b.js("document.getElementById('kv').dataset.divisors").split(",")]
    if kv not in divisors:
        raise RuntimeError(f"kv heads {kv} is not offered by the slider ({divisors})")
    set_control(b, "kv", divisors.index(kv))


def pick_preset(b, name):
    options = b.js("[...document.getElementById('preset').options].map(o => [o.value, o.textContent])")
    match = [v for v, label in options if label.split(" — ")[0] == name]
    if not match:
        raise RuntimeError(f"the preset picker has no {name}: {[l for _, l in options]}")
    set_control(b, "preset", match[0], "change")


def read_numbers(b):
    """Every number on the page: [key, exact value or None, text, format]."""
    return b.js("""[...document.querySelectorAll('[data-k]')].map(e =>
        [e.dataset.k, e.dataset.v === undefined ? null : e.dataset.v, e.textContent, e.dataset.f || null])""")


def state(b):
    return b.js("""(() => { const s = window.conformAnatomy.state; return {cfg: s.cfg, tokens: s.tokens,
        context: s.context, dtype: s.dtype, choice: s.choice, selected: s.selected, phase: s.phase,
        flag: window.conformAnatomy.choices[s.choice].flag, command: window.conformAnatomy.command()}; })()""")


# ---- the command's numbers, and its formatting ------------------------------------

def si(v, unit=""):
    prefixes = ["", "K", "M", "G", "T", "P"]
    p, x = 0, v
    while abs(x) >= 1000 and p < 5:
        x /= 1000
        p += 1
    sp = " " if unit else ""
    if p == 0 and x == int(x):
        return "%.0f%s%s" % (x, sp, unit)
    return "%.1f%s%s%s" % (x, sp, prefixes[p], unit)


def fmt(v, f):
    return {"si": lambda: si(v), "B": lambda: si(v, "B"), "f1": lambda: "%.1f" % v, "int": lambda: "%.0f" % v,
            "x": lambda: "%.0f×" % v, "pct0": lambda: "%.0f%%" % (100 * v),
            "pct1": lambda: ("+" if v >= 0 else "") + "%.1f%%" % (100 * v), "pct2": lambda: "%.2f%%" % (100 * v)}[f]()


SIZE_FLAGS = [("d_model", "--d-model"), ("n_heads", "--heads"), ("n_kv_heads", "--kv-heads"),
              ("head_dim", "--head-dim"), ("ffn_dim", "--ffn"), ("layers", "--layers")]


def run_cli(conform, args):
    r = subprocess.run([conform, "anatomy"] + args + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"conform anatomy {' '.join(args)} --json exited {r.returncode}: {r.stderr}")
    return json.loads(r.stdout)


def expected(conform, base_args, st):
    """What `conform anatomy --json` says for the page's settings: the values by the page's keys.

    The arguments are built here from the page's state (base: the preset or
    config the scenario picked; then every size, tokens, context, dtype), not
    taken from the page's own command line."""
    cfg = st["cfg"]
    sizes = []
    for field, flag in SIZE_FLAGS:
        sizes += [flag, str(cfg[field])]
    run = ["--tokens", str(st["tokens"]), "--context", str(st["context"]), "--dtype", st["dtype"]]
    a = run_cli(conform, base_args + sizes + run)
    mha_sizes = list(sizes)
    mha_sizes[mha_sizes.index("--kv-heads") + 1] = str(cfg["n_heads"])
    mha = run_cli(conform, base_args + mha_sizes + run)
    cmd = base_args + sizes + run

    v = {}
    ph = {p["phase"]: p for p in a["phases"]}
    mph = {p["phase"]: p for p in mha["phases"]}
    d, p = ph["decode"], ph["prefill"]
    es = a["bytes_per_element"]
    for phase, x in ph.items():
        for op in x["ops"]:
            for f in ("flops", "bytes", "intensity"):
                v[f"table.{phase}.op.{op['name']}.{f}"] = op[f]
            v[f"table.op.{op['name']}.params"] = op["params"]
        for part in ("layer", "model", "embedding", "lm_head"):
            for f in ("flops", "bytes", "intensity"):
                v[f"table.{phase}.{part}.{f}"] = x[part][f]
            v[f"table.{part}.params"] = x[part]["params"]
        v[f"{phase}.tokens"] = x["tokens"]
        v[f"{phase}.keys"] = x["tokens"] + x["context"]
        for f in ("flops", "bytes", "intensity"):
            v[f"{phase}.layer.{f}"] = x["layer"][f]
        v[f"{phase}.flops_per_token"] = x["flops_per_token"]
        v[f"{phase}.bytes_per_token"] = x["model"]["bytes"] / x["tokens"]
        v[f"{phase}.kv_cache_bytes"] = x["kv_cache_bytes"]
    v["decode.context"] = d["context"]
    kv = a["kv_cache"]
    v["kv.per_token_layer"] = kv["bytes_per_token_per_layer"]
    v["kv.per_token_layer_mha"] = kv["bytes_per_token_per_layer_full_mha"]
    v["kv.mha_ratio"] = kv["bytes_per_token_per_layer_full_mha"] / kv["bytes_per_token_per_layer"]
    v["kv.per_token_model"] = kv["bytes_per_token"]
    v["kv.per_token_model_mha"] = mha["kv_cache"]["bytes_per_token"]
    v["kv.prefill_bytes"] = kv["bytes_for_prefill"]
    v["kv.prefill_bytes_mha"] = mha["kv_cache"]["bytes_for_prefill"]
    v["kv.decode_bytes"] = d["kv_cache_bytes"]
    v["kv.decode_bytes_mha"] = mph["decode"]["kv_cache_bytes"]
    v["params.layer"] = d["layer"]["params"]
    v["params.layer_mha"] = mph["decode"]["layer"]["params"]
    v["params.mha_change"] = d["layer"]["params"] / mph["decode"]["layer"]["params"] - 1
    v["params.model"] = d["model"]["params"]
    v["params.embedding"] = d["embedding"]["params"]
    v["params.lm_head"] = d["lm_head"]["params"]
    v["params.with_embeddings"] = d["model"]["params"] + d["embedding"]["params"] + d["lm_head"]["params"]
    groups = {"attention": 0.0, "ffn": 0.0, "norm": 0.0}
    for op in d["ops"]:
        if op["group"] in groups:
            groups[op["group"]] += op["params"]
    for g, n in groups.items():
        v[f"params.{g}"] = n
        v[f"params.{g}_share"] = n / d["layer"]["params"]
    sweep = a["intensity_by_tokens"]
    v["prefill.layer.per_weight_byte"] = sweep[-1]["flops_per_weight_byte"]
    v["t1.per_weight_byte"] = sweep[0]["flops_per_weight_byte"] if sweep[0]["tokens"] == 1 else None
    for s in sweep:
        for f in ("layer_flops", "layer_bytes", "intensity", "flops_per_weight_byte"):
            v[f"sweep.{s['tokens']}.{f}"] = s[f]
    c = a["config"]
    v["layers"], v["kv_heads"], v["heads"] = c["layers"], c["n_kv_heads"], c["n_heads"]
    v["head_dim"], v["vocab"], v["es"] = c["head_dim"], c["vocab"], es
    # The op picked in the bars, in the phase picked.
    sel = next(op for op in ph[st["phase"]]["ops"] if op["name"] == st["selected"])
    for op in ph[st["phase"]]["ops"]:
        for f in ("flops", "bytes", "intensity"):
            v[f"bars.{op['name']}.{f}"] = op[f]
    for f in ("params", "flops", "bytes", "intensity"):
        v[f"detail.{f}"] = sel[f]
    v["detail.shape"] = "; ".join(
        f"{o['name']} [{', '.join('%.0f' % x for x in o['shape'])}]" for o in sel["outputs"])
    return v, a, cmd


def compare(b, conform, base_args, label, problems, checks):
    st = state(b)
    want, doc, cmd = expected(conform, base_args, st)
    seen = 0
    for key, val, text, f in read_numbers(b):
        if key == "ridge":
            continue
        if key == "detail.why":
            sel = want.get("detail.intensity")
            if sel is None or ("%.1f FLOP per byte" % sel) not in text or not ("-bound" in text or "bound:" in text):
                problems.append(f"{label}: detail.why: '{text}' does not state the op's intensity and bound")
            continue
        if key not in want:
            problems.append(f"{label}: the page shows '{key}' = {text!r}, which this test cannot check")
            continue
        exp = want[key]
        if key == "detail.shape":
            # "q [512, 2048] = [T, H·hd]": the numbers before each '=' are the command's shapes.
            shown = "; ".join(part.split(" = ")[0] for part in text.split("; "))
            if shown != exp:
                problems.append(f"{label}: detail.shape: page '{shown}', command '{exp}'")
            else:
                seen += 1
            continue
        if val is None:
            problems.append(f"{label}: {key}: no data-v on the page")
            continue
        if float(val) != float(exp):
            problems.append(f"{label}: {key}: page {val} ({text}), command {exp!r}  [conform anatomy {' '.join(cmd)} --json]")
        elif f and text != fmt(float(exp), f):
            problems.append(f"{label}: {key}: page shows {text!r}, the command's value {exp!r} prints as {fmt(float(exp), f)!r}")
        else:
            seen += 1
    # The page's own command line gives the same numbers.
    page_args = shlex.split(st["command"])[2:]
    page_args.remove("--json")
    mine = run_cli(conform, page_args)
    if mine["phases"] != doc["phases"] or mine["kv_cache"] != doc["kv_cache"]:
        problems.append(f"{label}: the page's command '{st['command']}' gives other numbers than {' '.join(cmd)}")
    checks.append((label, seen))
    return want, st


# ---- scenarios --------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chrome", required=True)
    ap.add_argument("--conform", required=True)
    ap.add_argument("--page", required=True, help="the page of --preset tinyllama-1.1b --kv-heads 8")
    ap.add_argument("--config-page", help="a page of --config FILE --with-ceilings")
    ap.add_argument("--config-file")
    ap.add_argument("--shots", required=True)
    ap.add_argument("--readme-shot")
    ap.add_argument("--expect-mismatch", action="store_true")
    o = ap.parse_args()
    os.makedirs(o.shots, exist_ok=True)
    problems, checks = [], []
    profile = tempfile.mkdtemp(prefix="conform-anatomy-chrome-")
    b = Browser(o.chrome, profile)
    try:
        tiny = ["--preset", "tinyllama-1.1b"]
        b.load(o.page)
        # 1. As written: the chapter's numbers, equal to the command's.
        want, st = compare(b, o.conform, tiny, "as written", problems, checks)
        if not o.expect_mismatch:
            shown = {k: t for k, _, t, _ in read_numbers(b)}
            for key, text in [("params.layer", "45.1M"), ("params.model", "992.0M"), ("table.decode.layer.flops", "90.2M"),
                              ("decode.flops_per_token", "2.0G")]:
                if shown.get(key) != text:
                    problems.append(f"as written: {key} shows {shown.get(key)!r}, the chapter's {text}")
            kvs = [t for k, _, t, _ in read_numbers(b) if k in ("kv.per_token_layer", "kv.per_token_layer_mha")]
            if "2048" not in kvs or "8192" not in kvs:
                problems.append(f"as written: KV per token per layer shows {kvs}, expected 2048 and 8192")
        b.screenshot(os.path.join(o.shots, "anatomy-tinyllama-kv8.png"))
        if o.readme_shot:
            b.screenshot(o.readme_shot, full=False, height=940)

        # 2. kv heads dragged 32 -> 1: the cache falls 32x, the parameters barely move.
        ds = [int(x) for x in b.js("document.getElementById('kv').dataset.divisors").split(",")]
        cache, params = [], []
        for kv in sorted(ds, reverse=True):
            set_kv(b, kv)
            n = {k: float(v) for k, v, _, _ in read_numbers(b) if v is not None}
            cache.append(n["kv.per_token_layer"])
            params.append(n["params.layer"])
            if kv in (32, 1):
                compare(b, o.conform, tiny, f"kv heads {kv}", problems, checks)
        if not o.expect_mismatch:
            if cache[0] / cache[-1] != 32 or any(x <= y for x, y in zip(cache, cache[1:])):
                problems.append(f"kv 32 -> 1: the cache per token went {cache}, expected a 32x fall")
            if not (0.7 < params[-1] / params[0] < 1):
                problems.append(f"kv 32 -> 1: parameters per layer went {params[0]} -> {params[-1]}: expected to barely move")
        b.screenshot(os.path.join(o.shots, "anatomy-kv1.png"))

        # 3. Sequence length dragged 1 -> 512: FLOP per weight byte from ~1 into the hundreds.
        set_kv(b, 4)
        set_control(b, "tokens_range", 0)
        w1 = compare(b, o.conform, tiny, "T = 1", problems, checks)[0]["prefill.layer.per_weight_byte"]
        for r in range(100, 901, 100):  # 2, 4, ..., 512, as a drag passes them
            set_control(b, "tokens_range", r)
        st = state(b)
        if st["tokens"] != 512:
            problems.append(f"the sequence slider at 900 gives T = {st['tokens']}, expected 512")
        w512 = compare(b, o.conform, tiny, "T = 512", problems, checks)[0]["prefill.layer.per_weight_byte"]
        if not o.expect_mismatch and not (0.9 < w1 < 1.1 and w512 > 300):
            problems.append(f"T 1 -> 512: FLOP per weight byte went {w1} -> {w512}, expected ~1 -> hundreds")
        b.screenshot(os.path.join(o.shots, "anatomy-T512.png"))

        # 4. Other controls: d_model, the cached context, the dtype, decode bars, another op clicked.
        set_control(b, "d_model", 1024)
        set_control(b, "context", 1000)
        set_control(b, "dtype", "f32", "change")
        set_control(b, "tokens", 100)
        b.js("document.querySelector('input[name=phase][value=decode]').click()")
        b.js("document.querySelector('tr[data-op=attention]').click()")
        compare(b, o.conform, tiny, "d_model 1024, context 1000, f32, decode, attention", problems, checks)

        # 5. Another preset (QK-norm, tied embeddings, head_dim != D/H), then its head_dim.
        pick_preset(b, "qwen3-0.6b")
        b.js("document.querySelector('tr[data-op=qk_norm]').click()")
        compare(b, o.conform, ["--preset", "qwen3-0.6b"], "preset qwen3-0.6b", problems, checks)
        set_control(b, "head_dim", 64)
        set_control(b, "dtype", "bf16", "change")
        set_control(b, "context_range", 1201)  # 2^12 = 4096 cached
        compare(b, o.conform, ["--preset", "qwen3-0.6b"], "qwen3-0.6b head_dim 64 bf16 context 4096", problems, checks)
        b.screenshot(os.path.join(o.shots, "anatomy-qwen3.png"))
        pick_preset(b, "llama3-8b")
        set_control(b, "n_heads", 24)  # its 8 kv heads still divide it
        set_control(b, "tokens", 32768)
        compare(b, o.conform, ["--preset", "llama3-8b"], "llama3-8b 24 heads T 32768", problems, checks)

        # 6. A config.json, with the machine's ceilings measured.
        if o.config_page:
            b.load(o.config_page)
            compare(b, o.conform, ["--config", o.config_file], "config file", problems, checks)
            label = b.js("document.getElementById('ridge-label').textContent")
            if "measured on this machine" not in label:
                problems.append(f"config page: the ridge is not the measured one: {label}")
            b.screenshot(os.path.join(o.shots, "anatomy-config.png"))
        problems += [f"script error: {e}" for e in b.errors()]
    finally:
        b.close()

    for label, n in checks:
        print(f"anatomy_page: {label}: {n} numbers equal to conform anatomy --json")
    if o.expect_mismatch:
        if problems:
            print(f"anatomy_page: the tampered page was caught ({len(problems)} mismatches; first: {problems[0]})")
            return 0
        print("FAIL: anatomy_page: the tampered page passed: this comparison cannot fail")
        return 1
    if problems:
        print(f"FAIL: anatomy_page: {len(problems)} mismatches between the page and the command:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"anatomy_page: ok, {sum(n for _, n in checks)} numbers in {len(checks)} states; screenshots in {o.shots}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

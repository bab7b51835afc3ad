#!/usr/bin/env python3
"""The layering of ARCHITECTURE.md, checked: no folder includes a folder of a
higher layer (or another folder of its own layer). Reads every #include "..."
under impls/ and harness/; prints each violation as FILE:LINE and exits 1.
Standard library only: runs wherever python3 does."""
import os
import re
import sys

# Lower first. A folder may include its own files and those of lower layers.
LAYERS = [
    ["impls/include/conform"],                                  # the contract
    ["impls/scalar", "impls/cuda/emu"],                         # the plain loops (others reuse their checks); CUDA on the CPU
    ["impls/mutants", "impls/simd", "impls/cuda", "impls/plugin_example"],
    ["impls"],                                                  # the registry
    ["harness/core"],
    ["harness/compare", "harness/config", "harness/gen", "harness/model", "harness/reference"],
    ["harness/h5", "harness/judge", "harness/weights"],
    ["harness/diagnose"],
    ["harness/report", "harness/plugin"],
    ["harness/worker"],
    ["harness/run"],
    ["harness/cli"],
]
RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def resolve(root, src_dir, inc):
    """The folder an include names, trying the include paths the build uses."""
    for base in (src_dir, "harness", "impls", "impls/include"):
        path = os.path.normpath(os.path.join(base, inc))
        if os.path.exists(os.path.join(root, path)):
            return os.path.dirname(path)
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad, checked = [], 0
    for top in ("impls", "harness"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            folder = os.path.relpath(dirpath, root)
            if folder not in RANK:
                if any(f.endswith((".h", ".cpp", ".cu", ".cuh", ".c")) for f in files):
                    bad.append(f"{folder}: a source folder missing from the layer table (scripts/check-layering.py)")
                continue
            for name in files:
                if not name.endswith((".h", ".cpp", ".cu", ".cuh", ".c")):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        target = resolve(root, folder, m.group(1))
                        if target is None or target == folder:
                            continue
                        if target not in RANK:
                            bad.append(f"{folder}/{name}:{lineno}: includes {m.group(1)} from {target}, "
                                       "a folder missing from the layer table")
                        elif RANK[target] >= RANK[folder]:
                            bad.append(f"{folder}/{name}:{lineno}: includes {m.group(1)}: {folder} (layer "
                                       f"{RANK[folder]}) must not depend on {target} (layer {RANK[target]})")
    for b in bad:
        print(b)
    print(f"layering: {checked} includes checked, {len(bad)} violation{'s' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

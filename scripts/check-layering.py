#!/usr/bin/env python3
"""The layering of ARCHITECTURE.md, checked twice: in the includes and in the
build. No folder includes a folder of a higher layer (or another folder of
its own layer); every harness folder is one library (conform_<folder>; cli
and conform-worker's main are executables) whose sources are that folder's;
a library links only libraries of lower layers; and a folder that includes
another's header links that folder's library (directly or through another).
Reads every #include "..." under impls/ and harness/ and every add_library,
add_executable and target_link_libraries of their CMakeLists.txt; prints each
violation (FILE:LINE for an include) and exits 1.
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
    ["harness/compare", "harness/config", "harness/gen", "harness/reference"],
    ["harness/h5", "harness/judge", "harness/model", "harness/weights"],  # the model: a config's layers
    ["harness/diagnose"],
    ["harness/report", "harness/plugin"],
    ["harness/worker"],
    ["harness/run"],
    ["harness/bench"],
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


CMAKE_CALL = re.compile(r"\b(add_library|add_executable|target_link_libraries)\s*\(([^)]*)\)", re.S)
SOURCE = re.compile(r"\.(cpp|cu|c)$")


def build_graph(root):
    """targets: name -> {"folders": set, "kind": library/executable, "links": set, "where": cmake file}."""
    targets = {}
    for top in ("impls", "harness"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if "CMakeLists.txt" not in files:
                continue
            cmake = os.path.join(dirpath, "CMakeLists.txt")
            text = re.sub(r"#[^\n]*", "", open(cmake, encoding="utf-8").read())
            here = os.path.relpath(dirpath, root)
            # set(_dir ${CMAKE_CURRENT_SOURCE_DIR}/..): a folder named once, its sources written ${_dir}/x.cpp
            for var, value in re.findall(r"\bset\s*\(\s*(\w+)\s+\$\{CMAKE_CURRENT_SOURCE_DIR\}([^\s)]*)\s*\)", text):
                text = text.replace("${" + var + "}", "." + value)
            for kind, args in CMAKE_CALL.findall(text):
                words = args.split()
                if not words:
                    continue
                name = words[0]
                if kind == "target_link_libraries":
                    if name in targets:
                        targets[name]["links"].update(w for w in words[1:] if w.startswith("conform_"))
                    continue
                folders = set()
                for w in words[1:]:
                    if "$" in w or not SOURCE.search(w):
                        continue
                    folders.add(os.path.dirname(os.path.normpath(os.path.join(here, w))))
                targets[name] = {"folders": folders, "kind": kind, "links": set(),
                                 "where": os.path.relpath(cmake, root)}
    return targets


def check_build(root, targets, include_edges, source_folders, bad):
    """Folders as targets, links downward, includes backed by links."""
    lib_of = {}
    for name, t in targets.items():
        if t["kind"] == "add_library" and len(t["folders"]) == 1:
            lib_of.setdefault(next(iter(t["folders"])), name)
    lib_of.setdefault("impls/include/conform", "conform_interface")
    for name, t in sorted(targets.items()):
        harness = [f for f in t["folders"] if f.startswith("harness/")]
        if harness and len(t["folders"]) > 1:
            bad.append(f"{t['where']}: {name} builds sources of {', '.join(sorted(t['folders']))}: "
                       "one folder, one target")
        for f in harness:
            if t["kind"] == "add_library" and name != "conform_" + f.split("/", 1)[1]:
                bad.append(f"{t['where']}: {name} builds {f}: a harness folder's library is conform_{f.split('/', 1)[1]}")
        # A target's layer is its highest folder's (the CUDA emulator builds impls/cuda's kernels).
        mine = [RANK[f] for f in t["folders"] if f in RANK]
        if not mine:
            continue
        mine = [max(mine)]
        for dep in sorted(t["links"]):
            d = targets.get(dep)
            if d is None:
                continue
            theirs = [RANK[f] for f in d["folders"] if f in RANK] or ([0] if dep == "conform_interface" else [])
            if theirs and max(theirs) >= min(mine) and d["folders"] != t["folders"]:
                bad.append(f"{t['where']}: {name} (layer {min(mine)}) links {dep} (layer {max(theirs)}): "
                           "a library links only lower layers")
    # Every include across folders is backed by a link, directly or through others.
    def reach(name, seen):
        for dep in targets.get(name, {}).get("links", ()):
            if dep not in seen:
                seen.add(dep)
                reach(dep, seen)
        return seen
    target_of = {}
    for name, t in targets.items():
        for f in t["folders"]:
            target_of.setdefault(f, set()).add(name)
    for f in sorted(source_folders):
        if f.startswith("harness/") and f not in target_of:
            bad.append(f"{f}: sources no target builds (its library is conform_{f.split('/', 1)[1]})")
    for (src_folder, dst_folder), where in sorted(include_edges.items()):
        if not src_folder.startswith("harness/") or dst_folder not in lib_of:
            continue
        want = lib_of[dst_folder]
        have = target_of.get(src_folder, set())
        if have and not any(want == h or want in reach(h, set()) for h in have):
            bad.append(f"{where}: {src_folder} includes {dst_folder}, but {', '.join(sorted(have))} "
                       f"does not link {want}")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad, checked = [], 0
    include_edges, source_folders = {}, set()
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
                if SOURCE.search(name):
                    source_folders.add(folder)
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        checked += 1
                        target = resolve(root, folder, m.group(1))
                        if target is None or target == folder:
                            continue
                        include_edges.setdefault((folder, target), f"{folder}/{name}:{lineno}")
                        if target not in RANK:
                            bad.append(f"{folder}/{name}:{lineno}: includes {m.group(1)} from {target}, "
                                       "a folder missing from the layer table")
                        elif RANK[target] >= RANK[folder]:
                            bad.append(f"{folder}/{name}:{lineno}: includes {m.group(1)}: {folder} (layer "
                                       f"{RANK[folder]}) must not depend on {target} (layer {RANK[target]})")
    targets = build_graph(root)
    check_build(root, targets, include_edges, source_folders, bad)
    links = sum(len(t["links"]) for t in targets.values())
    for b in bad:
        print(b)
    print(f"layering: {checked} includes and {len(targets)} targets ({links} links) checked, "
          f"{len(bad)} violation{'s' if len(bad) != 1 else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# ARCHITECTURE.md's list of what a new twist touches is true: the files of
# the production tree (harness/, impls/, python/, scripts/) that name a real
# twist — YaRN's truncate (rope_scaling.truncate, its bugs yarn_truncated and
# yarn_not_truncated), the first twist that went in through the record — are
# all among the files and folders "A new twist" names. A twist that needs
# another file makes the list wrong, and this fails naming the file.
set -uo pipefail
: "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

/usr/bin/python3 - "$SRC" <<'PY' || fail "ARCHITECTURE.md's \"A new twist\" does not list every file a twist touches"
import os, re, subprocess, sys
src = sys.argv[1]
text = open(os.path.join(src, "ARCHITECTURE.md"), encoding="utf-8").read()
section = text[text.index("## A new twist"):]
section = section[:section.index("\nNothing else.")]
# The paths the list names: files, folders (a trailing /), and {a,b} alternatives.
listed = set()
for p in re.findall(r"`([A-Za-z0-9_./{},-]+)`", section):
    m = re.match(r"(.*)\{(.*)\}(.*)", p)
    for q in ([m.group(1) + a + m.group(3) for a in m.group(2).split(",")] if m else [p]):
        if "/" in q: listed.add(q)
files = subprocess.run(["git", "-C", src, "ls-files", "harness", "impls", "python", "scripts"],
                       capture_output=True, text=True, check=True).stdout.split()
# The twist's names: its field (rope_scaling.truncate: RopeScaling's `truncate`,
# read as s.truncate / scaling.truncate; HF's key "truncate"), its fixture
# attribute and bugs. (The FP8 rounding's own `how.truncate` is another thing.)
pattern = re.compile(r"rope_scaling\.truncate|\b(?:s|sc|scaling)\.truncate\b|yarn_truncated|yarn_not_truncated|"
                     r"rope_truncate|[\"']truncate[\"']")
naming = []
for f in files:
    path = os.path.join(src, f)
    if f.endswith((".md", ".h5", ".png", ".gguf")) or not os.path.isfile(path): continue
    try:
        body = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        continue
    if pattern.search(body): naming.append(f)
assert naming, "no production file names YaRN's truncate: has the twist gone?"
outside = [f for f in naming if not any(f == l or (l.endswith("/") and f.startswith(l)) for l in listed)]
for f in outside: print("names the truncate twist, but is not in ARCHITECTURE.md's \"A new twist\": " + f)
print("the truncate twist is named in %d production files, all in the list: %s" % (len(naming), ", ".join(sorted(naming))))
sys.exit(1 if outside else 0)
PY
echo "docs architecture: ok"

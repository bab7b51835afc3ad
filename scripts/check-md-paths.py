#!/usr/bin/env python3
"""Every path written in a .md file exists (ctest docs.paths).

    check-md-paths.py [ROOT]        ROOT: the repository (default: this script's ../)

Docs go stale by naming files that were moved or renamed; nothing else notices.
This reads every .md file git knows of (tracked, or new and not ignored, so a
page written in the same change is checked before it is committed) and checks:

  - link targets, [text](path) and [ref]: path, that are not URLs or anchors;
    a target FILE.md#anchor also needs a heading with that anchor in FILE.md;
  - code spans that look like a repository path: `a/b`, or `name.ext` with a
    known extension, with no spaces, wildcards, placeholders or variables
    (those are commands, patterns and templates, not paths).

Fenced code blocks are not read: they are commands and output, which name
files a command will write. A link is followed from the .md file's folder; a
code span is looked for there, then from the search roots below; a bare file
name in a code span (`rope.cpp`, whose folder the prose gives) must be the
name of some file in the repository. Each missing path is printed as
FILE:LINE: path 'X' does not exist (a missing anchor likewise), and the exit
code is 1; else a count, and 0. Stdlib only.
"""

import os
import re
import subprocess
import sys

EXTENSIONS = (".cpp", ".h", ".md", ".sh", ".py", ".h5", ".json", ".txt", ".cmake",
              ".c", ".cu", ".cuh", ".html", ".toml", ".png", ".yml", ".yaml", ".xsd")

# Where a path is looked for after the .md file's own folder. The repo root;
# impls/include, because headers are written as #include spells them
# (`conform/plugin.h`); harness/, because ARCHITECTURE.md's table names files
# from the harness folder it is describing (`run/real.*`, `worker/sandbox.cpp`).
SEARCH_ROOTS = ("", "impls/include", "harness")

# Paths that are written by a command, not kept in the repository, so their
# absence proves nothing. Kept short on purpose: each one is a path the docs
# describe as an output.
ALLOWED_PREFIXES = (
    "build/",              # the build tree (build/conform, build/tests/artifacts/)
    ".device-deps/",       # made by scripts/pack-device-deps.sh
    "share/conform/",      # an install prefix's layout (cmake --install) ...
    "lib/cmake/conform/",  # ... its CMake package files
)
ALLOWED = {
    "bin/conform",           # ... and its binary
    "reports/soak/",         # scripts/soak.sh's reports
    "conform.json", "conform.xml", "conform.md", "conform.html",  # the gate's reports
    "reports/conform.json",  # ... in their default folder
    "reports/mutants.json",  # conform mutants' report
    "anatomy.html",          # conform anatomy --html FILE, the docs' example FILE
    "my_kernels.py",         # the file docs/python-workers.md has the reader write
    "inputs/", "expected/",  # groups inside a fixture file (fixtures/SCHEMA.md)
    "config.json", "model.safetensors.index.json",  # a Hugging Face checkpoint's files
    "modeling_rope_utils.py",  # Hugging Face transformers' file, not ours
    "docs/gguf.md",            # ggml's GGUF specification, not ours
}

# Code spans with a slash that are names, not paths: schema versions
# (`conform-report/1`, `conform-fixture/1.N`), "not applicable".
NOT_PATHS = re.compile(r"^[\w-]+/\d+(\.\w+)?$|^n/a$")
# A placeholder component in upper case (`DIR/shard-I-of-N/`) or a bare
# extension (`.cpp`): a pattern the reader fills in.
PLACEHOLDER = re.compile(r"(^|/)[A-Z_]{2,}(/|$)|^\.\w+$")

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`([^`]+)`")
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
# A code span that is a path: path characters only, no spaces, wildcards,
# <placeholders>, $VARIABLES, {braces}, |alternatives, (calls) or = assignments.
PATHLIKE = re.compile(r"^[A-Za-z0-9_.~/+@-]+(?::\d+(?:-\d+)?)?$")
LINE_SUFFIX = re.compile(r":\d+(?:-\d+)?$")


def git_files(root, *pattern):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                              "--exclude-standard", "-z", "--", *pattern],
                             check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"check-md-paths: cannot list {root}'s files with git: {e}")
    return sorted({p for p in out.decode().split("\0") if p})


def blank_fences(text):
    """The text with fenced code blocks blanked out, lines kept in place."""
    out, fenced = [], False
    for line in text.split("\n"):
        if FENCE.match(line):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


def slug(heading):
    """GitHub's anchor for a heading: lower case, markup and punctuation
    dropped, spaces to hyphens."""
    s = heading.strip().lower()
    s = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        with open(path, encoding="utf-8") as f:
            text = blank_fences(f.read())
        seen, found = {}, set()
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
            a = slug(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            found.add(a if n == 0 else f"{a}-{n}")
        cache[path] = found
    return cache[path]


def allowed(p):
    return (p in ALLOWED or p.startswith(ALLOWED_PREFIXES) or p.startswith(("/", "~"))
            or NOT_PATHS.match(p) or PLACEHOLDER.search(p))


def resolve(root, md_dir, p, is_link=False):
    """The path on disk p names, or None. A link is followed from the .md
    file's folder only, as a browser or GitHub follows it."""
    for base in (md_dir,) if is_link else (md_dir,) + SEARCH_ROOTS:
        full = os.path.normpath(os.path.join(root, base, p))
        if os.path.exists(full):
            return full
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1
                           else os.path.join(os.path.dirname(__file__), ".."))
    files = git_files(root)
    # Bare names may name a file or a folder (`emu/`).
    names = {os.path.basename(p) for p in files}
    for p in files:
        parts = p.split("/")[:-1]
        names.update(parts)
    names |= {n + "/" for n in set(names)}
    problems, checked = [], 0
    for md in git_files(root, "*.md"):
        md_dir = os.path.dirname(md)
        with open(os.path.join(root, md), encoding="utf-8") as f:
            text = blank_fences(f.read())

        def line_of(pos):
            return text.count("\n", 0, pos) + 1

        found = []  # (offset, path, is_link)
        for m in CODE_SPAN.finditer(text):
            tok = m.group(1).strip()
            if PATHLIKE.match(tok) and ("/" in tok or LINE_SUFFIX.sub("", tok).endswith(EXTENSIONS)):
                found.append((m.start(), tok, False))
        # Links outside code spans: blank the spans, keeping offsets.
        prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)
        for rx in (INLINE_LINK, REF_LINK):
            for m in rx.finditer(prose):
                target = m.group(1)
                if URL.match(target):
                    continue
                if not target.startswith("#"):
                    found.append((m.start(1), target, True))
                elif target[1:] not in anchors(os.path.join(root, md)):
                    problems.append((md, line_of(m.start(1)),
                                     f"anchor '{target}' is not a heading of {md}"))

        for pos, tok, is_link in found:
            path, _, anchor = tok.partition("#")
            path = LINE_SUFFIX.sub("", path)
            if not path or allowed(path):
                continue
            checked += 1
            if "/" not in path.rstrip("/") and not is_link:
                if path in names or resolve(root, md_dir, path):
                    continue
                problems.append((md, line_of(pos), f"path '{path}' does not exist "
                                 "(no file of that name in the repository)"))
                continue
            full = resolve(root, md_dir, path, is_link)
            if full is None:
                problems.append((md, line_of(pos), f"path '{path}' does not exist"))
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append((md, line_of(pos), f"anchor '#{anchor}' is not a heading "
                                 f"of {os.path.relpath(full, root)}"))

    for md, line, what in sorted(problems):
        print(f"{md}:{line}: {what}")
    if problems:
        print(f"check-md-paths: {len(problems)} of {checked} paths in .md files are missing")
        return 1
    print(f"check-md-paths: {checked} paths in {len(git_files(root, '*.md'))} .md files exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())

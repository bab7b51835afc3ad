#!/usr/bin/env bash
# docs/twists.md is generated from the twist record (impls/include/conform/twists.h):
# `conform list --twists --markdown` prints it, byte for byte. After editing a
# row: build/conform list --twists --markdown > docs/twists.md
set -uo pipefail
: "${CONFORM:?}" "${SRC:?path to the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

"$CONFORM" list --twists --markdown >"$tmp/twists.md" || fail "conform list --twists --markdown"
diff -u "$SRC/docs/twists.md" "$tmp/twists.md" >"$tmp/diff" ||
  { cat "$tmp/diff"; fail "docs/twists.md is not the twist record's page: regenerate it (build/conform list --twists --markdown > docs/twists.md)"; }
"$CONFORM" list --twists --json | /usr/bin/python3 -c '
import json, sys
rows = json.load(sys.stdin)["twists"]
assert rows and all(r["name"] and r["kind"] and r["ops"] for r in rows), rows' || fail "list --twists --json"
echo "docs twists: ok"

#!/usr/bin/env bash
# conform anatomy --html: the page, in a real browser, against the command.
#   * bad targets (a missing directory, a directory, a device, a link, "")
#     exit 2 with the reason and leave what was there;
#   * the page is self-contained (nothing a browser would fetch) and replaces
#     an older page atomically;
#   * tests/cli/anatomy_page.py loads it in headless Chromium, moves the
#     controls (kv heads 32 -> 1, sequence length 1 -> 512, d_model, context,
#     dtype, presets, head_dim, heads), reads every number shown and compares
#     it with `conform anatomy --json` for the same settings; screenshots are
#     kept in $ARTIFACTS (the build dir);
#   * the comparison can fail: a page with one formula coefficient changed is
#     caught.
# Chromium (Debian's `chromium`) is installed when absent and this runs as
# root or with password-less sudo; where it cannot be had: exit 77 (skipped).
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
: "${ARTIFACTS:?directory for the screenshots}"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect, need_chromium

# ---- bad targets: exit 2, nothing replaced ---------------------------------------
tiny=(anatomy --preset tinyllama-1.1b --kv-heads 8)
expect 2 "directory $tmp/missing does not exist" -- "${tiny[@]}" --html "$tmp/missing/a.html"
[ ! -e "$tmp/missing" ] || fail "--html into a missing directory created it"
mkdir "$tmp/dir"
expect 2 "$tmp/dir: is a directory" -- "${tiny[@]}" --html "$tmp/dir"
expect 2 "is not a regular file" -- "${tiny[@]}" --html /dev/null
echo keep >"$tmp/target"
ln -s "$tmp/target" "$tmp/link"
expect 2 "is a symbolic link; not replaced" -- "${tiny[@]}" --html "$tmp/link"
[ "$(cat "$tmp/target")" = keep ] && [ -L "$tmp/link" ] || fail "--html onto a link changed it"
expect 2 "empty file name" -- "${tiny[@]}" --html ""
expect 2 "--html: " -- "${tiny[@]}" --html "$tmp/target/x.html"
expect 2 "unknown preset" -- anatomy --preset gpt-5 --html "$tmp/a.html"
[ ! -e "$tmp/a.html" ] || fail "a refused configuration still wrote the page"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"

# ---- the page ----------------------------------------------------------------------
page="$ARTIFACTS/anatomy.html"
mkdir -p "$ARTIFACTS"
echo "an older page" >"$page"
# What the issue's "done when" runs.
(cd "$ARTIFACTS" && "$CONFORM" anatomy --preset tinyllama-1.1b --kv-heads 8 --html anatomy.html) >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -q "anatomy.html: exists (use --force to overwrite)" "$tmp/out" || { cat "$tmp/out"; fail "--html replaced a file without --force"; }
[ "$(cat "$page")" = "an older page" ] || fail "a refused --html changed the file"
(cd "$ARTIFACTS" && "$CONFORM" anatomy --preset tinyllama-1.1b --kv-heads 8 --html anatomy.html --force) >"$tmp/out" 2>&1 ||
  { cat "$tmp/out"; fail "conform anatomy --html exited $?"; }
grep -q "wrote anatomy.html" "$tmp/out" || { cat "$tmp/out"; fail "no 'wrote' line"; }
grep -q "an older page" "$page" && fail "the older page was not replaced"
grep -q '<!DOCTYPE html>' "$page" || fail "$page: not an HTML page"
# Self-contained: nothing fetched (the SVG is inline HTML, without a namespace URL).
if grep -Eiq ' src=|<link|url\(|@import|<iframe|<img' "$page"; then fail "$page: refers to an external resource"; fi
links=$(grep -Eo 'https?://[^" )]*' "$page" || true)
[ -z "$links" ] || fail "$page: links $links"
grep -q '"schema":"conform-anatomy-formulas/1"' "$page" || fail "$page: the formula table is not embedded"
for p in llama2-7b llama3-8b llama3.1-8b qwen3-8b qwen3-0.6b mistral-7b mistral-7b-v0.3 tinyllama-1.1b phi3-mini; do
  grep -q "\"name\":\"$p\"" "$page" || fail "$page: preset $p is not embedded"
done
# --json with --html: the JSON on stdout, the page beside it.
"$CONFORM" "${tiny[@]}" --html "$tmp/b.html" --json >"$tmp/b.json" 2>"$tmp/b.err" || fail "--html with --json"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["schema"] == "conform-anatomy/1"' "$tmp/b.json" ||
  fail "--html --json: stdout is not the JSON"
cmp -s "$tmp/b.html" "$page" || fail "the same settings wrote a different page"
# A config.json, with this machine's ceilings measured (bench's copy and matmul).
cfg="$root/fixtures/configs/llama3.1-8b.json"
"$CONFORM" anatomy --config "$cfg" --tokens 64 --context 128 --dtype bf16 --with-ceilings --html "$tmp/config.html" \
  >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--config --with-ceilings --html"; }
grep -q "measured" "$tmp/out" || { cat "$tmp/out"; fail "--with-ceilings: the ridge is not the measured one"; }
grep -q '"measured":true' "$tmp/config.html" || fail "--with-ceilings: the page's ridge is not measured"
grep -q 'H100 SXM-like' "$page" || fail "the default ridge is not stated as an assumption"
"$CONFORM" "${tiny[@]}" --with-ceilings --json >"$tmp/c.json" || fail "--with-ceilings --json"
python3 -c 'import json,sys; c = json.load(open(sys.argv[1]))["ceilings"]; assert c["ridge"] > 0 and c["copy_bytes_per_s"] > 0, c' \
  "$tmp/c.json" || fail "--with-ceilings --json: no measured ceilings"

# ---- in the browser ------------------------------------------------------------------
need_chromium anatomy_html  # $chrome (lib.sh), or exit 77

# The driver needs only Python's standard library.
py=$(command -v python3 || command -v /usr/bin/python3) || fail "no python3"
shots="$ARTIFACTS/anatomy-screenshots"
rm -rf "$shots"
timeout 600 "$py" "$root/tests/cli/anatomy_page.py" --chrome "$chrome" --conform "$CONFORM" --page "$page" \
  --config-page "$tmp/config.html" --config-file "$cfg" --shots "$shots" || fail "the page's numbers are not the command's"
for f in "$shots"/*.png; do
  [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$f: not a PNG"
  [ "$(wc -c <"$f")" -gt 50000 ] || fail "$f: the screenshot is (nearly) blank"
done
[ "$(ls "$shots"/*.png | wc -l)" -ge 5 ] || fail "fewer screenshots than scenarios"

# ---- and the comparison can fail ------------------------------------------------------
# RMSNorm counted at 5 FLOP per element instead of 4, in the page's copy of
# the table only: every norm, layer and model FLOP on the page moves.
sed 's/"flops":\[\[4.0,"T","D"\]\]/"flops":[[5.0,"T","D"]]/' "$page" >"$tmp/tampered.html"
cmp -s "$page" "$tmp/tampered.html" && fail "the tampering did not change the page (the table's notation moved?)"
timeout 300 "$py" "$root/tests/cli/anatomy_page.py" --chrome "$chrome" --conform "$CONFORM" --page "$tmp/tampered.html" \
  --shots "$tmp/tampered-shots" --expect-mismatch || fail "a page with a changed formula was not caught"
echo "anatomy html: ok ($(wc -c <"$page") bytes; screenshots in $shots)"

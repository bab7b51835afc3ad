#!/usr/bin/env bash
# --report html: one self-contained page (no script, nothing fetched) that a
# real browser renders, with an error map (inline SVG) for a failing mutant.
# Headless Chromium (Debian's `chromium`) is installed when absent and this
# runs as root or with password-less sudo; where it cannot be had, this says
# so and exits 77 (ctest: skipped).
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, need_chromium

need_chromium html_render  # $chrome (lib.sh), or exit 77

# A failing mutant: property cases (the first failure shrunk, with the map of
# the case it was shrunk from) and a large replayed case.
"$CONFORM" --impl rope_layout_swapped --op rope --cases 5 --no-default-fixtures --quiet --report html,json \
  --out "$tmp/swap" >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/log"; fail "the mutant run exited $rc, expected 1"; }
"$CONFORM" --impl rope_theta_default --quiet --report html --out "$tmp/theta" \
  --case 'rope(T=64,n=4,hd=64,layout=neox,theta=500000,pos=0,mag=1,outliers=0,seed=1)' >"$tmp/log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$tmp/log"; fail "the theta mutant exited $rc, expected 1"; }

for page in "$tmp/swap/conform.html" "$tmp/theta/conform.html"; do
  [ -s "$page" ] || fail "$page: not written"
  # Self-contained: nothing a browser would fetch.
  if grep -Eiq '<script|<link|<img|<iframe| src=|url\(|@import' "$page"; then fail "$page: refers to an external resource"; fi
  others=$(grep -Eo 'https?://[^" )]*' "$page" | grep -v '^http://www.w3.org/2000/svg$' || true)
  [ -z "$others" ] || fail "$page: links $others"

  # What the browser built: the DOM has the summary, the maps, the plots.
  timeout 120 "$chrome" --headless --disable-gpu --no-sandbox --user-data-dir="$tmp/profile" \
    --dump-dom "file://$page" >"$tmp/dom.html" 2>"$tmp/chrome.log" || { tail -5 "$tmp/chrome.log"; fail "$page: chromium --dump-dom failed"; }
  grep -q '<table class="summary">' "$tmp/dom.html" || fail "$page: no summary table in the rendered DOM"
  maps=$(grep -o '<svg[^>]*class="map"' "$tmp/dom.html" | wc -l)
  plots=$(grep -o '<svg[^>]*class="plot"' "$tmp/dom.html" | wc -l)
  [ "$maps" -ge 1 ] && [ "$plots" -ge 2 ] || fail "$page: rendered DOM has $maps error maps, $plots plots"
  grep -q 'error vs position' "$tmp/dom.html" && grep -q 'error vs dim' "$tmp/dom.html" || fail "$page: profiles missing"

  # And it paints.
  rm -f "$tmp/shot.png"
  timeout 120 "$chrome" --headless --disable-gpu --no-sandbox --user-data-dir="$tmp/profile" --hide-scrollbars \
    --window-size=1300,1600 --screenshot="$tmp/shot.png" "file://$page" >"$tmp/chrome.log" 2>&1 ||
    { tail -5 "$tmp/chrome.log"; fail "$page: chromium --screenshot failed"; }
  [ "$(head -c 8 "$tmp/shot.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$page: no PNG screenshot"
  [ "$(wc -c <"$tmp/shot.png")" -gt 20000 ] || fail "$page: the screenshot is (nearly) blank"
  echo "html_render: $(basename "$(dirname "$page")"): $maps error maps, $plots plots, $(wc -c <"$page") bytes"
done
grep -q 'rope_layout_swapped: matches rope_layout=' "$tmp/swap/conform.html" || fail "the diagnosis is not on the page"
grep -q 'The case it was shrunk from' "$tmp/swap/conform.html" || fail "the shrunk failure lost the map of its original case"
echo "html render: ok"

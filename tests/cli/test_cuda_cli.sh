#!/usr/bin/env bash
# `conform --impl cuda` where it cannot run: exit 3 and the reason, never a
# silent pass or a crash. Where a CUDA device is visible this has nothing to
# check and exits 77 (ctest: skipped); the cuda-labelled tests run there.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail

line=$("$CONFORM" list | grep -E '^  cuda  ') || fail "conform list has no cuda line"
echo "$line"
case "$line" in
  *"  available  "*) echo "skipped: a CUDA device is visible here"; exit 77 ;;
esac

for args in "--op rope" "--op all --dtype bf16" ""; do
  # shellcheck disable=SC2086
  "$CONFORM" --impl cuda $args --cases 2 --out "$tmp" >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 3 ] || fail "conform --impl cuda $args exited $rc, expected 3"
  grep -q "implementation 'cuda' is unavailable on this machine: " "$tmp/out" || fail "no reason printed"
  grep -Eq "no CUDA device visible|built without CUDA" "$tmp/out" || fail "the reason does not say why"
done

# bench: neither the kernels nor LibTorch's CUDA run here; exit 3, saying why.
for impl in cuda torch-cuda; do
  "$CONFORM" bench --impl $impl --op rmsnorm --tokens 1 --min-time 0 --min-reps 1 --max-reps 1 >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"
  [ $rc -eq 3 ] || fail "conform bench --impl $impl exited $rc, expected 3"
  grep -Eq "no CUDA device visible|built without CUDA|sees no CUDA device" "$tmp/out" || fail "bench --impl $impl: no reason"
done

# Not named: the default gate skips it, says why, and still runs the others.
"$CONFORM" --op rmsnorm --cases 2 --no-default-fixtures --out "$tmp" >"$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc -eq 0 ] || fail "the default gate exited $rc with cuda unavailable"
grep -q "skipping cuda: " "$tmp/out" || fail "the default gate did not say it skipped cuda"
echo "cuda cli: ok"

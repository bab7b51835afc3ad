#!/usr/bin/env bash
# What a CI job calls: build conform (or reuse a build), run the gate, keep
# the reports. Arguments after the options go to `conform` unchanged.
#
#   scripts/ci-gate.sh [--build-dir DIR] [--reports DIR] [--no-build] [--] [conform args...]
#
#   --build-dir DIR  where conform is built (default build/, or $CONFORM_BUILD_DIR).
#                    An existing configured DIR is built incrementally; a missing
#                    one is configured first (Release, Ninja when present). The
#                    dependencies are those of scripts/setup.sh: on a fresh Debian
#                    12 runner, run that once (it installs them and builds build/).
#   --reports DIR    where the reports are kept (default reports/, or
#                    $CONFORM_REPORTS_DIR); a sharded run (--shard i/n or
#                    TEST_SHARD_INDEX / TEST_TOTAL_SHARDS) writes DIR/shard-i-of-n/,
#                    ready for `conform merge-reports DIR/shard-*/conform.json`.
#   --no-build       use DIR/conform as it is.
#
# The exit code is the gate's: 0 conform, 1 a nonconformance, 2 usage or
# input error, 3 an implementation named but unavailable here. A build that
# fails exits 4, so CI can tell "it did not build" from "it does not conform".
set -uo pipefail
cd "$(dirname "$0")/.."

build_dir=${CONFORM_BUILD_DIR:-build}
reports=${CONFORM_REPORTS_DIR:-reports}
do_build=1
while (($#)); do
  case "$1" in
    --build-dir) build_dir=${2:?--build-dir needs a directory}; shift 2 ;;
    --reports) reports=${2:?--reports needs a directory}; shift 2 ;;
    --no-build) do_build=0; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done

if ((do_build)); then
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${CONFORM_CMAKE_ARGS:-} ||
      { echo "ci-gate: configuring $build_dir failed (dependencies: scripts/setup.sh)" >&2; exit 4; }
  fi
  cmake --build "$build_dir" --target conform -j "$(nproc)" ||
    { echo "ci-gate: building conform in $build_dir failed" >&2; exit 4; }
fi
conform="$build_dir/conform"
[ -x "$conform" ] || { echo "ci-gate: no $conform (build it, or drop --no-build)" >&2; exit 4; }

# A sharded run keeps its reports apart, so that the shards can be merged.
out=$reports
shard=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --shard) shard=${args[i + 1]:-} ;;
    --shard=*) shard=${args[i]#--shard=} ;;
    --out | --out=*) echo "ci-gate: give the reports directory as --reports DIR, not --out" >&2; exit 2 ;;
  esac
done
if [ -z "$shard" ] && [ -n "${TEST_TOTAL_SHARDS:-}" ] && [ -n "${TEST_SHARD_INDEX:-}" ]; then
  shard="$TEST_SHARD_INDEX/$TEST_TOTAL_SHARDS"
fi
if [ -n "$shard" ]; then
  # conform checks the spec; this only names the directory.
  out="$reports/shard-${shard%%/*}-of-${shard##*/}"
fi
mkdir -p "$out" || { echo "ci-gate: cannot create $out" >&2; exit 2; }

echo "ci-gate: $conform $* --out $out"
"$conform" "$@" --out "$out"
rc=$?
echo "ci-gate: exit $rc; reports in $out/"
exit $rc

#!/usr/bin/env bash
# The CUDA implementation's checks on a GPU machine, in one script that
# finishes in under 6 minutes (an H200 lease is 15 minutes, all tries
# together). It builds there, then checks and times, and leaves its reports in
# $OUT (default ./device-out): device-check.log (everything printed),
# summary.txt (one line per check) and details.tar.gz (every report and log).
#
#   scripts/pack-device-deps.sh          here, once: .device-deps/ (carried along)
#   scripts/device-check.sh              there
#   scripts/device-check.sh --dry-run    anywhere: everything up to the GPU
#
# What runs, each under its own timeout:
#   build     CMake + ninja with -DCONFORM_CUDA=ON, LibTorch from python3's
#             torch (Debian's libtorch-dev where python3 has none: --dry-run
#             here), everything else from .device-deps
#   gate      conform --impl cuda --op all, in f32 and in bf16     (must exit 0)
#   mutants   conform --impl cuda_rope_layout_swapped --op rope,
#             conform --impl cuda_gqa_head_mapping_tiled --op attention,
#             conform --impl cuda_router_in_bf16 --op moe_route
#                                                                  (must exit 1)
#   tests     tests/conform_cuda_tests (property cases, off-grid
#             attention shapes, decode == block, the mutants, 1,000 repeats
#             bitwise of attention and of paged batches of >= 3 sequences,
#             the hardware's FP8 conversion on the ORT vectors' inputs)
#                                                                  (must exit 0)
#   sanitize  compute-sanitizer memcheck and racecheck on a short run, where
#             the machine supports it (gVisor does not: then "unsupported")
#   bench     conform bench --impl cuda,torch-cuda: block (prefill, T = 512)
#             and decode (T = 1 after 2048 cached tokens) on tinyllama-1.1b and
#             llama3-8b, f32 and bf16, against LibTorch on the same GPU, with
#             the device's copy bandwidth and matmul rates measured that run
# Exit 0 when every check that could run passed; 1 when one failed; 3 when
# there is no GPU (without --dry-run); 2 on a usage or build error.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

dry_run=0
cases=${CONFORM_DEVICE_CASES:-25}
build_dir=build-device
budget=345 # seconds for the whole script: a check that would end past it is cut short or not started
usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --out) OUT=$2; shift ;;
    --cases) cases=$2; shift ;;
    --build-dir) build_dir=$2; shift ;;
    --budget) budget=$2; budget_given=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "device-check: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done

# A dry run builds on the machine it runs on, at that machine's pace: no budget.
[ "$dry_run" -eq 1 ] && [ -z "${budget_given:-}" ] && budget=100000
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
work=$(mktemp -d /tmp/device-check.XXXXXX)  # details, tarred into $OUT (at most 8 files come back from a lease)
log=$OUT/device-check.log
summary=$OUT/summary.txt
: >"$log"
: >"$summary"
exec > >(tee -a "$log") 2>&1
t_start=$(date +%s)
failed=0

pack() { tar -C "$work" -czf "$OUT/details.tar.gz" . 2>/dev/null || true; }
trap pack EXIT

note() { printf '%-28s %-12s %s\n' "$1" "$2" "$3" | tee -a "$summary"; }
elapsed() { echo "$(($(date +%s) - t_start)) s"; }
banner() { printf '\n==== %s  (at %s)\n' "$1" "$(elapsed)"; }

# check NAME WANT_RC TIMEOUT_S CMD...: runs CMD, its output in $work/NAME.log;
# WANT_RC is the exit status that passes. The timeout is cut to what is left
# of the budget; with under 20 s left the check is not started.
left() { echo $((t_start + budget - $(date +%s))); }
check() {
  local name=$1 want=$2 limit=$3
  shift 3
  if [ "$(left)" -lt 20 ]; then
    note "$name" "not run" "time budget (${budget} s) spent"
    return 0
  fi
  [ "$limit" -le "$(left)" ] || limit=$(left)
  banner "$name: $*"
  local t0 rc
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$work/$name.log" 2>&1
  rc=$?
  tail -n 25 "$work/$name.log"
  local took="$(($(date +%s) - t0)) s"
  if [ "$rc" -eq "$want" ]; then
    note "$name" "ok" "exit $rc ($took)"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "$name" "TIMEOUT" "over ${limit} s"
    failed=1
  else
    note "$name" "FAIL" "exit $rc, expected $want ($took); see $name.log"
    failed=1
  fi
  pack
  return 0
}

# ---- the machine ------------------------------------------------------------------------------
banner "machine"
uname -a
nproc
(nvidia-smi -L || echo "nvidia-smi: not available") 2>&1 | tee "$work/nvidia-smi.txt"
nvcc --version 2>/dev/null | tail -2 || echo "nvcc: not on PATH"
cmake --version | head -1

# ---- dependencies ----------------------------------------------------------------------------
if [ ! -f .device-deps/deps.cmake ]; then
  echo "device-check: .device-deps/ is missing: run scripts/pack-device-deps.sh on the build machine and carry .device-deps" >&2
  note "deps" "FAIL" ".device-deps missing"
  exit 2
fi
# shellcheck disable=SC1091
. .device-deps/env.sh
cat .device-deps/MANIFEST

if torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
  torch_dir=$torch_prefix/Torch
  torch_from="python3 torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  # LibTorch's own shared libraries, and the CUDA runtime libraries its wheels bring.
  torch_lib=$(dirname "$torch_prefix")/../lib
  export LD_LIBRARY_PATH="$torch_lib:$LD_LIBRARY_PATH"
elif [ -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake ]; then
  torch_dir=/usr/lib/x86_64-linux-gnu/cmake/Torch
  torch_from="Debian libtorch-dev $(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null)"
else
  echo "device-check: no LibTorch: neither python3's torch nor Debian's libtorch-dev" >&2
  note "deps" "FAIL" "no LibTorch"
  exit 2
fi
echo "LibTorch: $torch_from ($torch_dir)"

# ---- build ---------------------------------------------------------------------------------------
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || ! command -v ninja >/dev/null || generator=(-G Ninja)
# CMAKE_POLICY_VERSION_MINIMUM: a CMake 4 there refuses a packaged config that
# asks for a policy version below 3.5 (older CMakes ignore the variable).
check configure 0 240 cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCONFORM_CUDA=ON \
  -C .device-deps/deps.cmake -DTorch_DIR="$torch_dir" -DCMAKE_POLICY_VERSION_MINIMUM=3.5
if [ "$failed" -ne 0 ]; then
  echo "device-check: configure failed (configure.log in details.tar.gz)"
  exit 2
fi

# Every dependency must come from the pack: that is what the GPU machine has.
banner "dependencies found in .device-deps"
deps_ok=1
for var in Catch2_DIR rapidcheck_DIR hwy_DIR fmt_DIR CLI11_DIR nlohmann_json_DIR HDF5_C_INCLUDE_DIR; do
  val=$(grep -E "^${var}:" "$build_dir/CMakeCache.txt" | cut -d= -f2-)
  echo "  $var = $val"
  case "$val" in *"/.device-deps/"*) ;; *) deps_ok=0 ;; esac
done
if [ "$deps_ok" -eq 1 ]; then note "deps-from-pack" "ok" "every find_package() resolved into .device-deps"; else
  note "deps-from-pack" "FAIL" "a dependency resolved outside .device-deps (the GPU machine would lack it)"
  failed=1
fi

build_limit=330
[ "$dry_run" -eq 1 ] && build_limit=7200  # this machine's pace, not the lease's
check build 0 "$build_limit" cmake --build "$build_dir" -j "$(nproc)" --target conform conform_cuda_tests
if [ ! -x "$build_dir/conform" ]; then
  echo "device-check: the build failed (build.log in details.tar.gz)"
  exit 2
fi
conform=$root/$build_dir/conform
"$conform" list | tee "$work/list.txt"

# ---- a GPU? ------------------------------------------------------------------------------------
gpu_reason=""
if ! command -v nvidia-smi >/dev/null; then
  gpu_reason="nvidia-smi not found"
elif ! nvidia-smi -L >/dev/null 2>&1; then
  gpu_reason="nvidia-smi -L failed: $(nvidia-smi -L 2>&1 | head -1)"
fi
cuda_line=$(grep -E '^  cuda  ' "$work/list.txt" || true)
case "$cuda_line" in
  *"  available  "*) ;;
  *) gpu_reason="${gpu_reason:+$gpu_reason; }conform: ${cuda_line#  cuda  }" ;;
esac

if [ -n "$gpu_reason" ]; then
  # Where there is no GPU, `--impl cuda` must say so (exit 3), not pass.
  check no-gpu-exit-3 3 60 "$conform" --impl cuda --op rope --cases 2 --no-default-fixtures --out "$work/no-gpu"
  banner "no GPU"
  echo "device-check: no GPU here ($gpu_reason)."
  if [ "$dry_run" -eq 1 ]; then
    echo "device-check: dry run: configured and built; stopping before the GPU checks (gate, mutants, tests, sanitizer, bench)."
    note "gpu-checks" "not run" "dry run, no GPU: $gpu_reason"
    exit "$failed"
  fi
  note "gpu-checks" "not run" "no GPU: $gpu_reason"
  exit 3
fi
[ "$dry_run" -eq 1 ] && echo "device-check: --dry-run on a machine with a GPU: running the GPU checks anyway"

# ---- the gate -----------------------------------------------------------------------------------
for dt in f32 bf16; do
  check "gate-$dt" 0 150 "$conform" --impl cuda --op all --dtype "$dt" --cases "$cases" --out "$work/gate-$dt"
done

# ---- mutants: each must be caught (exit 1) ---------------------------------------------------------
check mutant-rope-layout 1 90 "$conform" --impl cuda_rope_layout_swapped --op rope --cases 20 \
  --no-default-fixtures --out "$work/mutant-rope-layout"
check mutant-gqa-tiled 1 90 "$conform" --impl cuda_gqa_head_mapping_tiled --op attention --cases 20 \
  --no-default-fixtures --out "$work/mutant-gqa-tiled"
check mutant-router-bf16 1 90 "$conform" --impl cuda_router_in_bf16 --op moe_route --cases 40 \
  --no-default-fixtures --out "$work/mutant-router-bf16"

# ---- bench --------------------------------------------------------------------------------------------
for preset in tinyllama-1.1b llama3-8b; do
  check "bench-$preset" 0 120 sh -c "'$conform' bench --impl cuda,torch-cuda --preset $preset --op block,decode \
    --tokens 1,512 --context 2048 --dtype f32,bf16 --min-time 0.2 --max-reps 30 --json > '$work/bench-$preset.json'"
  cp "$work/bench-$preset.json" "$OUT/bench-$preset.json" 2>/dev/null || true
done

# ---- the tests ----------------------------------------------------------------------------------------
check cuda-tests 0 150 env CONFORM_CUDA_TEST_CASES=8 "$root/$build_dir/tests/conform_cuda_tests"

# ---- compute-sanitizer ----------------------------------------------------------------------------------
# Exit 9 = errors found. Elsewhere a refusal ("Device not supported" on gVisor) is recorded, not failed.
sanitize() {
  local tool=$1 ops=$2
  local name=sanitize-$tool
  if ! command -v compute-sanitizer >/dev/null; then
    note "$name" "unsupported" "compute-sanitizer not on PATH"
    return
  fi
  if [ "$(left)" -lt 30 ]; then
    note "$name" "not run" "time budget (${budget} s) spent"
    return
  fi
  banner "$name"
  timeout --kill-after=10 $(($(left) < 120 ? $(left) : 120)) compute-sanitizer --tool "$tool" --error-exitcode 9 "$conform" --impl cuda --op "$ops" \
    --dtype bf16 --cases 2 --no-default-fixtures --out "$work/$name" >"$work/$name.log" 2>&1
  local rc=$?
  tail -n 15 "$work/$name.log"
  if [ $rc -eq 0 ]; then
    note "$name" "ok" "no errors ($ops)"
  elif grep -qiE "not supported|unable to|failed to initialize|error 999" "$work/$name.log" && [ $rc -ne 9 ]; then
    note "$name" "unsupported" "exit $rc: $(grep -iE 'not supported|unable to|failed to initialize|error 999' "$work/$name.log" | head -1)"
  else
    note "$name" "FAIL" "exit $rc; see $name.log"
    failed=1
  fi
  pack
}
sanitize memcheck rmsnorm,rope,qk_norm,attention,swiglu,block,decode,paged_attention

sanitize racecheck attention,rmsnorm

banner "summary ($(elapsed))"
cat "$summary"
if [ "$failed" -ne 0 ]; then
  echo "device-check: FAILED (details.tar.gz holds every log and report)"
  exit 1
fi
echo "device-check: every check that could run passed"

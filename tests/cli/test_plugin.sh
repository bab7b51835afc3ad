#!/usr/bin/env bash
# End to end: out-of-tree implementations through the C ABI (conform/plugin.h).
#
#   test_plugin.sh example    the example plugin, built by its own CMake project,
#                             passes; its wrong twin (RoPE always interleaved)
#                             fails and diagnosis names the bug
#   test_plugin.sh contract   plugins that crash, overrun, underrun, leave
#                             outputs unwritten, return errors, exit, write their
#                             inputs, speak another ABI or are no plugin at all,
#                             or predate a config field (qkv_bias, ABI 1.3);
#                             ABI 2's MoE functions writing stacked experts
#                             or a twist tensor, overrunning, crashing:
#                             each reported precisely, with exit 1 or 2, and
#                             conform alive to write its report
#   test_plugin.sh dtypes     a plugin in f32, bf16 and f16 conforms in each, and
#                             configs its supports() refuses are skipped
#   test_plugin.sh install    cmake --install, then the example built against
#                             the prefix with find_package(conform), and its
#                             own ctest running the installed conform
#   test_plugin.sh quant      swiglu with Q8_0 activations, declared (ABI
#                             1.7), passes with its own baselines; undeclared
#                             it fails, named precision_downgrade; a
#                             declaration that is no CONFORM_ACT_QUANT_* is
#                             refused at load (exit 2)
#   test_plugin.sh abi        a correct plugin of every op built against ABI
#                             1.0, 1.1, 1.13 and 2 gets 100 property cases of
#                             each op within what it declares, on three seeds,
#                             and passes
#   test_plugin.sh gqa        attention in C passes; its twin that maps query
#                             heads h % n_kv only for groups above 4 fails,
#                             named gqa_head_mapping_tiled, on a case whose
#                             group is above 4
#
# Environment (tests/plugins/CMakeLists.txt sets it): CONFORM, CONFORM_SOURCE_DIR,
# CONFORM_BINARY_DIR, BAD_PLUGIN_DIR, CMAKE, CTEST, CC, CXX.
set -uo pipefail
mode=${1:?usage: test_plugin.sh example|contract|dtypes|install|gqa|quant|abi}
: "${CONFORM:?}" "${CONFORM_SOURCE_DIR:?}" "${CONFORM_BINARY_DIR:?}" "${BAD_PLUGIN_DIR:?}" "${CMAKE:?}" "${CTEST:?}" "${CC:?}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect

expect_grep=-E  # expect (lib.sh): PATTERN is a grep -E regex

# The example project, configured with whatever finds conform/plugin.h ($@).
build_example() {
  local dir=$1; shift
  "$CMAKE" -S "$CONFORM_SOURCE_DIR/impls/plugin_example" -B "$dir" -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_BUILD_TYPE=Release "$@" >"$tmp/cmake.log" 2>&1 &&
    "$CMAKE" --build "$dir" >>"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "building the example in $dir"; }
}

case $mode in
example)
  build_example "$tmp/ex" -DCONFORM_INCLUDE_DIR="$CONFORM_SOURCE_DIR/impls/include" -DCONFORM_EXAMPLE_WRONG_TWIN=ON
  good=$tmp/ex/libexample_kernels.so
  wrong=$tmp/ex/libexample_kernels_wrong_rope.so
  [ -f "$good" ] && [ -f "$wrong" ] || fail "the example did not produce $good and $wrong"

  # The example conforms, isolated (the default) and in process.
  expect 0 "rope +example +[0-9]+ +[0-9]+" -- --impl-lib "$good" --op rope,rmsnorm --cases 40 --out "$tmp/good"
  cat "$tmp/out"
  python3 - "$tmp/good/conform.json" <<'PY' || fail "report of the example"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["pass"] is True, "report says the example does not conform"
assert r["impls"] == ["example", "reference"], r["impls"]  # the fixtures' own check runs as `reference`
ops = {c["op"] for c in r["cases"] if c["impl"] == "example"}
assert ops == {"rope", "rmsnorm"}, ops
# It declares rotary_dim and norm_plus_one, not rope_scaling: its 40 rope
# cases are drawn without scaling, partial-rotary ones among them; the
# fixtures' scaled cases are not offered, and listed so.
import re
rope = [c for c in r["cases"] if c["op"] == "rope" and c["impl"] == "example"]
ran = len([c for c in rope if c["origin"] == "property"])
assert ran == 40, ran
assert any(re.search(r"rd=\d+", c["case_id"]) for c in rope), "no partial-rotary case reached the plugin"
assert not any("scaling=" in c["case_id"] for c in rope), "a scaled case ran"
nr = [n for n in r["not_run"] if n["impl"] == "example" and n["op"] == "rope"]
assert len(nr) == 1 and nr[0]["cases"] >= 1 and "not offered: the case has rope_scaling on" in nr[0]["reason"], r["not_run"]
no = [n for n in r["not_offered"] if n["impl"] == "example"]
assert no == [{"impl": "example", "op": "rope", "twists": ["rope_scaling", "rope_scaling.truncate"]}], no
# The regression fixtures run for plugins too.
assert any(c["origin"] == "fixture" for c in rope), "the fixtures did not run"
PY
  grep -qE "^not run: +example rope: [0-9]+ cases? unsupported \(not offered" "$tmp/out" || fail "the cases not offered are not reported"
  grep -qE "^not offered: example rope: rope_scaling" "$tmp/out" || fail "the undeclared twist is not listed"
  # Plugins never run inside conform: --no-isolate is refused, saying why.
  expect 2 "no-isolate: plugins and commands always run in a sandboxed worker process" -- --impl-lib "$good" --no-isolate
  # A plugin's name is an implementation name like any other.
  expect 0 "rope +scalar" -- --impl-lib "$good" --impl example,scalar --op rope --cases 5 --out "$tmp/good"
  expect 0 "rope +example" -- --impl-lib "$good" --impl example,scalar --op rope --cases 5 --out "$tmp/good"
  expect 0 "example +available +- --impl-lib .*ops: rmsnorm, rope" -- list --impl-lib "$good"
  # bench times a plugin beside torch, and refuses one that computes something else.
  expect 0 "rope +4 +example +f32 .* 0e\+00" -- bench --impl-lib "$good" --op rope,rmsnorm --tokens 4 --min-time 0.05 --min-reps 2 --settle-ms 0
  expect 1 "example-wrong-rope rope T=4 disagrees with torch" -- bench --impl-lib "$wrong" --op rope --tokens 4 --min-time 0.05 --min-reps 2 --settle-ms 0
  expect 2 "not benchmarked" -- bench --impl-lib "$good" --impl nope --op rope

  # The wrong twin: rope fails, rmsnorm still passes, and the bug is named.
  expect 1 "FAIL example-wrong-rope rope" -- --impl-lib "$wrong" --op rope,rmsnorm --cases 40 --out "$tmp/wrong"
  cat "$tmp/out"
  grep -qE "^rmsnorm +example-wrong-rope +([0-9]+) +\1 " "$tmp/out" || fail "rmsnorm of the wrong twin should pass"
  grep -q "rope_layout_swapped" "$tmp/out" || fail "the wrong twin failed, but the diagnosis did not name rope_layout_swapped"
  grep -q "rope_layout=interleaved" "$tmp/out" || fail "the diagnosis did not say the output matches rope_layout=interleaved"
  # The printed replay line reproduces the failure.
  replay=$(grep -m1 "replay: .*--impl-lib" "$tmp/out" | sed 's/^ *replay: *//')
  [ -n "$replay" ] || fail "no replay line naming --impl-lib"
  eval "\"\$CONFORM\" ${replay#build/conform} --out \"\$tmp/replay\"" >"$tmp/replay.log" 2>&1
  rc=$?
  [ $rc -eq 1 ] || { cat "$tmp/replay.log"; fail "replay exited $rc, expected 1: $replay"; }
  ;;

contract)
  bad() { echo "$BAD_PLUGIN_DIR/libbad_plugin_$1.so"; }
  # Each broken rope fails its cases (exit 1), rmsnorm from the same library
  # still passes, and conform lives to write the report.
  check_run() {  # check_run WAY PATTERN [extra args]
    local way=$1 pattern=$2; shift 2
    expect 1 "$pattern" -- --impl-lib "$(bad "$way")" --op rope,rmsnorm --cases 4 --out "$tmp/$way" "$@"
    grep -q "^report: " "$tmp/out" || { cat "$tmp/out"; fail "$way: conform did not finish its report"; }
    python3 - "$tmp/$way/conform.json" "$way" <<'PY' || fail "$way: report"
import json, sys
r = json.load(open(sys.argv[1]))
rope = [c for c in r["cases"] if c["op"] == "rope" and c["impl"] == "bad"]
rms = [c for c in r["cases"] if c["op"] == "rmsnorm" and c["impl"] == "bad"]
assert rope and not any(c["pass"] for c in rope), sys.argv[2] + ": rope should fail every case"
assert rms and all(c["pass"] for c in rms), sys.argv[2] + ": rmsnorm should pass"
PY
  }
  check_run crash 'the worker was killed by signal 11 \(SIGSEGV\) in rope'
  check_run overrun "wrote past the end of output 'out'"
  # The other ways, on one case each (no shrinking: quicker), isolated and in process.
  check_case() {  # check_case WAY PATTERN [extra args]
    local way=$1 pattern=$2; shift 2
    expect 1 "$pattern" -- --impl-lib "$(bad "$way")" --case "$rope_case" --out "$tmp/$way" "$@"
  }
  rope_case='rope(T=3,n=2,hd=8,layout=neox,theta=500000,pos=4090,mag=1,outliers=0,seed=12)'
  check_case underrun "wrote before the start of output 'out' \(element -1 was overwritten\)"
  check_case unwritten "left element 32 of output 'out' \[3,16\] unwritten"
  check_case error "rope returned CONFORM_ERR_INTERNAL: device lost while rotating 3 rows"
  check_case exit 'the worker exited with status 3 in rope'
  check_case input_write "rope wrote into its input 'x' \(inputs are read-only\)"

  # The mixture of experts' functions (ABI 2's appended three) are held to
  # the same contract, where the inputs are stacked experts and the twists'
  # tensors ride in the parameters: scalar-v2 computes each answer, then
  # breaks it one way (SCALAR_PLUGIN_V2_BREAK).
  v2=$BAD_PLUGIN_DIR/libscalar_v2_plugin.so
  moe_case='moe(T=2,D=13,E=8,K=1,Fe=4,sel_bias=1,renorm=1,interleaved=1,swiglu_limit=1.5,mag=1,outliers=0,seed=47528470)'
  experts_case='moe_experts(T=3,D=9,E=4,K=1,Fe=5,swiglu_limit=1.5,expert_bias=1,mag=1,outliers=0,seed=104227615)'
  route_case='moe_route(T=1,D=4,E=8,K=2,router_bias=1,n_group=2,topk_group=1,mag=1,outliers=3,seed=108983102)'
  expect 0 "moe +scalar-v2 +1 +1" -- --impl-lib "$v2" --case "$moe_case" --out "$tmp/moe-ok"
  moe_break() {  # moe_break HOW CASE PATTERN
    SCALAR_PLUGIN_V2_BREAK=$1 expect 1 "$3" -- --impl-lib "$v2" --case "$2" --out "$tmp/moe-$1"
  }
  moe_break w13_write "$moe_case" "moe wrote into its input 'w13' \(inputs are read-only\)"
  moe_break w13_write "$experts_case" "moe_experts wrote into its input 'w13' \(inputs are read-only\)"
  moe_break twist_write "$moe_case" "moe wrote into its input 'e_bias' \(inputs are read-only\)"
  moe_break twist_write "$route_case" "moe_route wrote into its input 'router_bias' \(inputs are read-only\)"
  moe_break overrun "$route_case" "wrote past the end of output 'out'"
  moe_break crash "$experts_case" 'the worker was killed by signal 11 \(SIGSEGV\) in moe_experts'

  # Libraries conform cannot use: exit 2, naming the file and the problem.
  expect 2 "libbad_plugin_abi.so: built against plugin ABI version 7, but this conform speaks versions 1" -- \
    --impl-lib "$(bad abi)"
  expect 2 "libbad_plugin_no_symbol.so: not a conform plugin: it exports no conform_plugin_get" -- \
    --impl-lib "$(bad no_symbol)"
  expect 2 "libbad_plugin_load_crash.so: was killed by signal 11 \(SIGSEGV\) before its hello \(while loading" -- \
    --impl-lib "$(bad load_crash)"
  expect 2 "$tmp/nope.so: no such file" -- --impl-lib "$tmp/nope.so"
  expect 2 "test_plugin.sh: cannot load it" -- --impl-lib "${BASH_SOURCE[0]}"
  expect 2 "libbad_plugin_abi.so: built against plugin ABI version 7" -- list --impl-lib "$(bad abi)"
  expect 2 "unknown implementation 'nope' .*the workers given are: bad" -- --impl-lib "$(bad crash)" --impl nope

  # A table built against 1.x is offered the twists its minor had fields for,
  # and no other: one build (noop.c, its minor from $NOOP_ABI_MINOR) for every
  # minor, each run listing what it was not offered (the report's not_offered).
  for minor in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do
    NOOP_ABI_MINOR=$minor "$CONFORM" --op all --cases 2 --no-default-fixtures --impl-lib "$BAD_PLUGIN_DIR/libnoop_plugin.so" \
      --out "$tmp/minor$minor" >"$tmp/out" 2>&1
    python3 - "$tmp/minor$minor/conform.json" $minor <<'PY' || { cat "$tmp/out"; fail "noop as ABI 1.$minor"; }
import json, sys
r, minor = json.load(open(sys.argv[1])), int(sys.argv[2])
# The twist record's rows and the minor that brought each (decode's FP8 cache: 1.8).
brought = {"qk_norm": 0, "rotary_dim": 1, "rope_scaling": 1, "qkv_bias": 3, "sliding_window": 3,
           "attn_logit_softcapping": 4, "attn_sinks": 4, "norm_plus_one": 5, "kv_cache_dtype": 6,
           "kv_scale_per_head": 6, "hidden_act": 9, "attn_scale": 10, "sandwich_norm": 11, "nope": 12,
           "attention_chunk_size": 13}
ops = {"rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode"}
for n in r["not_offered"]:
    assert n["impl"] == "noop" and n["op"] in ops, n
    for t in n["twists"]:
        need = 8 if n["op"] == "decode" and t.startswith("kv_") else brought.get(t, 99)
        assert need > minor, "1.%d knew %s for %s, and was not offered it" % (minor, t, n["op"])
listed = {(n["op"], t) for n in r["not_offered"] for t in n["twists"]}
reads = {"qk_norm": {"block", "decode"}, "rotary_dim": {"rope", "block", "decode"}, "rope_scaling": {"rope", "block", "decode"},
         "qkv_bias": {"block", "decode"}, "norm_plus_one": {"rmsnorm", "qk_norm", "block", "decode"},
         "sandwich_norm": {"block", "decode"}, "nope": {"block", "decode"}, "hidden_act": {"swiglu", "block", "decode"},
         "kv_cache_dtype": {"decode"}, "kv_scale_per_head": {"decode"}}
for t, m in brought.items():
    for op in reads.get(t, {"attention", "block", "decode"}):
        need = 8 if op == "decode" and t.startswith("kv_") else m
        assert (need > minor) == ((op, t) in listed), "1.%d: %s %s listed %s" % (minor, op, t, (op, t) in listed)
# Every property case it ran has only twists its minor knew (its cases are drawn within them).
import re
for c in r["cases"]:
    if c["impl"] != "noop": continue
    cid = c["case_id"]
    for key, t in (("bias=", "qkv_bias"), ("window=", "sliding_window"), ("softcap=", "attn_logit_softcapping"),
                   ("sinks=", "attn_sinks"), ("plus_one=", "norm_plus_one"), ("kv_dtype=", "kv_cache_dtype"),
                   ("act=", "hidden_act"), ("attn_scale=", "attn_scale"), ("sandwich=", "sandwich_norm"),
                   ("nope=", "nope"), ("chunk=", "attention_chunk_size"), ("scaling=", "rope_scaling"),
                   ("rd=", "rotary_dim"), ("qk_norm=1", "qk_norm")):
        if re.search(r"[(,]" + re.escape(key), cid):
            need = 8 if c["op"] == "decode" and t.startswith("kv_") else brought[t]
            assert need <= minor, "1.%d was offered %s: %s" % (minor, t, cid)
PY
  done
  # A 1.8 table is offered them, with the scales in its config: noop copies x, so the
  # cases run and fail on their numbers, not on scales missing (noop_decode checks them).
  expect 1 "FAIL noop decode" -- --op decode --params kv_dtype=fp8_e5m2,kv_scale=tensor --cases 3 --no-default-fixtures \
    --impl-lib "$BAD_PLUGIN_DIR/libnoop_plugin.so"
  grep -q "without its" "$tmp/out" && { cat "$tmp/out"; fail "noop decode did not get the FP8 cache's scales"; }

  # --isolate runs in-repo implementations in a worker too, block taps included.
  expect 0 "block +scalar" -- --impl scalar --isolate --op all --cases 3 --out "$tmp/iso"
  ;;

quant)
  # Declared: judged against baselines whose activations went through Q8_0 as its own did.
  # (A case whose activations overflow Q8_0's f16 scale, above 8.3e6, is not run: the format cannot hold it.)
  expect 0 "swiglu +q8 +[0-9]+ +[0-9]+" -- --impl-lib "$BAD_PLUGIN_DIR/libq8_plugin.so" --op swiglu --cases 30 \
    --no-default-fixtures --out "$tmp/q8"
  python3 - "$tmp/q8/conform.json" <<'PY' || fail "report of the declared q8 plugin"
import json, sys
r = json.load(open(sys.argv[1]))
cases = [c for c in r["cases"] if c["impl"] == "q8"]
assert len(cases) >= 25 and all(c["pass"] for c in cases), len(cases)
assert all(c.get("act_quant") == "q8_0" for c in cases), "a case was not judged with q8_0 activations"
for n in r["not_run"]:
    assert n["impl"] == "q8" and "block scale is an f16, which overflows" in n["reason"], n
PY
  # The same kernel, undeclared: float32's claim, Q8_0's accuracy.
  expect 1 "precision_downgrade: matches activations quantised to q8_0" -- \
    --impl-lib "$BAD_PLUGIN_DIR/libq8_undeclared_plugin.so" --op swiglu --cases 30 --no-default-fixtures --out "$tmp/q8u"
  # An answer that is no CONFORM_ACT_QUANT_*: the library is refused, naming the field.
  expect 2 "activation_quant\(swiglu\) returned 7, not a CONFORM_ACT_QUANT_" -- \
    --impl-lib "$BAD_PLUGIN_DIR/libq8_bad_answer_plugin.so" --op swiglu --cases 1 --no-default-fixtures --out "$tmp/q8b"
  ;;

dtypes)
  half=$BAD_PLUGIN_DIR/libhalf_plugin.so
  # Tensors cross the boundary in the run's dtype, both ways, exactly; rope
  # configs the plugin refuses through supports() are skipped, not failed.
  for dt in f32 bf16 f16; do
    expect 0 "rope +half" -- --impl-lib "$half" --dtype $dt --op rope,rmsnorm --cases 40 --out "$tmp/$dt"
    python3 - "$tmp/$dt/conform.json" $dt <<'PY' || fail "$dt: report"
import json, re, sys
r = json.load(open(sys.argv[1]))
assert r["dtype"] == sys.argv[2], r["dtype"]
rope = [c for c in r["cases"] if c["op"] == "rope" and c["origin"] == "property"]
hds = [int(re.search(r"hd=(\d+)", c["case_id"]).group(1)) for c in rope]
assert rope and all(c["pass"] for c in rope)
assert max(hds) <= 64, "a case the plugin refused was run: " + str(max(hds))
assert len(rope) < 40, "no case was refused: the generator should reach head_dim 128"
assert all(c["pass"] for c in r["cases"] if c["op"] == "rmsnorm")
PY
  done
  ;;

install)
  prefix=$tmp/prefix
  "$CMAKE" --install "$CONFORM_BINARY_DIR" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
  for f in bin/conform bin/conform-worker include/conform/plugin.h; do
    [ -f "$prefix/$f" ] || fail "cmake --install did not install $f"
  done
  config=$(find "$prefix" -name conformConfig.cmake | head -1)
  [ -n "$config" ] && [ -f "$(dirname "$config")/conformConfigVersion.cmake" ] || fail "no package config under $prefix"
  "$prefix/bin/conform" list --impls >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "the installed conform does not run"; }
  # The Python package beside it finds it (no PATH, no CONFORM_BIN) and judges a kernel with it.
  if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    (cd "$tmp" && env -u CONFORM_BIN PATH=/usr/bin:/bin PYTHONPATH="$prefix/share/conform/python" /usr/bin/python3 -c "
import numpy as np, conform
assert conform.find_binary().startswith('$prefix/'), conform.find_binary()
r = conform.check(lambda x, weight, norm_eps, norm_plus_one: x / np.sqrt((x * x).mean(-1, keepdims=True) + np.float32(norm_eps))
                  * (1 + weight if norm_plus_one else weight), op='rmsnorm', name='installed', cases=5, fixtures=False)
assert r.passed
") >"$tmp/py.out" 2>&1 || { cat "$tmp/py.out"; fail "the installed Python package"; }
  fi

  # The installed header is plain C99 and C++, warning-free.
  echo '#include <conform/plugin.h>' >"$tmp/h.c"
  "$CC" -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/h.c" ||
    fail "conform/plugin.h is not clean C99"
  if [ -n "${CXX:-}" ]; then
    "$CXX" -std=c++11 -pedantic -Wall -Wextra -Werror -fsyntax-only -x c++ -I"$prefix/include" "$tmp/h.c" ||
      fail "conform/plugin.h is not clean C++11"
  fi

  # An engine's build: find_package(conform), conform_add_plugin_test, ctest.
  build_example "$tmp/ex" -DCMAKE_PREFIX_PATH="$prefix"
  (cd "$tmp/ex" && "$CTEST" --output-on-failure) >"$tmp/ctest.log" 2>&1 || { cat "$tmp/ctest.log"; fail "the example's own ctest"; }
  grep -q "100% tests passed" "$tmp/ctest.log" || { cat "$tmp/ctest.log"; fail "the example's ctest ran no test"; }
  grep -q "conform_DIR:PATH=$prefix" "$tmp/ex/CMakeCache.txt" || fail "the example did not find conform under $prefix"
  ;;

abi)
  # A correct plugin of every op (conform's scalar kernels behind the C ABI):
  # built against ABI 1.0, 1.1 and 1.13 (one build, its minor from the
  # environment) and against ABI 2 (every twist listed, read by name), each
  # gets its --cases property cases of every op it has, within what it
  # declares, on three seeds, and passes.
  v1=$BAD_PLUGIN_DIR/libscalar_v1_plugin.so v2=$BAD_PLUGIN_DIR/libscalar_v2_plugin.so
  for seed in 20261129 1 424242; do
    for minor in 0 1 13; do
      export SCALAR_PLUGIN_ABI_MINOR=$minor
      expect 0 "block +scalar-v1" -- --impl-lib "$v1" --op all --seed $seed \
        --no-default-fixtures --out "$tmp/v1-$minor-$seed"
      python3 - "$tmp/v1-$minor-$seed/conform.json" $minor <<'PY' || fail "scalar-v1 as ABI 1.$minor, seed $seed"
import json, sys
r, minor = json.load(open(sys.argv[1])), int(sys.argv[2])
ops = ["rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode"] + (["paged_attention"] if minor >= 2 else [])
for op in ops:
    n = sum(1 for c in r["cases"] if c["impl"] == "scalar-v1" and c["op"] == op and c["origin"] == "property")
    assert n == 100, "%s: %d property cases judged, not 100" % (op, n)
# Nothing declined but an op a 1.0 / 1.1 table has no function for.
assert r["pass"] and all(n["op"] not in ops for n in r["not_run"]), r["not_run"]
PY
    done
    expect 0 "block +scalar-v2" -- --impl-lib "$v2" --op all --seed $seed --out "$tmp/v2-$seed"
    python3 - "$tmp/v2-$seed/conform.json" <<'PY' || fail "scalar-v2, seed $seed"
import json, sys
r = json.load(open(sys.argv[1]))
for op in ["rmsnorm", "rope", "qk_norm", "attention", "swiglu", "block", "decode", "paged_attention",
           "moe", "moe_route", "moe_experts", "mla_attention"]:
    n = sum(1 for c in r["cases"] if c["impl"] == "scalar-v2" and c["op"] == op and c["origin"] == "property")
    assert n == 100, "%s: %d property cases judged, not 100" % (op, n)
assert r["pass"] and not r["not_offered"], r["not_offered"]
PY
  done
  # The same table as built before the mixture of experts' functions were
  # appended (its struct_size ends before them): it loads, is not offered
  # them, and every other op runs as before.
  export SCALAR_PLUGIN_V2_BEFORE_MOE=1
  expect 0 "block +scalar-v2" -- --impl-lib "$v2" --op all --cases 5 --no-default-fixtures --out "$tmp/v2-before-moe"
  unset SCALAR_PLUGIN_V2_BEFORE_MOE
  python3 - "$tmp/v2-before-moe/conform.json" <<'PY' || fail "scalar-v2 as built before the MoE functions"
import json, sys
r = json.load(open(sys.argv[1]))
ran = {c["op"] for c in r["cases"] if c["impl"] == "scalar-v2"}
assert not ran & {"moe", "moe_route", "moe_experts", "mla_attention"}, ran
assert {"rmsnorm", "block", "paged_attention"} <= ran, ran
assert {n["op"] for n in r["not_run"] if n["impl"] == "scalar-v2"} >= {"moe", "moe_route", "moe_experts",
                                                                         "mla_attention"}, r["not_run"]
PY
  ;;

gqa)
  expect 0 "attention +gqa +[0-9]+ +[0-9]+" -- --impl-lib "$BAD_PLUGIN_DIR/libgqa_plugin.so" --op attention \
    --no-default-fixtures --out "$tmp/good"
  expect 1 "diagnosis: gqa_head_mapping_tiled" -- --impl-lib "$BAD_PLUGIN_DIR/libgqa_tiled_above_4_plugin.so" \
    --op attention --no-default-fixtures --out "$tmp/bad"
  python3 - "$tmp/bad/conform.json" <<'PY' || fail "the twin's report"
import json, re, sys
r = json.load(open(sys.argv[1]))
bad = [c for c in r["cases"] if not c["pass"]]
assert bad, "no case failed"
for c in bad:  # it fails only where a group is above 4, and each failure is named
    H, KV = (int(re.search(k + r"=(\d+)", c["case_id"]).group(1)) for k in ("H", "KV"))
    assert KV > 1 and H // KV > 4, c["case_id"]
    assert "gqa_head_mapping_tiled" in {m["id"] for m in c["diagnosis"]["matches"]}, c["diagnosis"]["lines"]
PY
  ;;
*) fail "unknown mode $mode" ;;
esac
echo "plugin $mode: ok"

#!/usr/bin/env bash
# The hostile corpus (tests/hostile/) against conform: each plugin attacks
# the judge one way; each check asserts the exit code, that the cause is
# named in conform's output, that the report is intact and says what really
# happened, and that no process of the run survives it. A hostile plugin
# passes exactly when its attack works (tests/hostile/hostile.h), so every
# check here fails when the defence it names is gone.
#
# Environment (tests/hostile/CMakeLists.txt sets it): CONFORM,
# CONFORM_SOURCE_DIR, HOSTILE_DIR (the built plugins), NOOP_PLUGIN.
# Checks that need numpy (the command workers) are skipped without it;
# those that need a second uid (root only: a non-root judge's memory is
# guarded by non-dumpability alone) run as nobody when setpriv exists.
set -uo pipefail
: "${CONFORM:?}" "${CONFORM_SOURCE_DIR:?}" "${HOSTILE_DIR:?}" "${NOOP_PLUGIN:?}"
tmp=$(mktemp -d)
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
lib() { echo "$HOSTILE_DIR/libhostile_$1.so"; }
SRC=$CONFORM_SOURCE_DIR
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done

# Nothing of a run may outlive it: no conform-worker, no hostile plugin's child.
no_survivors() {
  sleep 0.3
  local left
  left=$(pgrep -af -- "$1" | grep -v pgrep || true)
  [ -z "$left" ] || fail "$2: processes survived conform: $left"
}

# run NAME CODE -- ARGS: conform ARGS, its output in $tmp/NAME.out, exit CODE.
run() {
  local name=$1 code=$2
  shift 3
  timeout 300 "$CONFORM" "$@" >"$tmp/$name.out" 2>&1
  local rc=$?
  [ $rc -eq "$code" ] || { tail -40 "$tmp/$name.out"; fail "$name: conform $* exited $rc, expected $code"; }
  no_survivors "$HOSTILE_DIR/libhostile_" "$name"
}
has() { grep -qE -- "$2" "$tmp/$1.out" || { tail -40 "$tmp/$1.out"; fail "$1: no /$2/ in conform's output"; }; }
hasnt() { ! grep -qE -- "$2" "$tmp/$1.out" || { grep -E -- "$2" "$tmp/$1.out" | head -5; fail "$1: /$2/ in conform's output"; }; }

# report DIR PASS IMPL [PYTHON]: DIR/conform.json is a regular file, parses,
# says pass == PASS; IMPL has cases, and (PASS false) a failing one unless
# nothing ran or the directory was tampered with; PYTHON, given the report
# as r, asserts the rest.
report() {
  local dir=$1 pass=$2 impl=$3 extra=${4:-}
  [ -f "$dir/conform.json" ] && [ ! -L "$dir/conform.json" ] || fail "$dir/conform.json: not a regular file"
  python3 - "$dir/conform.json" "$pass" "$impl" "$extra" <<'PY' || fail "$dir/conform.json: the report is not what happened"
import json, sys
r = json.load(open(sys.argv[1]))
want, impl, extra = sys.argv[2] == "true", sys.argv[3], sys.argv[4]
assert r["schema"] == "conform-report/1", r.get("schema")
assert "forged" not in r, "a forged report"
assert r["pass"] is want, "pass is %r" % r["pass"]
mine = [c for c in r["cases"] if c["impl"] == impl]
if not r["nothing_ran"]:
    assert mine, "no case of " + impl
    assert r["summary"]["cases"] == len(r["cases"])
    if not want and not r.get("tampered"):
        assert any(not c["pass"] for c in mine), "no failing case of " + impl
exec(extra)
PY
}

# ---- the judge's memory and truth ------------------------------------------------
as_nobody=""
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  as_nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
fi
for who in self nobody; do
  prefix=""
  if [ $who = nobody ]; then
    [ -n "$as_nobody" ] || continue
    prefix=$as_nobody
    mkdir -p "$tmp/nobody" && chmod 777 "$tmp/nobody"
  fi
  out=$tmp/nobody/heap_scan_$who; [ $who = self ] && out=$tmp/heap_scan
  timeout 300 $prefix "$CONFORM" --impl-lib "$(lib heap_scan)" --op rope --cases 8 --no-default-fixtures --out "$out" \
    >"$tmp/heap_scan_$who.out" 2>&1
  [ $? -eq 1 ] || { tail -30 "$tmp/heap_scan_$who.out"; fail "heap_scan ($who): expected exit 1"; }
  no_survivors "$HOSTILE_DIR/libhostile_" heap_scan
  # The scan works (it finds its own answer) and finds nothing else; the judge's memory does not open.
  has heap_scan_$who "no copy of the expected output in reach: scanned [0-9]+ MiB of my own memory \(my own answer found [1-9]"
  has heap_scan_$who "the judge's memory: Permission denied"
  hasnt heap_scan_$who "FOUND"
  report "$out" false hostile-heap-scan

  out=$tmp/nobody/parent_write_$who; [ $who = self ] && out=$tmp/parent_write
  timeout 300 $prefix "$CONFORM" --impl-lib "$(lib parent_write)" --op rope --cases 4 --no-default-fixtures --out "$out" \
    >"$tmp/parent_write_$who.out" 2>&1
  [ $? -eq 1 ] || { tail -30 "$tmp/parent_write_$who.out"; fail "parent_write ($who): expected exit 1"; }
  no_survivors "$HOSTILE_DIR/libhostile_" parent_write
  has parent_write_$who "cannot write the judge's memory: open /proc/JUDGE/mem: Permission denied; process_vm_writev: Operation not permitted; ptrace\(PTRACE_ATTACH\): Operation not permitted"
  has parent_write_$who "conform-worker: the sandbox refused ptrace \(no access to another process\): EPERM"
  hasnt parent_write_$who "WROTE INTO THE JUDGE"
  report "$out" false hostile-parent-write
done
[ -n "$as_nobody" ] || [ "$(id -u)" != 0 ] || echo "note: no setpriv: the judge's memory checked as root only"

# ---- constructors: forged reports, a helper that rewrites them -----------------------
mkdir -p "$tmp/ctor_exit"
echo "the user's own page" >"$tmp/ctor_exit/conform.html"
run ctor_exit 2 -- --impl-lib "$(lib ctor_exit)" --op rope --cases 3 --out "$tmp/ctor_exit"
has ctor_exit "exited with status 0 before its hello \(while loading the library\)"
has ctor_exit "the sandbox refused clone without CLONE_THREAD"
has ctor_exit "conform.json was changed during the run, not by conform \(a worker\?\): removed"
for f in conform.json conform.xml conform.md; do
  [ ! -e "$tmp/ctor_exit/$f" ] || fail "ctor_exit: the forged $f is still there"
done
grep -q "the user's own page" "$tmp/ctor_exit/conform.html" || fail "ctor_exit: a report file nobody forged was touched"

run ctor_stay 1 -- --impl-lib "$(lib ctor_stay)" --op rope --cases 3 --no-default-fixtures --out "$tmp/ctor_stay"
sleep 0.5  # were a helper alive, this is when it would rewrite the report
hasnt ctor_stay "REWROTE"
has ctor_stay "conform.xml was changed during the run, not by conform"
has ctor_stay "^rope +hostile-ctor +3 "
report "$tmp/ctor_stay" false hostile-ctor '
assert any("conform.xml was changed during the run" in t for t in r["tampered"]), r.get("tampered")'
[ ! -e "$tmp/ctor_stay/conform.xml" ] && [ ! -e "$tmp/ctor_stay/conform.md" ] || fail "ctor_stay: forged reports left"

# ---- replay: a table recorded under one seed ------------------------------------------
for way in hash seed; do
  table=$tmp/table_$way
  rm -f "$table"
  HOSTILE_TABLE=$table HOSTILE_RECORD=1 run replay_${way}_record 0 -- --impl-lib "$(lib replay_$way)" --op rope --cases 20 --out "$tmp/rr"
  # The threat: under the seed it was recorded with, the table passes without computing.
  HOSTILE_TABLE=$table run replay_${way}_fixed 0 -- --impl-lib "$(lib replay_$way)" --op rope --cases 20 --out "$tmp/rf_$way"
  report "$tmp/rf_$way" true hostile-replay-$way
  # The defence: --seed random draws cases the table never saw.
  HOSTILE_TABLE=$table run replay_${way}_random 1 -- --impl-lib "$(lib replay_$way)" --op rope --cases 20 --seed random \
    --out "$tmp/rr_$way"
  has replay_${way}_random "FAIL hostile-replay-$way rope"
  report "$tmp/rr_$way" false hostile-replay-$way \
    'assert any(not c["pass"] for c in mine if c["origin"] == "property"), "a property case passed from the table"'
done
# By pointer: the worker's buffers are its own, fresh per call; an address comes back with another case.
run replay_pointer 1 -- --impl-lib "$(lib replay_pointer)" --op rope --cases 20 --no-default-fixtures --out "$tmp/rp"
has replay_pointer "FAIL hostile-replay-pointer rope"
report "$tmp/rp" false hostile-replay-pointer

# ---- inputs, outputs, late writes ---------------------------------------------------------
run input_mutation 1 -- --impl-lib "$(lib input_mutation)" --op rope --cases 6 --no-default-fixtures --out "$tmp/im"
has input_mutation "x\[0\] \+= 1; rewrote [1-9][0-9]* digests?"
has input_mutation "rope wrote into its input 'x' \(inputs are read-only\)"
report "$tmp/im" false hostile-input-mutation
run input_mutation_full 1 -- --impl-lib "$(lib input_mutation_full)" --op rope --cases 6 --no-default-fixtures --out "$tmp/imf"
has input_mutation_full "rewrote [1-9][0-9]* digests? and [1-9][0-9]* other cop"
hasnt input_mutation_full "wrote into its input"
has input_mutation_full "FAIL err [0-9.e+-]+ at \(token 0,"  # the answer to a changed x[0] is wrong where x[0] is
report "$tmp/imf" false hostile-input-mutation-full

run unwritten 1 -- --impl-lib "$(lib unwritten)" --op rope --cases 6 --no-default-fixtures --out "$tmp/uw"
has unwritten "left element [0-9]+ of output 'out' \[[0-9]+,[0-9]+\] unwritten"
report "$tmp/uw" false hostile-unwritten

run late_write 1 -- --impl-lib "$(lib late_write)" --op rope --cases 6 --no-default-fixtures --out "$tmp/lw"
has late_write "left element [0-9]+ of output 'out' \[[0-9]+,[0-9]+\] unwritten"
report "$tmp/lw" false hostile-late-write

# ---- processes: children, signals ------------------------------------------------------------
run orphan 1 -- --impl-lib "$(lib orphan)" --op rope --cases 3 --no-default-fixtures --out "$tmp/or"
has orphan "cannot leave a process behind: fork: Operation not permitted; SYS_fork: Operation not permitted; clone\(SIGCHLD\): Operation not permitted; setsid: Operation not permitted; setpgid: Operation not permitted"
has orphan "conform-worker: the sandbox refused fork \(a plugin worker starts no process\): EPERM"
hasnt orphan "ESCAPED"
no_survivors libhostile_orphan orphan
report "$tmp/or" false hostile-orphan
if [ -n "$PY" ]; then
  # A command worker may start processes; whatever it starts stays in its group and dies with it.
  run orphan_cmd 1 -- --impl-cmd "$PY $SRC/tests/hostile/orphan_cmd.py" --op rope --cases 2 --no-default-fixtures --out "$tmp/oc"
  has orphan_cmd "setsid child: Operation not permitted; double fork: done; nohup: started; setsid: Operation not permitted"
  no_survivors "$SRC/tests/hostile/orphan_cmd.py" orphan_cmd
  report "$tmp/oc" false hostile-orphan-cmd
else
  echo "note: no python3 with numpy: the command workers are not checked"
fi

run kill_parent 1 -- --impl-lib "$(lib kill_parent)" --op rope --cases 3 --no-default-fixtures --out "$tmp/kp"
has kill_parent "kill\(judge, SIGKILL\): Operation not permitted; tgkill\(judge, SIGKILL\): Operation not permitted; kill\(-1, 0\): Operation not permitted; kill\(-judge's group, 0\): Operation not permitted; pidfd_open\(judge\): Operation not permitted"
has kill_parent "the sandbox refused kill \(signals reach only the worker and its group\)"
report "$tmp/kp" false hostile-kill-parent

# The kernel acting on the judge for a worker: its limits, priorities, CPUs,
# I/O class, and a pipe's SIGIO owner with F_SETSIG SIGKILL (before the
# filter covered them: conform killed, exit 137).
run judge_limits 1 -- --impl-lib "$(lib judge_limits)" --op rope --cases 2 --no-default-fixtures --out "$tmp/jl"
has judge_limits "setpriority\(judge, 19\): Operation not permitted; setpriority\(judge's group, 19\): Operation not permitted; sched_setaffinity\(judge\): Operation not permitted; ioprio_set\(judge, idle\): Operation not permitted; ioctl\(FIOSETOWN, judge\): Operation not permitted; fcntl\(F_SETOWN, judge\): Operation not permitted; fcntl\(F_SETOWN_EX, judge\): Operation not permitted; prlimit\(judge, RLIMIT_FSIZE, 0\): Operation not permitted"
has judge_limits "the sandbox refused prlimit64 of another process"
hasnt judge_limits "REACHED"
report "$tmp/jl" false hostile-judge-limits

# ---- the parser's work ---------------------------------------------------------------------
# A result header of five million empty objects, under the 16 MiB byte limit:
# refused unparsed, in a linear pass (parsed, it held the judge for over ten
# minutes past a 3 s call timeout).
if [ -n "$PY" ]; then
  start=$SECONDS
  run wide_header 1 -- --impl-cmd "$PY $SRC/tests/hostile/wide_header_cmd.py" --op rope --cases 2 --no-default-fixtures \
    --call-timeout 3 --out "$tmp/wh"
  has wide_header "protocol violation in rope: frame: header: more than 65536 JSON values"
  [ $((SECONDS - start)) -lt 60 ] || fail "wide_header: the judge took $((SECONDS - start)) s over a 2-case run"
  report "$tmp/wh" false hostile_wide_header
fi

# ---- restarts ------------------------------------------------------------------------------
# A worker that dies between cases (in a supports request) and answers every
# call right: the run passes, but its restarts are counted and said (before:
# nothing said).
if [ -n "$PY" ]; then
  run restarts 0 -- --impl-cmd "$PY $SRC/tests/hostile/restarts_cmd.py" --op rope,rmsnorm --cases 12 \
    --no-default-fixtures --report all --out "$tmp/rs"
  has restarts "^restarted: hostile_restarts [1-9][0-9]* times in [0-9]+ calls"
  grep -q "^restarted: hostile_restarts" "$tmp/rs/conform.md" || fail "restarts: conform.md does not say it"
  report "$tmp/rs" true hostile_restarts '
w = [x for x in r["workers"] if x["impl"] == "hostile_restarts"]
assert w and w[0]["restarts"] >= 3, w'
fi

# ---- reports that agree ----------------------------------------------------------------------
# Right answers, and forged PASS pages for the formats the run does not write:
# before, conform exited 1 for the forgery while its conform.json said pass.
run tamper_pass 1 -- --impl-lib "$(lib tamper_pass)" --op rope --cases 4 --no-default-fixtures --out "$tmp/tp"
has tamper_pass "conform.md was changed during the run, not by conform \(a worker\?\): removed"
[ ! -e "$tmp/tp/conform.md" ] && [ ! -e "$tmp/tp/conform.html" ] || fail "tamper_pass: a forged page is still there"
report "$tmp/tp" false hostile-tamper-pass '
assert all(c["pass"] for c in mine), "its cases pass"
assert len(r["tampered"]) == 2, r.get("tampered")'

# ---- sibling workers ---------------------------------------------------------------------
# Beside an honest worker that answered the same case a moment before (before
# each worker had a Landlock domain of its own: the answer found in the
# sibling's heap, every case passed).
run sibling_scan 1 -- --isolate --impl scalar,hostile-sibling-scan --impl-lib "$(lib sibling_scan)" --op rope \
  --cases 4 --no-default-fixtures --out "$tmp/ss"
has sibling_scan "sibling workers: [1-9][0-9]* \([0-9]+: Permission denied"
hasnt sibling_scan "FOUND|scanned, nothing\)"
report "$tmp/ss" false hostile-sibling-scan '
assert all(c["pass"] for c in r["cases"] if c["impl"] == "scalar")'

# ---- time and memory ------------------------------------------------------------------------
HOSTILE_STATE=$tmp/hang.state run hang 1 -- --impl-lib "$(lib hang)" --op rope,rmsnorm --cases 6 --call-timeout 2 \
  --no-default-fixtures --out "$tmp/hang"
has hang "timed out after 2 s in rope and was killed \(--call-timeout raises the limit\) \(the worker is restarted"
report "$tmp/hang" false hostile-hang '
rope = [c for c in mine if c["op"] == "rope"]
bad = [c for c in rope if not c["pass"]]
assert len(bad) == 1 and "timed out" in bad[0]["error"], bad  # the first call only: the run went on
assert len(rope) > 1 and all(c["pass"] for c in mine if c["op"] == "rmsnorm")'

run memory_hog 1 -- --impl-lib "$(lib memory_hog)" --op rope --cases 2 --worker-memory 1 --no-default-fixtures --out "$tmp/mh"
has memory_hog "hostile: malloc failed after [0-9]+ MiB"
mib=$(grep -oE "malloc failed after [0-9]+ MiB" "$tmp/memory_hog.out" | head -1 | grep -oE "[0-9]+")
[ "$mib" -lt 1024 ] || fail "memory_hog: took $mib MiB under a 1 GB limit"
hasnt memory_hog "TOOK"
report "$tmp/mh" false hostile-memory-hog

if [ -n "$PY" ]; then
  # A worker that stops reading: the judge's write times out like its read (a call of 4 MiB, a 1 MiB pipe).
  "$CONFORM" generate --op rope --preset tinyllama-1.1b --tokens 512 --cases 3 --out "$tmp/big_rope.h5" >/dev/null 2>&1 ||
    fail "generate: the big rope fixture"
  run stall 1 -- --impl-cmd "$PY $SRC/tests/hostile/stall_cmd.py" --op rope --cases 0 --fixtures "$tmp/big_rope.h5" \
    --call-timeout 2 --out "$tmp/stall"
  has stall "timed out after 2 s in rope \(the worker stopped reading its input\) and was killed"
  no_survivors "$SRC/tests/hostile/stall_cmd.py" stall
  report "$tmp/stall" false hostile-stall
fi

# ---- what the user sees ------------------------------------------------------------------------
run forgery 1 -- --impl-lib "$(lib forgery)" --op rope --cases 3 --no-default-fixtures --report json,junit --out "$tmp/fg"
# Every forged line is the worker's, prefixed; the judge quotes the message on one line of its own.
if grep "FORGED" "$tmp/forgery.out" | grep -vE "^  worker\[hostile-forgery\] \| |^  error: +rope: the worker reports internal: rope returned CONFORM_ERR_INTERNAL: FORGED-MSG / " | grep -q .; then
  grep "FORGED" "$tmp/forgery.out" | head; fail "forgery: a forged line reached conform's output as its own"
fi
LC_ALL=C grep -q $'\x1b' "$tmp/forgery.out" && fail "forgery: an escape character reached conform's output"
LC_ALL=C grep -q $'\xc2\x9b' "$tmp/forgery.out" && fail "forgery: a C1 CSI reached conform's output"
LC_ALL=C grep -q $'\r' "$tmp/forgery.out" && fail "forgery: a carriage return reached conform's output"
LC_ALL=C grep -q $'\xe2\x80\xae' "$tmp/forgery.out" && fail "forgery: a bidi override reached conform's output"
LC_ALL=C grep -q $'\xe2\x80\xa8' "$tmp/forgery.out" && fail "forgery: a line separator reached conform's output"
has forgery "/proc/[0-9]+/fd/1: Permission denied; /proc/[0-9]+/fd/2: Permission denied; /dev/tty: No such device or address"
has forgery "^rope +hostile-forgery +3 +0 "
report "$tmp/fg" false hostile-forgery
python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" "$tmp/fg/conform.xml" || fail "forgery: conform.xml is not XML"
# --json: stdout is the report and nothing else.
timeout 300 "$CONFORM" --impl-lib "$(lib forgery)" --op rope --cases 2 --no-default-fixtures --json --out "$tmp/fgj" \
  >"$tmp/fgj.stdout" 2>"$tmp/fgj.stderr"
[ $? -eq 1 ] || fail "forgery --json: expected exit 1"
python3 -c "import json, sys; r = json.load(open(sys.argv[1])); assert r['pass'] is False" "$tmp/fgj.stdout" ||
  fail "forgery --json: stdout is not the truthful report"
# On a terminal: the worker has none (its own session), so /dev/tty does not reach the screen.
if command -v script >/dev/null; then
  script -qec "$CONFORM --impl-lib $(lib forgery) --op rope --cases 1 --no-default-fixtures --out $tmp/fgt" /dev/null \
    >"$tmp/forgery_tty.out" 2>&1
  has forgery_tty "/dev/tty: No such device or address"
  # (conform's own progress line erases itself with ESC [K, and a relayed line may follow it on its row)
  if tr -d '\r' <"$tmp/forgery_tty.out" | sed 's/\x1b\[K//g' | grep "FORGED" |
    grep -vE "  worker\[hostile-forgery\] \| .*FORGED|^  error: " | grep -q .; then
    fail "forgery on a terminal: a forged line reached the terminal unprefixed"
  fi
  no_survivors "$HOSTILE_DIR/libhostile_" forgery_tty
fi

echo precious >"$tmp/outside"
mkdir -p "$tmp/sl"
HOSTILE_TARGET=$tmp/outside run symlink 1 -- --impl-lib "$(lib symlink)" --op rope --cases 3 --no-default-fixtures --out "$tmp/sl"
has symlink "planted [1-9][0-9]* symlinks in $tmp/sl"
[ "$(cat "$tmp/outside")" = precious ] || fail "symlink: the file outside was written through a link"
report "$tmp/sl" false hostile-symlink
mkdir -p "$tmp/sd" "$tmp/elsewhere"
echo precious >"$tmp/elsewhere/conform.json"
HOSTILE_TARGET=$tmp/outside HOSTILE_TARGET_DIR=$tmp/elsewhere run symlink_dir 1 -- --impl-lib "$(lib symlink_dir)" --op rope \
  --cases 3 --no-default-fixtures --out "$tmp/sd"
# Nothing planted stays where the user looks: conform's directory goes back
# to --out, the planted link beside it under a name that says so.
has symlink_dir "--out $tmp/sd was replaced during the run \(by a worker\?\): conform's directory is back at $tmp/sd, and what was put there is now $tmp/sd.planted-[0-9]+"
[ "$(cat "$tmp/elsewhere/conform.json")" = precious ] || fail "symlink_dir: the report went through the swapped directory"
[ "$(cat "$tmp/outside")" = precious ] || fail "symlink_dir: the file outside was written through a link"
[ -d "$tmp/sd" ] && [ ! -L "$tmp/sd" ] || fail "symlink_dir: --out is not conform's directory again"
ls -d "$tmp"/sd.planted-* >/dev/null 2>&1 || fail "symlink_dir: the planted link was not kept aside"
report "$tmp/sd" false hostile-symlink-dir '
assert any("was replaced during the run" in t for t in r["tampered"]), r.get("tampered")'


# ---- passing without working ---------------------------------------------------------------------
run nan_repeat 1 -- --impl-lib "$(lib nan_repeat)" --op rope,rmsnorm --cases 100 --no-default-fixtures --out "$tmp/nr"
has nan_repeat "nondeterministic: (rope|rmsnorm) was called twice with the same inputs .* then nan"
report "$tmp/nr" false hostile-nan-repeat
# Which calls are repeated follows --seed: the same seed twice, the same cases caught.
run nan_repeat_s1 1 -- --impl-lib "$(lib nan_repeat)" --op rope --cases 60 --no-default-fixtures --seed 5 --out "$tmp/nr1"
run nan_repeat_s2 1 -- --impl-lib "$(lib nan_repeat)" --op rope --cases 60 --no-default-fixtures --seed 5 --out "$tmp/nr2"
python3 - "$tmp/nr1/conform.json" "$tmp/nr2/conform.json" <<'PY' || fail "nan_repeat: --seed 5 twice caught different cases"
import json, sys
caught = [[(c["case_id"], c["pass"]) for c in json.load(open(f))["cases"]] for f in sys.argv[1:]]
assert caught[0] == caught[1], (caught[0], caught[1])
assert any(not p for _, p in caught[0]) and any(p for _, p in caught[0]), caught[0]
PY
bench=(bench --op rope,rmsnorm --tokens 4 --min-time 0.02 --min-reps 3 --settle-ms 0)
# In bench no call repeats another's inputs (each repetition's are perturbed):
# its trick never fires there, so it computes every call; the gate's repeated
# calls (above) are what catch it.
run nan_repeat_bench 0 -- "${bench[@]}" --impl-lib "$(lib nan_repeat)"
hasnt nan_repeat_bench "returned NaN"

run lazy_bench 1 -- "${bench[@]}" --impl-lib "$(lib lazy)"
has lazy_bench "hostile-lazy rope T=4 disagrees with torch: max rel diff [0-9.e+-]+ in repetition [0-9-]+ \(input set [0-9]\)"
has lazy_bench "hostile-lazy rmsnorm T=4 disagrees with torch"
run lazy 1 -- --impl-lib "$(lib lazy)" --op rope,rmsnorm --cases 30 --no-default-fixtures --out "$tmp/lz"
# Right answers from memory: every repetition's inputs are perturbed, so there
# is none to look up (before: 445 of its calls answered from memory, timed as
# a lookup, and passed every check).
run memo_bench 0 -- "${bench[@]}" --impl-lib "$(lib memo)"
hasnt memo_bench "answered from memory"
has memo_bench "hostile-memo rope T=4: [0-9.]+ (us|ms) round trip \(measured\)"
report "$tmp/lz" false hostile-lazy

run none 1 -- --impl-lib "$(lib none)" --op rope,rmsnorm --cases 5 --report all --out "$tmp/none"
has none "conform: no case ran for hostile-none \(rope: [0-9]+ cases declined: this build declines everything; rmsnorm: [0-9]+ cases declined"
report "$tmp/none" false hostile-none \
  'assert [n["impl"] for n in r["nothing_ran"]] == ["hostile-none"] and "declines everything" in r["nothing_ran"][0]["reason"], r["nothing_ran"]'
# Every format states the run's one verdict (before: conform.md and conform.html said PASS, JUnit 0 failures).
verdicts() {  # verdicts DIR: md, html and JUnit all say FAIL, and why
  grep -q "^### conform: FAIL" "$1/conform.md" || fail "$1/conform.md does not say FAIL"
  grep -q "<title>conform: FAIL" "$1/conform.html" || fail "$1/conform.html does not say FAIL"
  grep -qE '<testsuites name="conform" tests="[0-9]+" failures="[1-9]' "$1/conform.xml" || fail "$1/conform.xml has no failure"
  grep -q 'testsuite name="conform.run"' "$1/conform.xml" || fail "$1/conform.xml does not say why the run failed"
}
verdicts "$tmp/none"
# Declining an op's property cases and answering its fixtures (whose answers
# are in files a worker can read): before, rope passed on its fixtures alone.
run fixtures_only 1 -- --impl-lib "$(lib fixtures_only)" --op rope,rmsnorm --cases 8 --report all --out "$tmp/fo"
has fixtures_only "conform: no property case of rope ran for hostile-fixtures-only \(rope: [0-9]+ cases declined: this build declines rope's property cases\)"
has fixtures_only "^rope +hostile-fixtures-only +[1-9][0-9]* +[1-9][0-9]* .*FAIL: no property case ran +\([0-9]+ declined\)"
hasnt fixtures_only "^rmsnorm +hostile-fixtures-only .*FAIL"
verdicts "$tmp/fo"
report "$tmp/fo" false hostile-fixtures-only '
assert [(n["impl"], n.get("op")) for n in r["nothing_ran"]] == [("hostile-fixtures-only", "rope")], r["nothing_ran"]
assert all(c["pass"] for c in mine) and any(c["op"] == "rope" and c["origin"] == "fixture" for c in mine)'
run empty 2 -- --impl-lib "$(lib none)" --op rope --cases 0 --no-default-fixtures --out "$tmp/empty"
has empty "the selection has no case"

# ---- the cost of a call ----------------------------------------------------------------------------
run noop_bench 1 -- bench --impl-lib "$NOOP_PLUGIN" --op rope --tokens 4 --min-time 0.02 --min-reps 3 --settle-ms 0
has noop_bench "worker noop: a trivial call \(rmsnorm \[1,8\]\) costs [0-9.]+ (us|ms) round trip, [0-9.]+ (us|ms) of it in the kernel as the worker claims"
has noop_bench "noop rope T=4: [0-9.]+ (us|ms) round trip \(measured\), [0-9.]+ (us|ms) in the kernel \(claimed\), .* the rest; [0-9.]+ MB through the pipes"
has noop_bench "noop rope T=4 disagrees with torch"

echo "hostile: ok"

# What every CLI test script starts with (sourced): a private temporary
# directory, removed however the script ends, and fail MESSAGE (exit 1); and
# the helpers the scripts share (expect, find_python, need_chromium).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE [PATTERN] -- ARGS...: runs the command under test with ARGS, its
# stdout and stderr in $tmp/out; unless it exits CODE and (where PATTERN is
# given; "" matches any line) the output matches PATTERN, prints the output
# and fails. A script sets what differs (or a wrapper, with `local`):
#   expect_cmd   the command, an array (default: "$CONFORM")
#   expect_tail  arguments put after ARGS, an array (default none; e.g. (--out "$tmp"))
#   expect_grep  PATTERN's kind, as grep's option: -G basic (default), -E extended, -F fixed
#   expect_name  what the failure messages call the command (default conform)
# Variables before it go to the command's environment: VAR=1 expect 0 "" -- ...
expect_cmd=()
expect_tail=()
expect_grep=-G
expect_name=conform
expect() {
  local code=$1 pattern="" match=0; shift
  if [ "${1-}" != "--" ]; then pattern=${1-} match=1; shift; fi
  [ "${1-}" = "--" ] || fail "expect: usage: expect CODE [PATTERN] -- ARGS..."
  shift
  local cmd=("${expect_cmd[@]}")
  ((${#cmd[@]})) || cmd=("$CONFORM")
  "${cmd[@]}" "$@" "${expect_tail[@]}" >"$tmp/out" 2>&1
  local rc=$?
  [ $rc -eq "$code" ] || { cat "$tmp/out"; fail "$expect_name $* exited $rc, expected $code"; }
  ((match)) || return 0
  local shown="'$pattern'"
  [ "$expect_grep" != -E ] || shown="/$pattern/"
  grep -q "$expect_grep" -- "$pattern" "$tmp/out" || { cat "$tmp/out"; fail "$expect_name $*: no $shown in the output"; }
}

# find_python MODULES: PY, the full path of the first of python3 (on PATH) and
# /usr/bin/python3 that imports MODULES ("h5py, numpy"); empty where neither
# does. (Debian's python3-h5py lives in /usr/bin/python3, which a pyenv or
# venv python3 earlier on PATH may shadow.)
find_python() {
  PY=""
  local p
  for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import $1" 2>/dev/null; then PY=$(command -v "$p"); return 0; fi
  done
  return 0
}

# need_chromium NAME: chrome, a headless-capable Chromium; installed with apt
# when it is missing and this may (root, or password-less sudo); else the
# script is skipped (exit 77). NAME prefixes the line that says it installs.
browser() { command -v chromium || command -v chromium-browser || command -v google-chrome || true; }
need_chromium() {
  chrome=$(browser)
  if [ -z "$chrome" ]; then
    local install=()
    if ! command -v apt-get >/dev/null; then :; elif [ "$(id -u)" -eq 0 ]; then install=(apt-get)
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then install=(sudo -n apt-get); fi
    if ((${#install[@]})); then
      echo "$1: installing chromium (${install[*]} install chromium)"
      export DEBIAN_FRONTEND=noninteractive
      "${install[@]}" install -y -qq --no-install-recommends chromium >"$tmp/apt.log" 2>&1 ||
        { "${install[@]}" update -qq >>"$tmp/apt.log" 2>&1 &&
          "${install[@]}" install -y -qq --no-install-recommends chromium >>"$tmp/apt.log" 2>&1; }
      chrome=$(browser)
      [ -n "$chrome" ] || tail -5 "$tmp/apt.log"
    fi
  fi
  [ -n "$chrome" ] || { echo "skipped: no chromium, and it cannot be installed here (needs root or password-less sudo and apt)"; exit 77; }
}

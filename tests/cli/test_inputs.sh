#!/usr/bin/env bash
# Hostile inputs through the command line (docs/inputs.md): each class of
# input conform reads — config.json, a checkpoint's index and header, GGUF
# metadata, shard reports, logits files, --params, counts on flags, output
# paths — given a file or value that declares too much, nests too deep or
# points elsewhere. Each must be refused with exit 2 naming the file and the
# field, in bounded time (a hang is a failure here, not a ctest timeout), with
# a message of bounded size, and nothing the user had may change.
set -uo pipefail
: "${CONFORM:?path to the conform binary}"
: "${SRC:?the source tree}"
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"  # $tmp, fail, expect, find_python
expect_cmd=(timeout 60 "$CONFORM")
find_python "h5py, numpy"
[ -n "$PY" ] || { echo "skipped: no python3 with h5py and numpy"; exit 77; }
in=$tmp/in
"$PY" "$SRC/tests/cli/hostile_inputs.py" "$in" "$SRC/fixtures/configs/llama3.1-8b.json" || fail "hostile_inputs.py"
gate=(--impl scalar --op rmsnorm --cases 1 --no-default-fixtures --out "$tmp/reports")

# refused CODE PATTERN -- ARGS: expect, and the message is short (a value is
# shown by its start, never whole).
refused() {
  expect "$@"
  local n
  n=$(wc -c <"$tmp/out")
  [ "$n" -lt 2000 ] || { head -c 600 "$tmp/out"; fail "a ${n}-byte message for: ${*:4}"; }
}

# ---- 1: recursion on attacker-chosen depth ------------------------------------------
refused 2 "config-deep.json: nested deeper than 64 levels" -- anatomy --config "$in/config-deep.json"
refused 2 "model.safetensors.index.json: index: nested deeper than 64 levels" -- "${gate[@]}" --weights "$in/index-deep"
refused 2 "metadata-deep.safetensors: header: nested deeper than 64 levels" -- "${gate[@]}" --weights "$in/metadata-deep.safetensors"
refused 2 "report-deep.json: nested deeper than 64 levels" -- merge-reports "$in/report-deep.json" --out "$tmp/merged"
# --params: a pattern std::regex compiles recursively, and one it matches in exponential time.
refused 2 "more than 4096" -- "${gate[@]}" --params "$(printf '(%.0s' $(seq 3000))a$(printf ')%.0s' $(seq 3000))"
refused 2 "groups nested deeper than 64" -- "${gate[@]}" --params "$(printf '(%.0s' $(seq 100))a$(printf ')%.0s' $(seq 100))"
refused 2 "back-reference" -- "${gate[@]}" --params '(T=1).*\1'
refused 2 "selects no case" -- --impl scalar --op attention --cases 3 --no-default-fixtures --out "$tmp/reports" \
  --params '^(.*,)*(.*=)*X'

# ---- 4: declared sizes, checked before anything is allocated for them ------------------
refused 2 "config-layers.json: num_hidden_layers: expected a positive integer <= 4096" -- anatomy --config "$in/config-layers.json"
refused 2 "config-wrap.json: hidden_size: expected a positive integer <= 1048576" -- anatomy --config "$in/config-wrap.json"
refused 2 "config-heads.json: num_attention_heads: expected a positive integer <= 4096" -- anatomy --config "$in/config-heads.json"
refused 2 "gguf-layers.gguf: llama.block_count: expected a positive integer <= 4096" -- "${gate[@]}" --weights "$in/gguf-layers.gguf"
refused 2 "case too large (S x KV x hd past 2\^26: its keys)" -- --impl scalar --no-default-fixtures --out "$tmp/reports" \
  --case 'attention(T=1,S=67108864,H=1,KV=1,hd=4,qpos=0,kpos=0,mag=1,outliers=0,seed=1)'
refused 2 "case too large (T x S x H past 2\^27: its scores)" -- --impl scalar --no-default-fixtures --out "$tmp/reports" \
  --case 'attention(T=4096,S=4096,H=32,KV=8,hd=4,qpos=0,kpos=0,mag=1,outliers=0,seed=1)'
refused 2 "^--threads: expected at most" -- "${gate[@]}" --threads 1000000
refused 2 "^--threads: expected at most" -- bench --impl scalar --op rmsnorm --tokens 1 --threads 1000000
refused 2 "--positions: expected a first position in \[0, " -- forward --preset tinyllama-1.1b --scale-down 16 --positions 9223372036854775806
refused 2 "--tokens: expected a count in \[1, 16777216\]" -- forward --preset tinyllama-1.1b --scale-down 16 --tokens 1099511627776

# ---- 5: loose parsing: the whole token, in range ------------------------------------------
refused 2 "^--seed: expected a number or 'random', found '-1'" -- "${gate[@]}" --seed -1
refused 2 "^--seed: expected a number or 'random', found ''" -- "${gate[@]}" --seed ''
refused 2 "^--shrink-time: expected a finite number >= 0, found 'nan'" -- "${gate[@]}" --shrink-time nan
refused 2 "field 'T' given twice" -- --impl scalar --no-default-fixtures --out "$tmp/reports" \
  --case 'rmsnorm(T=3,D=8,T=4,eps=1e-5,mag=1,outliers=0,seed=1)'
refused 2 "field 'pos': expected a whole number in \[0, 1099511627776\]" -- --impl scalar --no-default-fixtures \
  --out "$tmp/reports" --case 'rope(T=1,n=1,hd=4,layout=neox,theta=10000,pos=9223372036854775806,mag=1,outliers=0,seed=1)'

# ---- 3: HDF5 data that is not in the file ------------------------------------------------
fwd=(forward --preset tinyllama-1.1b --scale-down 16 --tokens 4)
refused 2 "logits-unwritten.h5: logits: declared but never written" -- "${fwd[@]}" --expect-logits "$in/logits-unwritten.h5"
refused 2 "logits-external.h5: logits: stored in another file" -- "${fwd[@]}" --expect-logits "$in/logits-external.h5"

# ---- 7: a 20 MB value is shown by its start ------------------------------------------------
refused 2 'config-bigstr.json: model_type: expected a model type, found "xxxx.*\.\.\.' -- anatomy --config "$in/config-bigstr.json"

# ---- 6: outputs: an existing file is replaced only with --force; a link is not followed ----
echo keep >"$tmp/page.html"
refused 2 "page.html: exists (use --force to overwrite)" -- anatomy --preset tinyllama-1.1b --html "$tmp/page.html"
[ "$(cat "$tmp/page.html")" = keep ] || fail "anatomy --html replaced a file without --force"
mkdir -p "$tmp/elsewhere"
ln -s "$tmp/elsewhere" "$tmp/reports-link"
refused 2 "reports-link/: a symbolic link (to $tmp/elsewhere)" -- --impl scalar --op rmsnorm --cases 1 --no-default-fixtures \
  --out "$tmp/reports-link/"
[ -z "$(ls -A "$tmp/elsewhere")" ] || fail "--out followed a link: $(ls "$tmp/elsewhere")"
echo "inputs: every hostile input refused with exit 2, file and field named"

#!/usr/bin/env bash
# The Python side of the worker protocol, without conform: the client against
# the judge's framing (test_client.py), numpy_worker's maths where the golden
# files do not reach (test_numpy_ops.py), and numpy_worker (and torch_worker,
# when torch is importable) against every golden file (check_numpy_worker.py).
# Exit 77 (ctest: skipped) when no python3 here has numpy and h5py.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Debian's python3-numpy / python3-h5py live in /usr/bin/python3, which a
# pyenv or venv python3 earlier on PATH may shadow.
PY=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import numpy, h5py" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "SKIP: no python3 with numpy and h5py (apt-get install python3-numpy python3-h5py)"; exit 77; }

rc=0
"$PY" "$here/test_client.py" || rc=1
"$PY" "$here/test_numpy_ops.py" || rc=1
"$PY" "$here/check_numpy_worker.py" || rc=1
if "$PY" -c "import torch" 2>/dev/null; then
  "$PY" "$here/check_numpy_worker.py" --torch || rc=1
else
  echo "torch_worker: not checked (no torch; Debian: apt-get install python3-torch)"
fi
exit $rc

#!/usr/bin/env bash
# Runs the tests: builds first when build/ is missing or stale, then ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/conform ] || [ ! -f build/CMakeCache.txt ]; then
  scripts/setup.sh
else
  # Stale or not, an incremental build is cheap and exact.
  cmake --build build -j "$(nproc)"
fi
cd build
ctest --output-on-failure -j "$(nproc)" "$@"

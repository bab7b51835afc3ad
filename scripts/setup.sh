#!/usr/bin/env bash
# Installs every dependency from Debian by package name, then configures and
# builds conform into build/ (Release, ccache when present).
# Non-interactive and idempotent: safe to run again; apt skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libopenblas0-pthread      # LibTorch 1.13 (CPU); without OpenBLAS its GEMMs fall back to the reference BLAS (~25x slower)
  catch2 librapidcheck-dev               # tests and property generation
  libhdf5-dev                            # fixtures
  libhwy-dev                             # SIMD implementation (Highway)
  libcli11-dev nlohmann-json3-dev libfmt-dev
  python3 python3-h5py python3-numpy     # scripts/h5py_example.py, the numpy worker (impls/worker_example/)
  python3-torch                          # the PyTorch worker example (impls/worker_example/torch_worker.py), scripts/rope_f32_fixtures.py
  python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
                                         # the Python package (python/): its pytest plugin and examples, installed into
                                         # a clean venv by ctest python.package (pip --no-index: no package index needed)
  chromium                               # headless render checks of the HTML reports (ctest cli.html_render, cli.anatomy_html):
                                         # installed here, not by a test while others run (that test was then skipped)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch's GEMMs go through libblas.so.3; `conform bench` measures against
# OpenBLAS's pthread build (the one Debian ranks first). Select it explicitly
# if another BLAS alternative was chosen by hand.
blas=/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3
if [ -e "$blas" ] && command -v update-alternatives >/dev/null &&
   [ "$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)" != "$(readlink -f "$blas")" ]; then
  echo "setup: selecting OpenBLAS (pthread) for libblas.so.3"
  if [ "$(id -u)" -eq 0 ]; then update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas"
  else sudo update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas"; fi
fi

generator=()
# A fresh build dir uses Ninja when present; an existing one keeps its generator.
if [ ! -f build/CMakeCache.txt ] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release ${CONFORM_CMAKE_ARGS:-}
cmake --build build -j "$(nproc)"
echo "setup: built build/conform"

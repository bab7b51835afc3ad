#!/usr/bin/env bash
# Packs, into .device-deps/ (git-ignored), what building conform needs that
# the GPU machine's image lacks: that image has nvcc, CMake, ninja and a
# Python with torch (whose LibTorch scripts/device-check.sh uses), but no
# apt, no network, and none of Catch2, RapidCheck, HDF5, Highway, CLI11,
# nlohmann-json or fmt. They are copied from this machine's Debian packages
# (scripts/setup.sh installs them), so run this here, then carry
# .device-deps to the GPU machine together with the working tree.
#
#   .device-deps/root/usr/...   the packages' headers, libraries and CMake
#                               configs at their Debian paths (the configs
#                               locate their files relative to themselves)
#   .device-deps/hdf5/{include,lib}
#                               HDF5 in the plain prefix FindHDF5 searches
#                               under HDF5_ROOT, with every shared library it
#                               loads that is not glibc (libcurl, libsz, ...)
#   .device-deps/deps.cmake     `cmake -C` script pointing find_package there
#   .device-deps/env.sh         LD_LIBRARY_PATH for building and running
set -euo pipefail
cd "$(dirname "$0")/.."
out=.device-deps
limit_mb=60

# Packages whose files are copied whole (less docs): name:what-for.
packages=(
  catch2                # Catch2 v2 header, CMake config, Catch.cmake (catch_discover_tests)
  librapidcheck-dev     # RapidCheck headers, static library, CMake config
  libhwy-dev libhwy1    # Highway headers, CMake config, shared libraries
  libcli11-dev          # CLI11 (header-only) and its CMake config
  nlohmann-json3-dev    # nlohmann-json (header-only) and its CMake config
  libfmt-dev libfmt9    # fmt headers, CMake config, shared library
)
hdf5_lib=/usr/lib/x86_64-linux-gnu/hdf5/serial/libhdf5.so
hdf5_include=/usr/include/hdf5/serial

missing=()
for p in "${packages[@]}" libhdf5-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "pack-device-deps: not installed here: ${missing[*]} (scripts/setup.sh installs them)" >&2
  exit 2
fi

rm -rf "$out"
mkdir -p "$out/root" "$out/hdf5/include" "$out/hdf5/lib"

for p in "${packages[@]}"; do
  dpkg -L "$p" | while read -r f; do
    case "$f" in /usr/share/doc/* | /usr/share/man/* | /usr/share/lintian/*) continue ;; esac
    [ -f "$f" ] || [ -L "$f" ] || continue # directories come with their files
    mkdir -p "$out/root$(dirname "$f")"
    cp -a "$f" "$out/root$f" # symlinks as symlinks: libfmt.so -> libfmt.so.9 -> libfmt.so.9.1.0
  done
done

# HDF5: headers, the library under its SONAME and as libhdf5.so, and every
# non-glibc library it pulls in (the GPU image is another distribution; its
# own copies, if any, may be other versions).
cp -a "$hdf5_include"/. "$out/hdf5/include/"
real=$(readlink -f "$hdf5_lib")
soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
cp -L "$real" "$out/hdf5/lib/$soname"
ln -s "$soname" "$out/hdf5/lib/libhdf5.so"
glibc='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|ld-linux-x86-64|linux-vdso|libstdc\+\+|libgcc_s)\.so'
ldd "$real" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
  [[ $name =~ $glibc ]] && continue
  cp -L "$path" "$out/hdf5/lib/$name"
done

cat >"$out/deps.cmake" <<'EOF'
# Written by scripts/pack-device-deps.sh. `cmake -C .device-deps/deps.cmake`:
# find_package() looks in the pack before the system.
get_filename_component(_conform_deps "${CMAKE_CURRENT_LIST_DIR}" ABSOLUTE)
set(CMAKE_PREFIX_PATH "${_conform_deps}/root/usr" CACHE STRING "conform: packed dependencies (.device-deps)")
set(HDF5_ROOT "${_conform_deps}/hdf5" CACHE PATH "conform: packed HDF5 (.device-deps)")
set(HDF5_PREFER_PARALLEL OFF CACHE BOOL "")
EOF

cat >"$out/env.sh" <<'EOF'
# Written by scripts/pack-device-deps.sh; source it before building or
# running against the pack (the linker follows libhdf5's own dependencies
# through LD_LIBRARY_PATH, and so does the loader).
_conform_deps="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export LD_LIBRARY_PATH="${_conform_deps}/hdf5/lib:${_conform_deps}/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF

{
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  for p in "${packages[@]}" libhdf5-dev; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done
} >"$out/MANIFEST"

size_kb=$(du -sk "$out" | cut -f1)
size_mb=$(((size_kb + 1023) / 1024))
echo "pack-device-deps: $out is ${size_mb} MB ($(find "$out" -type f | wc -l) files; limit ${limit_mb} MB)"
du -sh "$out"/root "$out"/hdf5
if ((size_mb > limit_mb)); then
  echo "pack-device-deps: over the ${limit_mb} MB limit" >&2
  exit 1
fi

#!/usr/bin/env bash
# Packs what scripts/device_check.sh runs on a lent GPU machine into .gpu/ and .gl/ (ignored
# by git; both carried by the `device` tool): kiln's binaries and test binaries from build/, stripped, every
# shared library they load but the C library, and ONNX's test data. That machine is bare and
# offline. The device tool carries at most 64 MiB, hence xz.
#   scripts/device_bundle.sh [BUILD_DIR]     (default build)
# BASELINE_LIB=path/libkiln.so.0 also packs another build's library as baseline/libkiln.so.0
# (and BASELINE_CLI=path/kiln its CLI, which must match the library's headers), for A/B
# timings in one call (device_check.sh's AB=1); it follows the bundle's own in the archive,
# so xz's 64 MiB window stores only what differs. The bundle also carries
# libkiln_vulkan_call_times.so (benchmarks/vulkan_call_times.cpp) where the build has it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib,fallback,onnx} .gpu
bins=("$build"/bin/{kiln,kiln_workload_bench,kiln_matmul_bench,kiln_opencl_copy_peer,kiln_clblast_peer}
      "$build"/tests/unit/kiln_unit_tests "$build"/tests/diff/kiln_diff_tests "$build"/tests/onnx/kiln_onnx_conformance)
for b in "${bins[@]}"; do strip -o "$stage/bin/$(basename "$b")" "$b"; done
strip --strip-unneeded -o "$stage/lib/libkiln.so.0" "$(readlink -f "$build/libkiln.so.0")"
if [[ -n ${BASELINE_LIB:-} ]]; then
  mkdir -p "$stage/baseline"
  strip --strip-unneeded -o "$stage/baseline/libkiln.so.0" "$(readlink -f "$BASELINE_LIB")"
  [[ -n ${BASELINE_CLI:-} ]] && strip -o "$stage/baseline/kiln" "$BASELINE_CLI"
fi
[[ -f $build/lib/libkiln_vulkan_call_times.so ]] && cp "$build/lib/libkiln_vulkan_call_times.so" "$stage/bin/"
for lib in $(ldd "${bins[@]}" | awk '$3 ~ /^\// {print $3}' | sort -u); do
  case $(basename "$lib") in
    libkiln.so*|libc.so*|libm.so*) ;;
    libstdc++.so*|libgcc_s.so*) cp -L "$lib" "$stage/fallback/" ;;  # only where the machine's are older
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
# The GL dispatch libraries NVIDIA's Vulkan driver loads, for an image without them.
mkdir -p .gpu/gl
cp -L /lib/x86_64-linux-gnu/libGLdispatch.so.0 /lib/x86_64-linux-gnu/libGLX.so.0 .gpu/gl/
# libglvnd and the Vulkan loader as Debian packages, which device_check.sh unpacks there when
# NVIDIA's Vulkan driver does not start without them (docs/backends.md).
mkdir -p .gl
(cd .gl && apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 2>/dev/null)
cp -rL /usr/share/libonnx-testdata/data/{node,simple} "$stage/onnx/"
# Both libraries first: xz -9 blocks are 192 MiB, so they share a block and its 64 MiB window.
(cd "$stage" && tar cf - lib/libkiln.so.0 $(ls -d baseline 2>/dev/null) \
   $(find . -mindepth 1 -maxdepth 1 ! -name baseline ! -name lib -printf '%P\n') \
   $(find lib -mindepth 1 ! -name libkiln.so.0)) | xz -9 -T2 > .gpu/bundle.tar.xz
ls -la .gpu/bundle.tar.xz

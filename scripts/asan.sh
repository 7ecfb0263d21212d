#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the test suite: clang 19 with -Werror,
# a Debug build into build-clang/ (or ${KILN_BUILD_DIR}-clang), then every test but
#  - those labelled gpu-devices: the suites run once more on opencl:0 and vulkan:0, whose
#    time goes to PoCL and lavapipe compiling the generated kernels; kiln's host code on
#    those devices is what the sanitizers look at, and the tests that remain reach it
#    (fuzz.smoke and SymbolicRandomGraphs on every device, the backends' own units);
#  - the two that compile programs outside CMake without the sanitizer flags.
# KILN_ASAN_ALL=1 runs the gpu-devices suites too.
#   scripts/asan.sh            # installs what is missing first (scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
clang_dir=${KILN_ASAN_DIR:-${KILN_BUILD_DIR:-build}-clang}
if [ ! -f "$clang_dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$clang_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DKILN_WERROR=ON -DKILN_SANITIZE=address,undefined
fi
cmake --build "$clang_dir"
skip=(-LE gpu-devices)
if [ "${KILN_ASAN_ALL:-0}" = 1 ]; then skip=(); fi
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$clang_dir" --output-on-failure -j "$(nproc)" -E "install.consumer|docs.ir" "${skip[@]}"

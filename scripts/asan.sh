#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the whole test suite: clang 19 with
# -Werror, a Debug build into build-clang/ (or ${KILN_BUILD_DIR}-clang), then every test but
# the two that compile programs outside CMake without the sanitizer flags.
#   scripts/asan.sh            # installs what is missing first (scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
clang_dir=${KILN_ASAN_DIR:-${KILN_BUILD_DIR:-build}-clang}
# PoCL's programs are the same for both builds: the main build's cache, when there is one
# (scripts/test.sh runs the main suite first), serves this one too.
main_pocl=$PWD/${KILN_BUILD_DIR:-build}/test-cache/pocl
pocl=()
if [ -d "$main_pocl" ]; then pocl=(-DKILN_TEST_POCL_CACHE_DIR="$main_pocl"); fi
if [ ! -f "$clang_dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$clang_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
    -DKILN_WERROR=ON -DKILN_SANITIZE=address,undefined "${pocl[@]}"
elif [ ${#pocl[@]} -gt 0 ]; then
  cmake "$clang_dir" "${pocl[@]}" >/dev/null
fi
cmake --build "$clang_dir"
ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir "$clang_dir" --output-on-failure -j "$(nproc)" -E "install.consumer|docs.ir"

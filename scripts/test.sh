#!/usr/bin/env bash
# Quick start, step 2: install dependencies, build, and run every test.
#
# Runs ctest on the main (g++) build: GoogleTest units, lit IR tests, examples, the
# installed-package consumer. Then builds everything once more with clang 19, -Werror and
# AddressSanitizer + UndefinedBehaviorSanitizer, and runs the tests again there (skip with
# KILN_SKIP_CLANG=1): both compilers stay warning-free and the suite stays sanitizer-clean.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${KILN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"

if [ "${KILN_SKIP_CLANG:-0}" != 1 ]; then
  echo "== clang 19 build (-Wall -Wextra -Werror, ASan + UBSan)"
  clang_dir=${build_dir}-clang
  if [ ! -f "$clang_dir/build.ninja" ]; then
    CC=clang-19 CXX=clang++-19 cmake -S . -B "$clang_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
      -DKILN_WERROR=ON -DKILN_SANITIZE=address,undefined
  fi
  cmake --build "$clang_dir"
  # install.consumer and docs.ir compile programs outside CMake, without the sanitizer flags.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir "$clang_dir" --output-on-failure -j "$(nproc)" -E "install.consumer|docs.ir"
fi

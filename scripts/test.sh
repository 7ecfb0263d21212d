#!/usr/bin/env bash
# Quick start, step 2: install dependencies, build, and run every test.
#
# Runs ctest on the main (g++) build: GoogleTest units, lit IR tests, the installed-package
# consumer. Then builds the library, tool and tests once more with clang 19 and -Werror
# (skip with KILN_SKIP_CLANG=1) so that both compilers stay warning-free.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${KILN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"

if [ "${KILN_SKIP_CLANG:-0}" != 1 ]; then
  echo "== clang 19 build (-Wall -Wextra -Werror)"
  clang_dir=${build_dir}-clang
  if [ ! -f "$clang_dir/build.ninja" ]; then
    CC=clang-19 CXX=clang++-19 cmake -S . -B "$clang_dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_WERROR=ON
  fi
  cmake --build "$clang_dir"
  ctest --test-dir "$clang_dir" --output-on-failure -j "$(nproc)" -E install.consumer
fi

#!/usr/bin/env bash
# Quick start, step 2: install dependencies, build, and run every test.
#
# Runs ctest on the main (g++) build: GoogleTest units, lit IR tests, examples, the
# installed-package consumer, `kiln fuzz` on 60 graphs. Then builds everything once more
# with clang 19, -Werror and AddressSanitizer + UndefinedBehaviorSanitizer, and runs the
# tests again there but the suites repeated on opencl:0 and vulkan:0 (scripts/asan.sh; skip
# with KILN_SKIP_CLANG=1): both compilers stay warning-free and kiln's code sanitizer-clean.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests' PoCL cache outlives build trees (CMakeLists.txt, KILN_TEST_POCL_CACHE_DIR): past
# 2 GB it starts again empty.
test_cache=${XDG_CACHE_HOME:-${HOME:-}/.cache}/kiln-tests
if [ -d "$test_cache" ] && [ "$(du -sm "$test_cache" | cut -f1)" -gt 2048 ]; then rm -rf "$test_cache"; fi
scripts/setup.sh
build_dir=${KILN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)"

if [ "${KILN_SKIP_CLANG:-0}" != 1 ]; then
  echo "== clang 19 build (-Wall -Wextra -Werror, ASan + UBSan)"
  scripts/asan.sh
fi

#!/usr/bin/env bash
# ThreadSanitizer run of the threaded tests: clang 19 with -fsanitize=thread into build-tsan/
# (or $KILN_TSAN_DIR), then the tests that run kernels across oneTBB workers, several
# frontend threads, the caches under concurrent use and the random graphs.
#   scripts/tsan.sh            # installs what is missing first (scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
dir=${KILN_TSAN_DIR:-build-tsan}
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKILN_WERROR=ON \
    -DKILN_SANITIZE=thread -DKILN_BUILD_EXAMPLES=OFF
fi
cmake --build "$dir"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp ${TSAN_OPTIONS:-}" \
  ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" \
  -R "Frontend|Thread|Cpu|Devices|CacheBounds|Allocator|DiskCache"

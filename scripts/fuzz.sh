#!/usr/bin/env bash
# libFuzzer over IR text (tests/fuzz/ir_fuzzer.cpp: parse, verify, print round trip, -O2
# verified after every pass, interpreter at -O0 against -O2). Builds build-fuzz/ with clang
# 19 (-fsanitize=fuzzer,address,undefined), then fuzzes for SECONDS (default 60) with JOBS
# processes (default 1) from the seed corpus tests/fuzz/corpus; new inputs go to
# build-fuzz/corpus/, crashing inputs to build-fuzz/crashes/.
#   scripts/fuzz.sh [SECONDS] [JOBS]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
seconds=${1:-60}
jobs=${2:-1}
dir=${KILN_FUZZ_DIR:-build-fuzz}
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
    -DKILN_SANITIZE=address,undefined -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF
fi
cmake --build "$dir" --target kiln_ir_fuzzer
mkdir -p "$dir/corpus" "$dir/crashes"
parallel=()
# Several jobs write their logs (fuzz-N.log) to the working directory: build-fuzz/.
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
src=$PWD
cd "$dir"
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  bin/kiln_ir_fuzzer corpus "$src/tests/fuzz/corpus" -max_total_time="$seconds" "${parallel[@]}" \
  -max_len=4096 -timeout=10 -rss_limit_mb=4096 -artifact_prefix=crashes/ -print_final_stats=1

#!/usr/bin/env bash
# libFuzzer over IR text or ONNX model bytes. TARGET `ir` (tests/fuzz/ir_fuzzer.cpp: parse,
# verify, print round trip, -O2 verified after every pass, interpreter at -O0 against -O2)
# seeds from tests/fuzz/corpus; `onnx` (tests/fuzz/onnx_fuzzer.cpp: import from memory, the
# same checks) from ONNX's node tests (libonnx-testdata) and tests/onnx's small models.
# Builds build-fuzz/ with clang 19 (-fsanitize=fuzzer,address,undefined), then fuzzes for
# SECONDS (default 60) with JOBS processes (default 1); new inputs go to
# build-fuzz/corpus-TARGET/, crashing inputs to build-fuzz/crashes-TARGET/. Memory is bounded
# at 2 GiB a process: nothing may allocate what a file only claims.
#   scripts/fuzz.sh [SECONDS] [JOBS] [ir|onnx]        (KILN_FUZZ_KEEP_GOING=1: past crashes)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
seconds=${1:-60}
jobs=${2:-1}
target=${3:-ir}
case "$target" in
  ir) seeds=("$PWD/tests/fuzz/corpus"); max_len=4096 ;;
  onnx) seeds=(/usr/share/libonnx-testdata/data/node "$PWD/tests/onnx/data" "$PWD/tests/onnx/exporter_forms"); max_len=262144 ;;
  *) echo "scripts/fuzz.sh: TARGET is ir or onnx, not '$target'" >&2; exit 2 ;;
esac
dir=${KILN_FUZZ_DIR:-build-fuzz}
if [ ! -f "$dir/build.ninja" ]; then
  CC=clang-19 CXX=clang++-19 cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZ=ON \
    -DKILN_SANITIZE=address,undefined -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF
fi
cmake --build "$dir" --target "kiln_${target}_fuzzer"
mkdir -p "$dir/corpus-$target" "$dir/crashes-$target"
parallel=()
# Several jobs write their logs (fuzz-N.log) to the working directory: build-fuzz/.
if [ "$jobs" -gt 1 ]; then parallel=(-jobs="$jobs" -workers="$jobs"); fi
# KILN_FUZZ_KEEP_GOING=1: fork mode, each crash saved and the run continued (a long run
# then reports every distinct failure instead of stopping at the first).
if [ "${KILN_FUZZ_KEEP_GOING:-0}" = 1 ]; then
  parallel=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
src=$PWD
cd "$dir"
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  "bin/kiln_${target}_fuzzer" "corpus-$target" "${seeds[@]}" -max_total_time="$seconds" "${parallel[@]}" \
  -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix="crashes-$target/" \
  -print_final_stats=1

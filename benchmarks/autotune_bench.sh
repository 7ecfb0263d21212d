#!/usr/bin/env bash
# Tuned against default schedules, per workload, on one device (docs/autotune.md):
#   benchmarks/autotune_bench.sh [DEVICE]        # default cpu
# 1. `kiln autotune warmup examples/workloads` into a fresh cache: its table and wall time.
# 2. kiln_workload_bench (W1-W5b, W8; kiln and the hand-written loops) with KILN_AUTOTUNE=off
#    and =cached in alternating processes, $RUNS times (default 3), then per workload the
#    median times and the median over runs of tuned / default taken within each run.
# $BUILD is the build folder (default build-release, as benchmarks/run.sh builds it);
# $WORKLOAD_ARGS and $WARMUP_ARGS pass flags on (e.g. WARMUP_ARGS="--budget-ms 5000").
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-release}
device=${1:-cpu}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export KILN_CACHE_DIR=$cache
start=$(date +%s.%N)
# shellcheck disable=SC2086  # flag lists
"$build/bin/kiln" autotune warmup examples/workloads --device "$device" ${WARMUP_ARGS:-}
end=$(date +%s.%N)
echo "warmup of examples/workloads on $device: $(echo "$end - $start" | bc) s wall"
for run in $(seq "${RUNS:-3}"); do
  for mode in off cached; do
    # shellcheck disable=SC2086
    KILN_AUTOTUNE=$mode "$build/bin/kiln_workload_bench" --impl kiln,hand --device "$device" ${WORKLOAD_ARGS:-} \
      --json "$cache/$mode.$run.jsonl" > /dev/null
  done
done
/usr/bin/python3 benchmarks/summarize_autotune.py "$cache"

#!/usr/bin/env bash
# Runs kiln's benchmarks on a Release build (build-release/) and prints their figures.
#   benchmarks/run.sh [--benchmark_filter=REGEX]
# Repetitions give the median of several runs; the machine is shared and noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN_BUILD_DIR=build-release KILN_BUILD_TYPE=Release scripts/setup.sh >/dev/null
for bench in kiln_record_bench kiln_pass_bench; do
  build-release/bin/$bench --benchmark_repetitions="${REPS:-7}" \
    --benchmark_report_aggregates_only=true "$@"
done

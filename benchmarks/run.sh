#!/usr/bin/env bash
# Runs kiln's benchmarks on a Release build (build-release/) and prints their figures.
#   benchmarks/run.sh [--benchmark_filter=REGEX]
# Repetitions give the median of several runs; the machine is shared and noisy.
#
# Then compile latency (kiln_compile_bench), custom kernels (kiln_custom_kernel_bench),
# gather and scatter (kiln_index_bench), storage types (kiln_dtype_bench), and the workload suite (kiln_workload_bench:
# W1-W5b and W8, kiln against the peers' hand-written loops and Eigen, one process) $RUNS
# times (default 3), summarized by benchmarks/summarize_workloads.py; its flags come from
# $WORKLOAD_ARGS, e.g.
#   RUNS=1 WORKLOAD_ARGS="--quick --small" benchmarks/run.sh --benchmark_filter=none
# and its JSON lines go to build-release/workload_bench.<run>.jsonl. With PEERS=1 the Python peers
# of ../shared/peers (numpy, numexpr, torch eager; $PEERS_PY picks others) follow on W1-W5b,
# their JSON lines in build-release/peers_py.jsonl; a peer whose module is missing is skipped.
# The matmul workloads follow, against the peers' GEMMs in alternating processes; then, on
# opencl:0, W1-W5b beside a device copy (kiln_opencl_copy_peer) and the matmul workloads
# against CLBlast (kiln_clblast_peer) on the same device.
# With MODELS=1 the real-model suite follows (benchmarks/models/README.md).
# The exit status is 1 when a workload result disagrees with the hand loop's or a peer fails.
set -euo pipefail
cd "$(dirname "$0")/.."
KILN_BUILD_DIR=build-release KILN_BUILD_TYPE=Release scripts/setup.sh >/dev/null
for bench in kiln_record_bench kiln_pass_bench kiln_scalar_bench; do
  build-release/bin/$bench --benchmark_repetitions="${REPS:-7}" \
    --benchmark_report_aggregates_only=true "$@"
done

build-release/bin/kiln_compile_bench

status=0
# Custom kernels: a C function fused in kiln's loop against kiln's own ops and a hand loop.
build-release/bin/kiln_custom_kernel_bench || status=1
# Gather and scatter: an embedding lookup and its gradient against hand loops.
build-release/bin/kiln_index_bench || status=1
# Storage types: f16, bf16 and u8 kernels against f32 and hand loops.
build-release/bin/kiln_dtype_bench || status=1

# RUNS runs of the workload suite (default 3), then the medians and within-run ratios.
rm -f build-release/workload_bench.*.jsonl
for run in $(seq "${RUNS:-3}"); do
  # shellcheck disable=SC2086  # WORKLOAD_ARGS is a list of flags
  build-release/bin/kiln_workload_bench ${WORKLOAD_ARGS:-} --json "build-release/workload_bench.$run.jsonl" >&2 || status=1
done
/usr/bin/python3 benchmarks/summarize_workloads.py build-release/workload_bench.*.jsonl

# The matmul workloads (W6, W7, attention-shaped): kiln, then the peers' hand AVX-512 GEMM
# with its fused epilogue (P6) and OpenBLAS sgemm + an epilogue pass (P7), in alternating
# processes, $RUNS times; the peers are built from ../shared/peers ($PEERS_DIR) as its
# run_peers.sh builds them, and skipped when that folder is not there.
peers=${PEERS_DIR:-../shared/peers}
for run in $(seq "${RUNS:-3}"); do
  echo "run.sh: matmul workloads, run $run" >&2
  build-release/bin/kiln_matmul_bench
  # The attention-shaped product's peer: OpenBLAS sgemm once per batch.
  if [[ -x build-release/bin/kiln_openblas_peer ]]; then build-release/bin/kiln_openblas_peer --threads 2; fi
  if [[ -f $peers/cpp/bench_hand.cpp ]]; then
    mkdir -p build-release/peers
    [[ -x build-release/peers/bench_hand ]] ||
      g++ -O3 -march=native -fopenmp -std=c++20 -Wno-uninitialized -o build-release/peers/bench_hand "$peers/cpp/bench_hand.cpp"
    [[ -x build-release/peers/bench_blas ]] ||
      g++ -O3 -march=native -fopenmp -std=c++20 -o build-release/peers/bench_blas "$peers/cpp/bench_blas.cpp" -lopenblas
    OMP_NUM_THREADS=2 build-release/peers/bench_hand --only W6,W7 --threads 2 --run "$run" | cut -c1-160
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 build-release/peers/bench_blas --only W6,W7 --threads 2 --run "$run" | cut -c1-160
  fi
done

# W1-W5b on opencl:0 (PoCL here), beside a device-to-device copy of W1's bytes there (the
# bandwidth reference for a GPU); skipped without an OpenCL device.
if build-release/bin/kiln devices | grep -q '^opencl:0'; then
  echo "run.sh: W1-W5b on opencl:0, and a device copy there" >&2
  build-release/bin/kiln_opencl_copy_peer --device 0 --mib 64,256
  build-release/bin/kiln_workload_bench --impl kiln --device opencl:0 --only W1,W2,W3,W4,W5a,W5b >&2 || status=1
fi

# W1-W5b and the matmul workloads on vulkan:0 (lavapipe here: a correctness device; the
# figures say what its driver costs); skipped without a Vulkan device.
if build-release/bin/kiln devices | grep -q '^vulkan:0'; then
  echo "run.sh: W1-W5b and the matmul workloads on vulkan:0" >&2
  build-release/bin/kiln_workload_bench --impl kiln --device vulkan:0 --only W1,W2,W3,W4,W5a,W5b >&2 || status=1
  build-release/bin/kiln_matmul_bench --device vulkan:0 --runs 5 || status=1
fi

# The matmul workloads on opencl:0 (PoCL here), then CLBlast on the same device, in
# alternating processes; skipped without an OpenCL device or without CLBlast.
if build-release/bin/kiln devices | grep -q '^opencl:0' && [[ -x build-release/bin/kiln_clblast_peer ]]; then
  for run in $(seq "${RUNS:-3}"); do
    echo "run.sh: matmul workloads on opencl:0, run $run" >&2
    build-release/bin/kiln_matmul_bench --device opencl:0 --runs 7
    build-release/bin/kiln_clblast_peer --device 0 --runs 7
  done
fi

if [[ ${PEERS:-0} == 1 ]]; then
  peers=${PEERS_DIR:-../shared/peers}
  python=/usr/bin/python3  # Debian's: numpy, numexpr and torch live there, not in a pyenv one
  out=build-release/peers_py.jsonl
  : > "$out"
  # the thread settings of run_peers.sh
  export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 NUMEXPR_MAX_THREADS=2
  for peer in ${PEERS_PY:-numpy numexpr torch}; do
    case $peer in
      torch* | nnc-interp) module=torch ;;
      *) module=$peer ;;
    esac
    if ! "$python" -c "import $module" 2>/dev/null; then
      echo "run.sh: skipping the $peer peer ($python has no $module)" >&2
      continue
    fi
    echo "run.sh: $peer peer on W1-W5b" >&2
    "$python" "$peers/bench_py.py" --peer "$peer" --only W1,W2,W3,W4,W5a,W5b >> "$out" || status=1
  done
  # one markdown row per measurement
  "$python" - "$out" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
if rows:
    print("\n| workload | peer | variant | threads | median ms | min | max |\n|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['workload']} | {r['peer']} | {r['variant']} | {r['threads']} | {r['median_ms']:.4g} "
          f"| {r['min_ms']:.4g} | {r['max_ms']:.4g} |")
PY
fi

# The real-model suite (benchmarks/models): with MODELS=1, kiln on cpu, opencl:0 and
# vulkan:0 against onnxruntime on the models export.py wrote to benchmarks/models/out (the
# peers' venv: ../shared/peers/setup_jit_venv.sh, then benchmarks/models/export.py).
if [[ ${MODELS:-0} == 1 ]]; then
  venv=${PEERS_VENV:-$HOME/.cache/peers-venv}
  if [[ -x $venv/bin/python && -d benchmarks/models/out ]]; then
    "$venv/bin/python" benchmarks/models/run.py --kiln-bench build-release/bin/kiln_model_bench || status=1
  else
    echo "run.sh: skipping the model suite (no $venv or no benchmarks/models/out: see benchmarks/models/README.md)" >&2
  fi
fi
exit "$status"

#!/usr/bin/env bash
# Runs on a lent GPU machine (the `device` tool), from the repository root, with .gpu/ carried:
# proves the opencl and vulkan backends on the GPU's own drivers and measures their bandwidth.
#   scripts/device_bundle.sh             # here: .gpu/bundle.tar.xz from build/ (binaries + libraries)
#   bash scripts/device_check.sh         # there, with carry [".gpu", ".gl"]
# Knobs: DEVICES (default "opencl:0 vulkan:0"), DIFF_DEVICES and ONNX_DEVICES (default DEVICES),
# PHASE1_S and ONNX_S (time limits, s), FUZZ_COUNT and FUZZ_COUNT_BIG (FUZZ_COUNT=0: none), BENCH=0 (no
# benchmarks), AB=1 (the A/B phase below, after phase 1), WARM_UP_TRIAL and TRIAL_DEVICE (below),
# TUNE=0 (no tuning), TUNE_S and TUNE_BUDGET_MS (each warmup's limit, s, and its
# --budget-ms). The four calls of 2026-11-26 (benchmarks/RESULTS.md) took 100-160 s each.
# That machine is bare (no Debian packages, no network), so the bundle carries kiln's binaries and
# every shared library they load; the GPU's OpenCL and Vulkan drivers are the machine's own.
# Phase 1 runs the every-op unit tests, the differential suite, the ONNX gate and the fuzzer on
# opencl:0 and vulkan:0 in parallel; phase 2 runs the benchmarks alone, beside device copies;
# phase 3 tunes examples/workloads on each device and times tuned against default.
# Logs and a summary go to $OUT (at most 8 files come back).
set -u
T0=$(date +%s)
OUT=${OUT:-/tmp/kiln-device-out}
K=/tmp/kiln-device
REPO=$PWD
mkdir -p "$OUT" "$K"
say() { echo "[$(($(date +%s) - T0))s] $*" | tee -a "$OUT/summary.txt"; }

tar xJf .gpu/bundle.tar.xz -C "$K" || { say "cannot unpack .gpu/bundle.tar.xz"; exit 1; }
libs=$K/lib
# The machine's libstdc++ when it is at least GCC 12's (GLIBCXX_3.4.30), else the carried one.
sys_cxx=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if [[ -z $sys_cxx ]] || ! grep -qa GLIBCXX_3.4.30 "$sys_cxx"; then libs=$libs:$K/fallback; say "using the carried libstdc++"; fi
ldconfig -p | grep -q libGLdispatch.so.0 || libs=$libs:$REPO/.gpu/gl
ldconfig -p | grep -q 'libvulkan.so.1 ' && say "the machine has its own Vulkan loader; kiln uses the carried one"

# The GPU's drivers: NVIDIA's OpenCL ICD and Vulkan ICD, wherever this image keeps them.
ocl=$(ldconfig -p | awk '/libnvidia-opencl\.so\.1/ {print $NF; exit}')
[[ -n $ocl ]] || ocl=$(find /usr/local/nvidia /usr/lib /usr/lib64 /lib -name 'libnvidia-opencl.so.1' 2>/dev/null | head -1)
mkdir -p "$K/vendors"
[[ -n $ocl ]] && echo "$ocl" > "$K/vendors/nvidia.icd"
vk=$(find /usr/local/nvidia /usr/share/vulkan /etc/vulkan -name 'nvidia_icd*.json' 2>/dev/null | head -1)
say "opencl icd: ${ocl:-none}; vulkan icd: ${vk:-none}"

mkdir -p "$K/cache" "$REPO/build/test-cache"
# Test binaries name the source tree they were built from (/work/main): point it here.
if [[ ! -e /work/main ]]; then mkdir -p /work && ln -s "$REPO" /work/main; fi
kenv=(env "LD_LIBRARY_PATH=$libs" "OCL_ICD_VENDORS=$K/vendors" "VK_DRIVER_FILES=$vk" "VK_ICD_FILENAMES=$vk"
      "KILN_CACHE_DIR=$K/cache" KILN_VULKAN_VALIDATION=0)
B=$K/bin

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv 2>&1 |
  tee -a "$OUT/summary.txt"
"${kenv[@]}" "$B/kiln" devices 2>&1 | tee -a "$OUT/summary.txt"
# No vulkan:0: say why (the loader's own account), then unpack the GL/Vulkan loaders that the
# device tool's README names (.gl/, carried) into / and look again.
if ! "${kenv[@]}" "$B/kiln" devices 2>/dev/null | grep -q '^vulkan:0'; then
  "${kenv[@]}" VK_LOADER_DEBUG=error,warn,driver "$B/kiln" devices > "$OUT/vulkan-loader.log" 2>&1
  ldd "$(dirname "$vk")/../../../lib64/libGLX_nvidia.so.0" >> "$OUT/vulkan-loader.log" 2>&1
  cat "$vk" >> "$OUT/vulkan-loader.log"
  if compgen -G ".gl/*.deb" > /dev/null; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
    say "no vulkan:0; unpacked .gl/*.deb into /"
    "${kenv[@]}" "$B/kiln" devices 2>&1 | tee -a "$OUT/summary.txt"
  fi
fi

# ---- phase 1: correctness, in parallel ----
ops='DeviceSources.*:DeviceUnary.*:DeviceCast.*:DeviceBinary.*:DeviceCompare.*:DeviceLogic.*:DeviceReduce.*:DeviceMovement.*'
ops+=':DeviceEmpty.*:DeviceMatmul.*:DeviceShapes.*:DeviceGemm.*:DeviceCustom.*:AutotuneVariants.*'
shards=5
P1=${PHASE1_S:-150}
mkdir -p "$K/logs"
for dev in ${DEVICES:-opencl:0 vulkan:0}; do
  d=${dev%:0}
  for s in $(seq 0 $((shards - 1))); do
    timeout "$P1" "${kenv[@]}" KILN_TEST_DEVICE=$dev GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$s \
      "$B/kiln_unit_tests" --gtest_filter="$ops" --gtest_brief=1 > "$K/logs/unit.$d.$s.log" 2>&1 &
  done
done
for dev in ${DIFF_DEVICES:-${DEVICES:-opencl:0 vulkan:0}}; do
  d=${dev%:0}
  timeout "$P1" "${kenv[@]}" "$B/kiln_diff_tests" --gtest_filter="EveryDevice/*/${d}0" \
    > "$K/logs/diff.$d.log" 2>&1 &
done
for dev in ${ONNX_DEVICES:-${DEVICES:-opencl:0 vulkan:0}}; do
  # -v, line-buffered: a run that dies still shows how far it got.
  timeout "${ONNX_S:-$P1}" "${kenv[@]}" stdbuf -oL "$B/kiln_onnx_conformance" --device "$dev" --data "$K/onnx" -v \
    --groups node,simple --expectations tests/onnx/expectations.tsv > "$K/logs/onnx.${dev%:0}.log" 2>&1 &
done
if [[ ${FUZZ_COUNT:-150} -gt 0 ]]; then
  timeout "$P1" "${kenv[@]}" "$B/kiln" fuzz --device all --count "${FUZZ_COUNT:-150}" --seed 9100 --keep-going \
    --out "$K/fuzz-failures" > "$K/logs/fuzz.log" 2>&1 &
  timeout "$P1" "${kenv[@]}" "$B/kiln" fuzz --device all --big --count "${FUZZ_COUNT_BIG:-30}" --seed 9500 --keep-going \
    --out "$K/fuzz-failures-big" > "$K/logs/fuzz-big.log" 2>&1 &
fi
# The machine's free memory every 5 s while the tests run.
timeout "$(( ${ONNX_S:-$P1} > P1 ? ${ONNX_S:-$P1} : P1 ))" bash -c 'while :; do echo "$(date +%s) $(free -m | sed -n 2p)"; sleep 5; done' \
  > "$K/logs/memory.log" 2>&1 &
wait
dmesg 2>/dev/null | tail -n 20 > "$K/logs/dmesg.log"
say "phase 1 done"
(cd "$K" && ls -d fuzz-failures* >/dev/null 2>&1 && tar czf "$OUT/fuzz-failures.tgz" fuzz-failures*)
for f in "$K"/logs/*.log; do
  echo "=== $(basename "$f")"
  cat "$f"
done > "$OUT/phase1.log"
for dev in ${DEVICES:-opencl:0 vulkan:0}; do
  dev=${dev%:0}
  passed=$(cat "$K"/logs/unit.$dev.*.log | grep -hoE '^\[  PASSED  \] [0-9]+' | awk '{s += $4} END {print s + 0}')
  failed=$(cat "$K"/logs/unit.$dev.*.log | grep -hE '^\[  FAILED  \] [A-Za-z]' | sort -u)
  say "unit $dev:0: $passed passed; failed: ${failed:-none}"
done
for dev in ${DIFF_DEVICES:-${DEVICES:-opencl:0 vulkan:0}}; do
  say "diff $dev: $(grep -hE '^\[  (PASSED|FAILED)  \]|OK \]|FAILED \]' "$K/logs/diff.${dev%:0}.log" | tr '\n' ' ')"
done
for dev in ${ONNX_DEVICES:-${DEVICES:-opencl:0 vulkan:0}}; do
  say "onnx $dev: $(grep -A3 '^onnx conformance on' "$K/logs/onnx.${dev%:0}.log" | tr '\n' ' ')"
  say "onnx $dev: $(grep -c . "$K/logs/onnx.${dev%:0}.log") lines; last: $(tail -n 1 "$K/logs/onnx.${dev%:0}.log" | cut -c1-200)"
done
for f in fuzz fuzz-big; do [[ -f $K/logs/$f.log ]] && say "$f: $(tail -n 3 "$K/logs/$f.log" | tr '\n' ' ')"; done

# Every variant timed for each key of the tuning database in folder $1 (kiln cache show).
show_tuning() {
  local key
  for key in $("${kenv[@]}" "KILN_CACHE_DIR=$1" "$B/kiln" cache list | awk 'NR > 1 && $1 ~ /\// {print $1}'); do
    "${kenv[@]}" "KILN_CACHE_DIR=$1" "$B/kiln" cache show "$key"
  done
}

# ---- A/B (AB=1, a bundle packed with BASELINE_LIB): the baseline library against the
# bundle's, in alternating processes, on each device: the launch's fixed cost (the workloads
# at 1/256 of their size) with each Vulkan entry point's host time (vulkan_call_times), the
# workloads at full size, and a tuning of W1 and W3 (the tuner's timings against the
# workloads' own) with the GPU's clocks sampled every 20 ms beside it ----
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,pstate,power.draw --format=csv,noheader -lms 20 \
  > "$K/logs/clocks.log" 2>&1 &
clocks=$!
if [[ ${AB:-0} == 1 && -f $K/baseline/libkiln.so.0 ]]; then
  for round in 1 2; do
    for lib in baseline bundle; do
      libs_ab=$libs cli=$B/kiln
      [[ $lib == baseline ]] && libs_ab=$K/baseline:$libs cli=$K/baseline/kiln
      for dev in ${DEVICES:-opencl:0 vulkan:0}; do
        echo "## round $round, $lib library, $dev" >> "$OUT/ab.log"
        pre=()
        [[ $dev == vulkan* && -f $B/libkiln_vulkan_call_times.so ]] && pre=("LD_PRELOAD=$B/libkiln_vulkan_call_times.so")
        timeout 40 "${kenv[@]}" "LD_LIBRARY_PATH=$libs_ab" "${pre[@]}" "$B/kiln_workload_bench" --impl kiln --device "$dev" \
          --only W1,W3,W5a --size-scale 256 2>&1 | grep -v '^\[' >> "$OUT/ab.log"
        timeout 60 "${kenv[@]}" "LD_LIBRARY_PATH=$libs_ab" "$B/kiln_workload_bench" --impl kiln --device "$dev" \
          --only W1,W2,W3,W4,W5a,W5b 2>&1 | grep '^| W' >> "$OUT/ab.log"
        if [[ $round == 1 && -x $cli ]]; then
          tc=$K/ab-tune.$lib.${dev%:0}
          mkdir -p "$tc"
          echo "## tuning, $lib library, $dev, from $(date +%H:%M:%S.%N)" >> "$OUT/ab.log"
          timeout 60 "${kenv[@]}" "LD_LIBRARY_PATH=$libs_ab" "KILN_CACHE_DIR=$tc" "$cli" autotune warmup \
            examples/workloads/w1_ew_chain.kir examples/workloads/w3_softmax.kir --device "$dev" >> "$OUT/ab.log" 2>&1
          show_tuning "$tc" >> "$OUT/ab.log" 2>&1
          echo "## tuning done $(date +%H:%M:%S.%N)" >> "$OUT/ab.log"
        fi
      done
    done
  done
  say "A/B done"
fi

# ---- WARM_UP_TRIAL="10 200": W1 and W3 tuned on TRIAL_DEVICE (default vulkan:0) once per
# --warm-up-ms value, each into a fresh database: the defaults' medians against the
# workloads' own, with the clocks sampled beside them ----
for ms in ${WARM_UP_TRIAL:-}; do
  dev=${TRIAL_DEVICE:-vulkan:0}
  tc=$K/trial.$ms
  mkdir -p "$tc"
  echo "## tuning with --warm-up-ms $ms on $dev, from $(date +%H:%M:%S.%N)" >> "$OUT/trial.log"
  timeout 60 "${kenv[@]}" "KILN_CACHE_DIR=$tc" "$B/kiln" autotune warmup examples/workloads/w1_ew_chain.kir \
    examples/workloads/w3_softmax.kir --device "$dev" --warm-up-ms "$ms" >> "$OUT/trial.log" 2>&1
  show_tuning "$tc" >> "$OUT/trial.log" 2>&1
  echo "## done $(date +%H:%M:%S.%N)" >> "$OUT/trial.log"
done
kill "$clocks"
[[ ${AB:-0} == 1 || -n ${WARM_UP_TRIAL:-} ]] && cp "$K/logs/clocks.log" "$OUT/clocks.log"

[[ ${BENCH:-1} == 1 ]] || { say "done (no benchmarks)"; exit 0; }

# ---- phase 2: bandwidth and GEMM, one at a time ----
bench() { local s=$1; shift; timeout "$s" "$@" 2>&1 | tee -a "$OUT/bench.log"; }
python3 - <<'PY' 2>&1 | tee -a "$OUT/bench.log"
import torch
torch.backends.cuda.matmul.allow_tf32 = False
def timed(fn, reps=30):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(5): fn()
    torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        s.record(); fn(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    return sorted(ts)[len(ts) // 2]
for mib in (64, 256, 1024):
    a = torch.randn(mib * 2**20 // 4, device="cuda"); b = torch.empty_like(a)
    ms = timed(lambda: b.copy_(a))
    print(f"COPY torch-cuda {mib:6d} MiB  median {ms:8.3f} ms  {2 * a.numel() * 4 / ms / 1e6:8.1f} GB/s")
n = 1024
a, w, bias = (torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda"), torch.randn(n, device="cuda"))
ms = timed(lambda: torch.relu(a @ w + bias))
print(f"W6 torch-cuda fp32 (no tf32) median {ms:.4f} ms  {2 * n**3 / ms / 1e6:.0f} GFLOP/s")
PY
[[ ${DEVICES:-opencl:0} == *opencl* ]] && bench 60 "${kenv[@]}" "$B/kiln_opencl_copy_peer" --device 0 --mib 64,256,1024
for dev in ${DEVICES:-opencl:0 vulkan:0}; do
  bench 90 "${kenv[@]}" "$B/kiln_workload_bench" --impl kiln --device $dev --only W1,W2,W3,W4,W5a,W5b \
    --json "$K/workloads.${dev%:0}.jsonl"
  bench 60 "${kenv[@]}" "$B/kiln_matmul_bench" --device $dev --runs 7
done
[[ ${DEVICES:-opencl:0} == *opencl* ]] && bench 60 "${kenv[@]}" "$B/kiln_clblast_peer" --device 0 --runs 7
# A launch's fixed cost: the same workloads at 1/256 of their size, where the kernels take
# microseconds.
for dev in ${DEVICES:-opencl:0 vulkan:0}; do
  bench 40 "${kenv[@]}" "$B/kiln_workload_bench" --impl kiln --device $dev --only W1,W3,W5a --size-scale 256
done
say "phase 2 done"
[[ ${TUNE:-1} == 1 ]] || { say "done (no tuning)"; exit 0; }

# ---- phase 3: the autotuner on the GPU: a warmup of examples/workloads per device, each
# kernel's variants as timed there (lanes per work-item included), then tuned against default
# in alternating processes (benchmarks/autotune_bench.sh's method) ----
for dev in ${DEVICES:-opencl:0 vulkan:0}; do
  d=${dev%:0}
  tc=$K/tune.$d
  mkdir -p "$tc"
  tenv=("${kenv[@]}" "KILN_CACHE_DIR=$tc")
  s0=$(date +%s)
  timeout "${TUNE_S:-110}" "${tenv[@]}" "$B/kiln" autotune warmup examples/workloads --device "$dev" \
    --budget-ms "${TUNE_BUDGET_MS:-2000}" > "$K/logs/tune.$d.log" 2>&1
  say "warmup $dev: exit $?, $(($(date +%s) - s0)) s"
  {
    cat "$K/logs/tune.$d.log"
    "${tenv[@]}" "$B/kiln" cache list
    show_tuning "$tc"
  } > "$OUT/tune.$d.log" 2>&1
  for run in 1 2; do
    for mode in off cached; do
      timeout 40 "${tenv[@]}" KILN_AUTOTUNE=$mode "$B/kiln_workload_bench" --impl kiln --device "$dev" \
        --only W1,W2,W3,W4,W5a,W5b,W8 --json "$tc/$mode.$run.jsonl" > /dev/null 2>&1
    done
  done
  echo "## tuned against default on $dev" >> "$OUT/bench.log"
  python3 benchmarks/summarize_autotune.py "$tc" 2>&1 | tee -a "$OUT/bench.log"
done
say "done"

#!/usr/bin/env bash
# Quick start, step 1: install dependencies, build, and run the main demo.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${KILN_BUILD_DIR:-build}
echo
echo "== kiln opt examples/softmax.kir: the IR, parsed, verified and printed"
"$build_dir/bin/kiln" opt examples/softmax.kir
echo
echo "== kiln run examples/softmax.kir --print --check: compiled for this CPU, each row sums to 1"
"$build_dir/bin/kiln" run examples/softmax.kir --print --check
echo
echo "== kiln codegen --target kernel: the fused softmax as one Kernel IR kernel"
"$build_dir/bin/kiln" codegen examples/softmax.kir --target kernel
echo
echo "== kiln opt -O2 --stats examples/workloads/w7_mlp.kir: the MLP fused into 4 kernels"
"$build_dir/bin/kiln" opt -O2 --stats examples/workloads/w7_mlp.kir
echo
echo "== examples/mlp_forward.cpp: the same MLP written with kiln::Tensor"
"$build_dir/bin/example_mlp_forward"

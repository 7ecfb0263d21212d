#!/usr/bin/env bash
# Installs kiln's dependencies from Debian 12 (only what is missing, so a second run costs
# a second or two), then configures and builds into build/ (or $KILN_BUILD_DIR).
#
#   scripts/setup.sh            # as root, or with sudo available
#   KILN_BUILD_TYPE=Debug scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-numpy
  # LLVM 19 and Clang 19 (the libraries for codegen; clang-19 and its sanitizer runtimes
  # for the clang build of the tests)
  llvm-19-dev llvm-19-tools libclang-19-dev clang-19 libclang-rt-19-dev libzstd-dev
  # Vulkan on lavapipe, shaderc, glslang, SPIRV-Tools
  libvulkan-dev mesa-vulkan-drivers libshaderc-dev glslang-dev glslang-tools spirv-tools
  # the Khronos validation layer, which the tests run the vulkan device under
  vulkan-validationlayers
  # OpenCL on PoCL
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo
  # Libraries
  libeigen3-dev libfmt-dev libtbb-dev libsqlite3-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # The benchmarks' GEMM peers: OpenBLAS (built by benchmarks/run.sh from ../shared/peers)
  # and CLBlast, the OpenCL one (benchmarks/clblast_peer.cpp)
  libopenblas-dev libclblast-dev
  # ONNX import (libonnx over protobuf), ONNX's own test data for the conformance gate, and
  # python3-onnx for the scripts that build the example models
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata python3-onnx
  # Open MPI, for kiln::dist (training across processes and machines) and its tests
  libopenmpi-dev openmpi-bin
  # Graphviz, which draws what `kiln dot` prints (README, docs/cli.md)
  graphviz
)

missing=()
installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null || true)
for p in "${packages[@]}"; do
  grep -qE "^${p} ii" <<<"$installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian packages: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build_dir=${KILN_BUILD_DIR:-build}
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${KILN_BUILD_TYPE:-RelWithDebInfo}" \
        -DKILN_WERROR=ON ${KILN_CMAKE_ARGS:-}
fi
cmake --build "$build_dir"

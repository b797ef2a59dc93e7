#!/usr/bin/env bash
# README's test command: configure, build every target (CUDA kernels too, when nvcc is present), and run
# the CPU tests (ctest label `cpu`); --build-only stops after the build. GPU tests (label `gpu`) run on an H200 via scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cuda=ON
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "test: no nvcc found: building CPU-only (-DMLA_CUDA=OFF)"
  cuda=OFF
fi
[ -x /usr/local/cuda/bin/nvcc ] && export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
cmake -S . -B "$BUILD_DIR" -G Ninja -DMLA_CUDA=$cuda
cmake --build "$BUILD_DIR" -j "$(nproc)"
[ "${1:-}" = "--build-only" ] && exit 0
ctest --test-dir "$BUILD_DIR" -L cpu --output-on-failure -j "$(nproc)"

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
# ptxas prints "wgmma.mma_async instructions are serialized" (C7510-C7520) and still builds: every wgmma of that
# kernel then waits for the one before (session 65: 16 % on a long row). Fail on it; only what this build compiled is
# seen (a fresh build, as CI's, sees every kernel).
build_log=$(mktemp)
trap 'rm -f "$build_log"' EXIT
cmake --build "$BUILD_DIR" -j "$(nproc)" 2>&1 | tee "$build_log"
if grep -q "instructions are serialized" "$build_log"; then
  grep "instructions are serialized" "$build_log" | sed 's/^/test: /' >&2
  echo "test: ptxas serialized the wgmma of a kernel (above); see bench/decode/NOTES.md \"Session 65\" 2" >&2
  exit 1
fi
[ "${1:-}" = "--build-only" ] && exit 0
ctest --test-dir "$BUILD_DIR" -L cpu --output-on-failure -j "$(nproc)"

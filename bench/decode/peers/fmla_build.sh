#!/usr/bin/env bash
# Builds the FlashMLA measurement binaries of session 83 with upstream setup.py's nvcc flags (README.md here):
#   bench/decode/peers/fmla_build.sh [DIR]   (DIR, default build/peer, holds src/: the transcribed FlashMLA sources
#                                             under src/kernels/ and fmla_phase_harness.cu copied to src/harness.cu)
# fmla: the plain kernel; fmla_ph: every phase mark (-DFMLA_PHASES); fmla_ph2: ten marks a pair (less perturbation).
set -euo pipefail
R=$(cd "$(dirname "$0")/../../.." && pwd)
cd "${1:-$R/build/peer}"
F="-O3 -std=c++20 -DNDEBUG -D_USE_MATH_DEFINES -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__
 -U__CUDA_NO_HALF2_OPERATORS__ -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda
 --use_fast_math --ptxas-options=-v,--register-usage-level=10 -lineinfo -gencode arch=compute_90a,code=sm_90a
 -I src -I $R/third_party/cutlass/include -cudart static"
# shellcheck disable=SC2086
nvcc $F -o fmla src/harness.cu 2> fmla.ptxas &
# shellcheck disable=SC2086
nvcc $F -DFMLA_PHASES -o fmla_ph src/harness.cu 2> fmla_ph.ptxas &
# shellcheck disable=SC2086
nvcc $F -DFMLA_PHASES -DFMLA_PH_MASK0=0x8A5 -DFMLA_PH_MASK1=0x646 -o fmla_ph2 src/harness.cu 2> fmla_ph2.ptxas &
wait
grep -Ho "Used [0-9]* registers\|[0-9]* bytes spill stores" fmla*.ptxas

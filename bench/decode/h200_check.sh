#!/usr/bin/env bash
# One device call for the decode kernel: tests (default variants, then 64-row tiles on mma.sync),
# the benchmark table, sanitizers on small cases, and a short Nsight Compute profile of two rows.
# Run from the repo root:  bench/decode/h200_check.sh [BIN_DIR]   (default build-decode/bin; logs in $OUT or /tmp)
set -u
BIN=${1:-build-decode/bin}
O=${OUT:-/tmp/decode_check}
mkdir -p "$O"
T=$BIN/gpu_test_mla_decode
B=$BIN/bench_decode
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261201}
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -8
  grep -E "^\[case\].* out:" "$2" | awk '{print $6}' | sort -t= -k2 -g | tail -1 | sed 's/^/   worst out /'
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 70 "$T" > "$O/test_default.log" 2>&1; summary "tests (wgmma 64-row tiles)" "$O/test_default.log" $?
MLA_DECODE_FORCE_MMA_SYNC=1 timeout 30 "$T" --gtest_filter='*h128*:*h64*:*sq4*:*sq3*:*h32_sq2*' > "$O/test_mma.log" 2>&1
summary "tests (mma.sync 64-row tiles)" "$O/test_mma.log" $?
timeout 45 "$B" --reps 30 > "$O/bench.log" 2>&1; grep -v "^|---" "$O/bench.log"
CS=/usr/local/cuda/bin/compute-sanitizer
F='*b1_h128_sq1_len65*:*tiny_mix*:*b1_h16_sq1_len511*:*b7_h16_sq3*'
timeout 30 $CS --tool memcheck "$T" --gtest_filter="$F" > "$O/memcheck.log" 2>&1; echo "memcheck: $(tail -1 "$O/memcheck.log")"
timeout 20 $CS --tool racecheck "$T" --gtest_filter='*b1_h128_sq1_len65*:*b1_h16_sq1_len65*' > "$O/racecheck.log" 2>&1
echo "racecheck: $(tail -1 "$O/racecheck.log")"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  for r in 17 8; do
    timeout 35 "$NCU" -k regex:mla_decode_kernel -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
      --section MemoryWorkloadAnalysis "$B" --rows $r --reps 1 > "$O/ncu_row$r.txt" 2>&1
    echo "ncu row $r: $(grep -E "^ +(Duration|Memory Throughput|Compute \(SM\) Throughput|DRAM Throughput|Warp Cycles Per Issued)" "$O/ncu_row$r.txt" | awk '{$1=$1};1' | tr '\n' ';')"
  done
else
  echo "ncu: not found"
fi

#!/usr/bin/env bash
# One device call for the decode kernel (fits a 240 s limit): a short smoke test of the 64-row
# warp-specialized kernel (a hang shows here first), all tests, the short tiles on the warp-specialized
# kernel (MLA_DECODE_VARIANT16=ws), the benchmark table for both, memcheck on small cases, and one
# Nsight Compute profile (h128 b128 s4096).
# Run from the repo root:  bench/decode/h200_check.sh [BIN_DIR]   (default build-decode/bin; logs in $OUT or /tmp)
set -u
BIN=${1:-build-decode/bin}
O=${OUT:-/tmp/decode_check}
mkdir -p "$O"
T=$BIN/gpu_test_mla_decode
B=$BIN/bench_decode
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261202}
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -8
  grep -E "^\[case\].* out:" "$2" | awk '{print $6}' | sort -t= -k2 -g | tail -1 | sed 's/^/   worst out /'
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 15 "$T" --gtest_filter='*b1_h128_sq1_len65*:*b1_h64_sq1_len511*' > "$O/test_smoke.log" 2>&1
summary "smoke (ws 64-row)" "$O/test_smoke.log" $?
timeout 60 "$T" > "$O/test_default.log" 2>&1; summary "tests (ws 64-row tiles, mma.sync 16-row tiles)" "$O/test_default.log" $?
MLA_DECODE_VARIANT16=ws timeout 25 "$T" --gtest_filter='*h16*:*h32*' > "$O/test_ws16.log" 2>&1
summary "tests (short tiles on ws)" "$O/test_ws16.log" $?
timeout 45 "$B" --reps 30 > "$O/bench.log" 2>&1; grep -v "^|---" "$O/bench.log"
MLA_DECODE_VARIANT16=ws timeout 25 "$B" --reps 30 --rows 1,2,3,4,5,6,7,8,9 > "$O/bench_ws16.log" 2>&1
echo "-- short tiles on ws:"; grep -v "^|---" "$O/bench_ws16.log"
CS=/usr/local/cuda/bin/compute-sanitizer
timeout 20 $CS --tool memcheck "$T" --gtest_filter='*b1_h128_sq1_len65*:*tiny_mix*:*b1_h16_sq1_len511*' > "$O/memcheck.log" 2>&1
echo "memcheck: $(tail -1 "$O/memcheck.log")"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 30 "$NCU" -k regex:'mla_decode(_ws)?_kernel' -s 1 -c 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis "$B" --rows 17 --reps 1 > "$O/ncu_row17.txt" 2>&1
  echo "ncu row 17: $(grep -E "^ +(Duration|Memory Throughput|Compute \(SM\) Throughput|DRAM Throughput|Warp Cycles Per Issued)" "$O/ncu_row17.txt" | awk '{$1=$1};1' | tr '\n' ';')"
else
  echo "ncu: not found"
fi

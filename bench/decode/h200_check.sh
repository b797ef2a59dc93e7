#!/usr/bin/env bash
# One device call for the decode kernel (fits a 240 s limit). Smoke tests of the three warp-specialized
# schedules first (a hang shows there, in seconds); the first one that passes becomes the reference for
# the rest. Then: all tests, the other schedules / knobs on the cases they change, benchmark tables for
# each schedule and L2-prefetch depth, sanitizers on small cases, one Nsight Compute profile.
# Run from the repo root:  bench/decode/h200_check.sh [BIN_DIR]   (default build-decode/bin; logs in $OUT or /tmp)
set -u
BIN=${1:-build-decode/bin}
O=${OUT:-/tmp/decode_check}
mkdir -p "$O"
T=$BIN/gpu_test_mla_decode
B=$BIN/bench_decode
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261203}
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -8
  grep -E "^\[case\].* out:" "$2" | awk '{print $6}' | sort -t= -k2 -g | tail -1 | sed 's/^/   worst out /'
}
bench() {  # name args...  (environment set by the caller)
  local name=$1; shift
  timeout 30 "$B" --reps 30 "$@" > "$O/bench_$name.log" 2>&1
  echo "-- bench $name (rc $?):"; grep -E "^\| bf16" "$O/bench_$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
SMOKE='*b1_h128_sq1_len65*:*b1_h64_sq1_len511*:*tiny_mix*:*b2_h64_sq2_causal_8191_4096*'
OK=""
for v in ws_pvfirst_slabs; do  # the one ws schedule since run 6 (ws_pvfirst, ws_overlap deleted)
  MLA_DECODE_VARIANT64=$v timeout 12 "$T" --gtest_filter="$SMOKE" > "$O/smoke_$v.log" 2>&1
  rc=$?; summary "smoke $v" "$O/smoke_$v.log" $rc
  [ $rc -eq 0 ] && OK="$OK $v"
done
REF=$(echo $OK | awk '{print $1}')
[ -n "$REF" ] || { echo "no ws schedule passed the smoke tests: see $O/smoke_*.log"; exit 1; }
echo "reference schedule: $REF (passed smoke: $OK)"
export MLA_DECODE_VARIANT64=$REF
timeout 40 "$T" > "$O/test_ref.log" 2>&1; summary "tests, all ($REF)" "$O/test_ref.log" $?
F64='*h128*:*h64*:*sq4*:*sq3*:*h32_sq2*'
for v in $OK mma_sync; do
  [ "$v" = "$REF" ] && continue
  MLA_DECODE_VARIANT64=$v timeout 20 "$T" --gtest_filter="$F64" > "$O/test_$v.log" 2>&1; summary "tests 64-row ($v)" "$O/test_$v.log" $?
done
MLA_DECODE_L2_PREFETCH=2 timeout 40 "$T" > "$O/test_pf2.log" 2>&1; summary "tests, all ($REF, L2 prefetch 2)" "$O/test_pf2.log" $?
MLA_DECODE_VARIANT16=ws MLA_DECODE_L2_PREFETCH=2 timeout 20 "$T" --gtest_filter='*h16*:*h32*' > "$O/test_ws16.log" 2>&1
summary "tests short tiles on $REF (L2 prefetch 2)" "$O/test_ws16.log" $?
bench ref_pf0
MLA_DECODE_L2_PREFETCH=2 bench ref_pf2
MLA_DECODE_L2_PREFETCH=4 bench ref_pf4
for v in $OK; do
  [ "$v" = "$REF" ] && continue
  MLA_DECODE_L2_PREFETCH=2 bench "${v}_pf2" --rows 10,11,12,13,14,15,16,17,18
done
MLA_DECODE_VARIANT16=ws MLA_DECODE_L2_PREFETCH=2 bench ws16_pf2 --rows 1,2,3,4,5,6,7,8,9
MLA_DECODE_VARIANT16=ws MLA_DECODE_L2_PREFETCH=4 bench ws16_pf4 --rows 4,5,6,7,8,9
CS=/usr/local/cuda/bin/compute-sanitizer
MLA_DECODE_L2_PREFETCH=2 timeout 25 $CS --tool memcheck "$T" --gtest_filter='*b1_h128_sq1_len65*:*tiny_mix*:*b1_h16_sq1_len511*:*b7_h16_sq3*' > "$O/memcheck.log" 2>&1
echo "memcheck: $(tail -1 "$O/memcheck.log")"
timeout 20 $CS --tool racecheck "$T" --gtest_filter='*b1_h128_sq1_len65*:*b1_h16_sq1_len65*' > "$O/racecheck.log" 2>&1
echo "racecheck: $(tail -1 "$O/racecheck.log")"
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  MLA_DECODE_L2_PREFETCH=2 timeout 30 "$NCU" -k regex:'mla_decode(_ws)?_kernel' -s 1 -c 1 --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis "$B" --rows 17 --reps 1 > "$O/ncu_row17.txt" 2>&1
  echo "ncu row 17: $(grep -E "^ +(Duration|Memory Throughput|Compute \(SM\) Throughput|DRAM Throughput|Warp Cycles Per Issued|L2 Hit Rate)" "$O/ncu_row17.txt" | awk '{$1=$1};1' | tr '\n' ';')"
fi

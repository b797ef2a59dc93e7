#!/usr/bin/env bash
# fp8 decode (issue 4) on the H200 in one batch: smoke cases (a hang or a layout bug shows in seconds), all
# fp8 tests, the opt-in wgmma-S 64-row variant and L2 prefetch on the cases they change, the bf16 decode tests (regression),
# compute-sanitizer memcheck/racecheck on the small cases, then bench tables: fp8 (both 64-row variants)
# and bf16 (for the fp8 / bf16 ratio). Prints a summary; full logs in $OUT (default /tmp/fp8_check).
# Run from the repo root:  bench/decode/fp8_h200_check.sh [BIN_DIR]   (default build-fp8/bin)
# PART=tests or PART=bench runs one half (each well under 10 minutes; both together may not be).
# PART=ws: the short batch for the warp-specialized 64-row kernel (the default since it passed): all fp8
# tests, the 64-row cases on the other ws variants (WS_VARIANTS, default "ws_stsm"), h128 cases with the L2
# prefetch, three on the old kernel (mma_sync); h_q 128 bench rows (BENCH_ROWS) for ws, each variant and ws
# with L2 prefetch 1 / 2; memcheck on two small 64-row cases (SAN_VARIANT); NCU=1 adds one ncu profile of
# h128 b128 s8192. At most six files in $OUT.
set -u
PART=${PART:-all}
BIN=${1:-build-fp8/bin}
O=${OUT:-/tmp/fp8_check}
mkdir -p "$O"
T=$BIN/gpu_test_mla_decode_fp8
T16=$BIN/gpu_test_mla_decode
B=$BIN/bench_decode
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261129}
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -8
  grep -E "^\[case\].* out(/max\|V\|)?:" "$2" | grep -o "rel_l2=[0-9.e+-]*" | sort -t= -k2 -g | tail -1 | sed 's/^/   worst out /'
}
bench() {  # name args...  (environment set by the caller)
  local name=$1; shift
  timeout 120 "$B" --reps 30 "$@" > "$O/bench_$name.log" 2>&1
  echo "-- bench $name (rc $?):"; grep -E "^\| (fp8|bf16) " "$O/bench_$name.log"
}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
if [ "$PART" = ws ]; then
  S=$O/summary.txt
  timeout 90 "$T" > "$O/tests.log" 2>&1; summary "tests fp8, all (64-row: ws)" "$O/tests.log" $? | tee -a "$S"
  W64='*_h128_*:*_h64_*:*_sq4_*:*_sq3_*:*_h32_sq2_*'
  for v in ${WS_VARIANTS:-ws_stsm}; do
    MLA_DECODE_FP8_VARIANT64=$v timeout 60 "$T" --gtest_filter="$W64" >> "$O/tests_alt.log" 2>&1
    summary "tests fp8 64-row ($v)" "$O/tests_alt.log" $? | tee -a "$S"
  done
  MLA_DECODE_FP8_L2_PREFETCH=2 timeout 60 "$T" --gtest_filter='*_h128_*' >> "$O/tests_alt.log" 2>&1
  summary "tests fp8 h128 (ws, L2 prefetch 2)" "$O/tests_alt.log" $? | tee -a "$S"
  MLA_DECODE_FP8_VARIANT64=mma_sync timeout 30 "$T" --gtest_filter='*_h128_sq1_len65_*:*tiny_mix*:*_h64_sq1_len511_*' \
    >> "$O/tests_alt.log" 2>&1
  summary "tests fp8 64-row (mma_sync, 3 cases)" "$O/tests_alt.log" $? | tee -a "$S"
  ROWS=${BENCH_ROWS:-10,11,12,13,14,15,16,17,18}
  for v in ws_overlap_stsm ${WS_VARIANTS:-ws_stsm} ws_overlap_stsm:1 ws_overlap_stsm:2; do
    MLA_DECODE_FP8_VARIANT64=${v%%:*} MLA_DECODE_FP8_L2_PREFETCH=$([ "$v" = "${v#*:}" ] && echo 0 || echo ${v#*:}) \
      timeout 40 "$B" --reps 30 --format fp8 --rows $ROWS >> "$O/bench.log" 2>&1
    echo "-- bench fp8 h128, $v (variant:L2 prefetch) (rc $?):" | tee -a "$S"
    grep -E "^\| fp8 " "$O/bench.log" | tail -$(echo $ROWS | tr ',' '\n' | wc -l) | tee -a "$S"
  done
  MLA_DECODE_FP8_VARIANT64=${SAN_VARIANT:-ws_overlap_stsm} MLA_SMALL_CASES=1 timeout 60 compute-sanitizer --tool memcheck \
    --error-exitcode 9 "$T" --gtest_filter='*fp8_b1_h128_sq1_len65_*:*tiny_mix*' > "$O/sanitizer.log" 2>&1
  rc=$?
  echo "== memcheck ${SAN_VARIANT:-ws_overlap_stsm} (2 small 64-row cases): rc=$rc $(grep -E 'ERROR SUMMARY' "$O/sanitizer.log" | tail -1)" |
    tee -a "$S"
  if [ -n "${NCU:-}" ] && command -v ncu > /dev/null; then  # one kernel of h128 b128 s8192, briefly
    timeout 90 ncu -k regex:decode_fp8_ws --launch-skip 2 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section SourceCounters --section MemoryWorkloadAnalysis \
      "$B" --reps 3 --format fp8 --rows 18 > "$O/ncu.txt" 2>&1
    echo "== ncu rc=$?" | tee -a "$S"
  fi
  exit 0
fi
if [ "$PART" != bench ]; then
SMOKE='*fp8_b1_h16_sq1_len65_*:*fp8_b1_h32_sq1_len65_*:*fp8_b1_h128_sq1_len65_*:*tiny_mix*'
timeout 30 "$T" --gtest_filter="$SMOKE" > "$O/smoke.log" 2>&1; summary "smoke fp8" "$O/smoke.log" $?
timeout 180 "$T" > "$O/test_fp8.log" 2>&1; summary "tests fp8, all" "$O/test_fp8.log" $?
MLA_DECODE_FP8_VARIANT64=wgmma_s timeout 120 "$T" --gtest_filter='*_h128_*:*_h64_*:*_sq4_*:*_sq3_*' \
  > "$O/test_fp8_wgmma_s.log" 2>&1
summary "tests fp8 64-row (wgmma_s)" "$O/test_fp8_wgmma_s.log" $?
MLA_DECODE_FP8_L2_PREFETCH=4 timeout 120 "$T" --gtest_filter='*_h32_*' > "$O/test_fp8_pf4.log" 2>&1
summary "tests fp8 h32 (L2 prefetch 4; the 16-row kernel ignores it)" "$O/test_fp8_pf4.log" $?
timeout 120 "$T16" > "$O/test_bf16.log" 2>&1; summary "tests bf16 decode (regression)" "$O/test_bf16.log" $?
for tool in memcheck racecheck; do
  MLA_SMALL_CASES=1 timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$T" > "$O/$tool.log" 2>&1
  echo "== $tool fp8 small cases: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool.log" | tail -1)"
done
MLA_DECODE_FP8_VARIANT64=mma_sync timeout 120 "$T" --gtest_filter='*_h128_*:*_h64_*:*_sq4_*:*_sq3_*' \
  > "$O/test_fp8_mma_sync.log" 2>&1
summary "tests fp8 64-row (mma_sync)" "$O/test_fp8_mma_sync.log" $?
MLA_DECODE_FP8_VARIANT64=wgmma_s MLA_SMALL_CASES=1 timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$T" \
  > "$O/memcheck_wgmma_s.log" 2>&1
echo "== memcheck fp8 small cases (wgmma_s): rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck_wgmma_s.log" | tail -1)"
echo "-- price of FP8 (kernel vs unquantized bf16 inputs), per case:"
grep -E "^\[note\]" "$O/test_fp8.log" | sed 's/^\[note\] mla_decode //'
fi
if [ "$PART" != tests ]; then
bench fp8 --format fp8
MLA_DECODE_FP8_VARIANT64=mma_sync bench fp8_mma_sync --format fp8 --rows 10,11,12,13,14,15,16,17,18
MLA_DECODE_FP8_VARIANT64=wgmma_s bench fp8_wgmma_s --format fp8 --rows 10,11,12,13,14,15,16,17,18
bench bf16 --format bf16
fi

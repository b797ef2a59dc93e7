#!/usr/bin/env bash
# Device-queue job of the fp8_ds decode work (issue 6): bash bench/decode/fp8ds_q_run.sh BIN OUTDIR [MODE]
#   MODE quick (default): smoke, the h16 s_q 1 fp8_ds cases (the exact-code kernel), bench_decode h16 rows for
#                         fp8_ds.
#   MODE h16:             quick + memcheck/racecheck on small h16 cases + the SASS opcode histogram.
#   MODE full:            all fp8_ds tests, bench_decode all 18 rows for
#                         fp8_ds and bf16 (fp8 too with FP8_BENCH=1), memcheck + racecheck on small h16 cases.
set -u
BIN=$1
O=$2
MODE=${3:-quick}
mkdir -p "$O"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261206}
T8=$BIN/gpu_test_mla_decode_fp8ds
B=$BIN/bench_decode
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "seed $MLA_TEST_SEED mode $MODE"
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|exceeds|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -12
}
worst() {  # log metric: the largest rel_l2 over the cases, with its max_abs
  grep -F "[case]" "$1" | grep -F " $2: " | sed -E 's/.*rel_l2=([^ ]*) max_abs=([^ ]*).*/\1 \2/' | sort -g | tail -1 |
    sed "s#^#   worst $2 (rel_l2 max_abs): #"
}
timeout 15 "$T8" --gtest_filter='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b1_h16_sq1_len1*' > "$O/smoke.log" 2>&1
summary "smoke h16" "$O/smoke.log" $?
if [ "$MODE" != full ]; then
  FILTER='*_h16_sq1_*'
  ROWS="--rows 1,2,3,4,5,6,7,8,9"
  TT=30
else
  FILTER='*'
  ROWS=""
  TT=${TEST_TIMEOUT:-100}
fi
timeout $TT "$T8" --gtest_filter="$FILTER" > "$O/test_fp8ds.log" 2>&1; summary "fp8_ds tests ($FILTER)" "$O/test_fp8ds.log" $?
for m in "out/max|V|" "lse/max(1,|lse|)" "out vs exact K, fp32 P/max|V|" "lse vs exact K, fp32 P" "out vs bf16 K/max|V|" \
  "lse vs bf16 K"; do
  worst "$O/test_fp8ds.log" "$m"
done
bench() {  # tag format rows-args [env]
  # shellcheck disable=SC2086
  env $4 timeout ${BENCH_TIMEOUT:-60} "$B" --format "$2" --reps 30 $3 > "$O/bench_$1.md" 2>&1
  echo "-- bench $1 (rc $?):"; grep -E "^\| (bf16|fp8|fp8_ds) " "$O/bench_$1.md"; grep -E "rror" "$O/bench_$1.md"
}
bench fp8ds fp8_ds "$ROWS" ""
[ "$MODE" = quick ] && exit 0
if [ "$MODE" = full ]; then
  bench bf16 bf16 "$ROWS" ""
  [ -n "${FP8_BENCH:-}" ] && bench fp8 fp8 "$ROWS" ""
fi
SMALL='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b32_h16_sq1_rand1_70*:*fp8_ds_b3_h16_sq1_zero_tokens*'
MLA_SMALL_CASES=1 timeout ${SAN_TIMEOUT:-40} compute-sanitizer --tool memcheck --error-exitcode 9 "$T8" --gtest_filter="$SMALL" > "$O/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$O/memcheck.log" | tr '\n' ' ')"
MLA_SMALL_CASES=1 timeout ${SAN_TIMEOUT:-30} compute-sanitizer --tool racecheck --error-exitcode 9 "$T8" \
  --gtest_filter='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b32_h16_sq1_rand1_70*' > "$O/racecheck.log" 2>&1
echo "== racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$O/racecheck.log" | tr '\n' ' ')"
# Opcode histogram of the exact-code kernel (kernel_ws16.cuh; static SASS counts), when cuobjdump is there.
CUOBJ=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
if [ -x "$CUOBJ" ]; then
  "$CUOBJ" -sass "$T8" 2> /dev/null | awk '/Function : .*mla_decode_fp8ds_ws16_kernel/ {on = 1; next} /Function :/ {on = 0} on' > "$O/ws16.sass"
  echo "== SASS ws16: $(wc -l < "$O/ws16.sass") lines; top opcodes:"
  grep -oE '^ +/\*[0-9a-f]+\*/ +[A-Z0-9_]+[.A-Z0-9_]*' "$O/ws16.sass" | awk '{print $2}' | sort | uniq -c | sort -rn | head -16 | tr '\n' ' '
  echo
fi

#!/usr/bin/env bash
# Device-queue job of the fp8_ds decode work (issue 6): bash bench/decode/fp8ds_q_run.sh BIN OUTDIR [MODE]
#   MODE quick (default): smoke, the h16 s_q 1 fp8_ds cases (the exact-code kernel), bench_decode h16 rows for
#                         fp8_ds, and two rows with MLA_DECODE_FP8DS_VCONV=alu.
#   MODE full:            all fp8_ds tests (the alu variant too if ALU_TESTS=1), bench_decode all 18 rows for
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
if [ "$MODE" = quick ]; then
  FILTER='*_h16_sq1_*'
  ROWS="--rows 1,2,3,4,5,6,7,8,9"
  TT=30
else
  FILTER='*'
  ROWS=""
  TT=100
fi
timeout $TT "$T8" --gtest_filter="$FILTER" > "$O/test_fp8ds.log" 2>&1; summary "fp8_ds tests ($FILTER)" "$O/test_fp8ds.log" $?
for m in "out/max|V|" "lse/max(1,|lse|)" "out vs exact K, fp32 P/max|V|" "lse vs exact K, fp32 P" "out vs bf16 K/max|V|" "lse vs bf16 K"; do
  worst "$O/test_fp8ds.log" "$m"
done
bench() {  # tag format rows-args [env]
  # shellcheck disable=SC2086
  env $4 timeout 60 "$B" --format "$2" --reps 30 $3 > "$O/bench_$1.md" 2>&1
  echo "-- bench $1 (rc $?):"; grep -E "^\| (bf16|fp8|fp8_ds) " "$O/bench_$1.md"; grep -E "rror" "$O/bench_$1.md"
}
bench fp8ds fp8_ds "$ROWS" ""
if [ "$MODE" = quick ]; then
  bench fp8ds_aluv fp8_ds "--rows 6,9" MLA_DECODE_FP8DS_VCONV=alu
  exit 0
fi
bench bf16 bf16 "$ROWS" ""
[ -n "${FP8_BENCH:-}" ] && bench fp8 fp8 "$ROWS" ""
SMALL='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b32_h16_sq1_rand1_70*:*fp8_ds_b3_h16_sq1_zero_tokens*'
MLA_SMALL_CASES=1 timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$T8" --gtest_filter="$SMALL" > "$O/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$O/memcheck.log" | tr '\n' ' ')"
MLA_SMALL_CASES=1 timeout 30 compute-sanitizer --tool racecheck --error-exitcode 9 "$T8" \
  --gtest_filter='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b32_h16_sq1_rand1_70*' > "$O/racecheck.log" 2>&1
echo "== racecheck rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$O/racecheck.log" | tr '\n' ' ')"

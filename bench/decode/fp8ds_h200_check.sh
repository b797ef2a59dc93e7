#!/usr/bin/env bash
# One device call for the fp8_ds decode kernel (fits a 240 s limit): all fp8_ds tests, the bf16/fp16
# decode tests (regression of the shared kernels), bench_decode for fp8_ds and bf16, then
# compute-sanitizer on small fp8_ds cases. Run from the repo root:
#   bench/decode/fp8ds_h200_check.sh [BIN_DIR] [PARTS]   (default build-decode/bin, "tests bench sanitize")
# Logs in $OUT (or /tmp/fp8ds_check); a one-line summary per step on stdout.
set -u
BIN=${1:-build-decode/bin}
PARTS=${2:-"tests bench sanitize"}  # + "sass": opcode histograms of the fp8_ds kernels
O=${OUT:-/tmp/fp8ds_check}
mkdir -p "$O"
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export MLA_TEST_SEED=${MLA_TEST_SEED:-20261206}
T8=$BIN/gpu_test_mla_decode_fp8ds
T16=$BIN/gpu_test_mla_decode
B=$BIN/bench_decode
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
echo "seed $MLA_TEST_SEED"
summary() {  # name log rc
  echo "== $1: rc=$3 $(grep -E '^\[  (PASSED|FAILED)  \]' "$2" | tr '\n' ' ')"
  grep -E "FAIL|differs|exceeds|rror" "$2" | grep -v "^\[  FAILED  \] [0-9]* test" | head -12
}
worst() {  # log metric (fixed string): the largest rel_l2 over the cases, with its max_abs
  grep -F "[case]" "$1" | grep -F " $2: " | sed -E 's/.*rel_l2=([^ ]*) max_abs=([^ ]*).*/\1 \2/' | sort -g | tail -1 |
    sed "s#^#   worst $2 (rel_l2 max_abs): #"
}
if [[ $PARTS == *tests* ]]; then
  # Smoke first: a hang shows in seconds. If the warp-specialized (>= 48 rows) smoke hangs, the full run and
  # the bench skip every case that runs it.
  timeout 15 "$T8" --gtest_filter='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b1_h32_sq1_len511*' > "$O/smoke.log" 2>&1
  summary "smoke 16/32-row tiles" "$O/smoke.log" $?
  timeout 15 "$T8" --gtest_filter='*fp8_ds_b1_h128_sq1_len65*:*fp8_ds_b7_h128_sq4_causal_tiny_mix*' > "$O/smokews.tmp" 2>&1
  rc=$?; summary "smoke 64-row tiles (ws)" "$O/smokews.tmp" $rc
  cat "$O/smokews.tmp" >> "$O/smoke.log"; rm -f "$O/smokews.tmp"  # at most 8 files come back from $OUT
  FILTER='*'
  if [ $rc -eq 124 ]; then
    WS_HANG=1
    FILTER='-*_h64_*:*_h128_*:*_h16_sq4_*:*_h16_sq3_*:*_h32_sq2_*:*_h32_sq3_*'
  fi
  timeout 100 "$T8" --gtest_filter="$FILTER" > "$O/test_fp8ds.log" 2>&1; summary "fp8_ds tests" "$O/test_fp8ds.log" $?
  for m in "out/max|V|" "lse/max(1,|lse|)" "out vs bf16 K/max|V|" "lse vs bf16 K"; do worst "$O/test_fp8ds.log" "$m"; done
  timeout 60 "$T16" > "$O/test_bf16.log" 2>&1; summary "bf16/fp16 tests" "$O/test_bf16.log" $?
fi
if [[ $PARTS == *bench* ]]; then
  ROWS=""
  [ -n "${WS_HANG:-}" ] && ROWS="--rows 1,2,3,4,5,6,7,8,9"
  for f in fp8_ds bf16; do
    # shellcheck disable=SC2086
    timeout 60 "$B" --format $f --reps 30 $ROWS > "$O/bench_$f.md" 2>&1
    echo "-- bench $f (rc $?):"; grep -E "^\| (bf16|fp8_ds) " "$O/bench_$f.md"; grep -E "plan_decode|rror" "$O/bench_$f.md"
  done
fi
if [[ $PARTS == *sanitize* ]]; then
  SMALL='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b1_h128_sq1_len65*:*fp8_ds_b3_h64_sq1_zero_tokens*:*fp8_ds_b32_h16_sq1_rand1_70*'
  MLA_SMALL_CASES=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$T8" --gtest_filter="$SMALL" > "$O/memcheck.log" 2>&1
  echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log" | tail -1) $(grep -E '^\[  (PASSED|FAILED)  \]' "$O/memcheck.log" | tr '\n' ' ')"
  MLA_SMALL_CASES=1 timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 "$T8" \
    --gtest_filter='*fp8_ds_b1_h16_sq1_len65*:*fp8_ds_b32_h16_sq1_rand1_70*' > "$O/racecheck.log" 2>&1
  echo "== racecheck (256-thread kernel) rc=$? $(grep -E 'RACECHECK SUMMARY' "$O/racecheck.log" | tail -1)"
fi
if [[ $PARTS == *sass* ]] && command -v cuobjdump > /dev/null; then
  # Opcode histograms of every fp8_ds kernel (mangled name holding Fp8DsTraits or decode_fp8ds): the 16-row exact-code
  # ws kernels (default for h_q 16, s_q 1), the dequantizing mma.sync ones and the 64-row ws ones, producer- and
  # owner-converts (what the dequantization costs in instructions). Names are matched, not spelled out, so a new
  # template argument does not drop a kernel; none found is said.
  hist() {
    grep -oE '^\s+/\*[0-9a-f]{4,6}\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9_.]*' | awk '{print $NF}' | sed 's/\..*//' |
      sort | uniq -c | sort -rn | head -25 | tr '\n' ' '
    echo
  }
  kernels=$(cuobjdump -sass "$T8" | grep -oE 'Function : \S+' | awk '{print $3}' | grep -E 'Fp8DsTraits|decode_fp8ds' |
            sort -u)
  [ -n "$kernels" ] || echo "== sass: no fp8_ds kernel found in $T8"
  for k in $kernels; do
    echo "== $k"
    cuobjdump -sass -fun "$k" "$T8" 2> /dev/null | hist  # (quiet: it warns for every cubin without the kernel)
  done > "$O/sass_hist.txt" 2>&1
  echo "== sass histogram written ($(wc -c < "$O/sass_hist.txt") bytes)"
fi

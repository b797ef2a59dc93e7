#!/usr/bin/env bash
# The decode kernels that only a knob read once per process reaches (so no suite run of the default reaches them), each
# tested: the small case set of the suite the knob belongs to, run once per knob setting, side by side. The knobs read on
# every call (MLA_DECODE_N16, _N32, _FP8_VARIANT64 = ws3 / ws_split / ws_qreg, _MERGE, _TILE_ROWS, ...) are switched
# inside the suites already, case by case (tests/gpu/harness/scoped_env.h).
#
# With --flags DIR it also runs the kernels only a build flag reaches (scripts/flag_variants.txt): DIR/NAME/SUITE as
# scripts/flag_builds.sh leaves them, each on its suite's small set with no knob set, beside the knob runs.
#
#   scripts/knob_tests.sh [--bin DIR] [--flags DIR] [--out DIR] [--full] [--timeout S]   (GPU machine, repo root)
#
# --bin DIR  the test binaries (default build/bin); --out DIR  logs and summary.txt (default gpu-logs/knobs).
# --full     each suite's whole case list instead of its small set (MLA_SMALL_CASES=1, the sanitizer sets).
# --timeout  seconds per run (default 240). MLA_TEST_SEED as in gpu_check.sh (one seed for every run, printed).
# Exit status 0 only if every run finished and passed; a run cut short by the timeout fails.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build/bin flags="" out=gpu-logs/knobs small=1 limit=240
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --flags) flags=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --full) small=0; shift ;;
    --timeout) limit=$2; shift 2 ;;
    *) echo "knob_tests: unknown option $1" >&2; exit 2 ;;
  esac
done
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export MLA_TEST_SEED=${MLA_TEST_SEED:-$(date +%s%N | cut -c1-16)}
mkdir -p "$out"
# SUITE KNOB=VALUE: what each setting reaches (mla_decode.cu, decode_fp8/variant64.h, tma_encode.cu say why it exists).
runs=(
  "gpu_test_mla_decode MLA_DECODE_VARIANT64=wgmma"       # 64-row tiles on the 256-thread cp.async + wgmma kernel
  "gpu_test_mla_decode MLA_DECODE_VARIANT64=mma_sync"    # 64-row tiles on the cp.async + mma.sync kernel
  "gpu_test_mla_decode MLA_DECODE_VARIANT16=ws"          # short tiles (h_q 16 / 32) on the 64-row ws kernel
  "gpu_test_mla_decode MLA_DECODE_L2_PREFETCH=2"         # pages prefetched into L2 ahead of the stages
  "gpu_test_mla_decode MLA_DECODE_KV_L2_PROMOTION=128"   # the cache TMA descriptors' L2 promotion
  "gpu_test_mla_decode_fp8 MLA_DECODE_FP8_VARIANT64=mma_sync"
  "gpu_test_mla_decode_fp8 MLA_DECODE_FP8_VARIANT64=ws_ahead"
  "gpu_test_mla_decode_fp8 MLA_DECODE_FP8_L2_PREFETCH=2"
  "gpu_test_mla_decode_fp8 MLA_DECODE_KV_L2_PROMOTION=128"
  # the suite picks the dequantizing reference for it, and drops the three `_combine` twins of 16-row cases (there
  # only for a kernel with a fused merge): 37 small cases
  "gpu_test_mla_decode_fp8ds MLA_DECODE_FP8DS_RG1=dequant"
  "gpu_test_mla_decode_fp8ds MLA_DECODE_FP8DS_WS64=producer"
)
summary=$out/summary.txt
echo "knob_tests $(date -u +%FT%TZ) MLA_TEST_SEED=$MLA_TEST_SEED $([ $small = 1 ] && echo 'small sets' || echo 'full suites')" |
  tee "$summary"
# Each run as "BINARY KNOB=VALUE LOG": the knob runs on --bin's suites, then each build-flag variant's suites (KNOB -:
# none). No '=' in a log's name: the device tool returns no such file.
jobs=()
for r in "${runs[@]}"; do
  read -r suite knob <<< "$r"
  jobs+=("$bin/$suite $knob $out/${suite#gpu_test_}.${knob%%=*}-${knob#*=}.log")
done
if [ -n "$flags" ]; then
  while read -r name suites _; do
    for suite in ${suites//,/ }; do jobs+=("$flags/$name/$suite - $out/${suite#gpu_test_}.flag-$name.log"); done
  done < <(grep -v '^#' scripts/flag_variants.txt | awk 'NF')
fi
# Every binary first, so a missing one stops the script before any run starts (none is left running).
for j in "${jobs[@]}"; do
  read -r exe _ <<< "$j"
  [ -x "$exe" ] || { echo "knob_tests: no $exe" | tee -a "$summary"; exit 1; }
done
pids=() logs=()
for j in "${jobs[@]}"; do
  read -r exe knob log <<< "$j"
  [ "$knob" = - ] && knob=MLA_KNOB_TESTS_NONE=1  # a name nothing reads: the binary's own defaults
  env "$knob" MLA_SMALL_CASES=$small timeout "$limit" "$exe" > "$log" 2>&1 &
  pids+=($!) logs+=("$log")
done
fail=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  log=${logs[$i]}
  # gtest's own closing count: a run that crashed or hit the timeout has none, and fails.
  counts=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$log" | tr '\n' ' ')
  read -r exe knob _ <<< "${jobs[$i]}"
  label="knob ${exe#"$bin"/} $knob"
  [ "$knob" = - ] && label="flag ${exe#"$flags"/} ($(cat "$(dirname "$exe")/FLAGS" 2> /dev/null))"
  echo "$label rc=$rc: ${counts:-no closing count}" | tee -a "$summary"
  if [ $rc -ne 0 ] || ! grep -q '^\[  PASSED  \]' "$log"; then
    fail=1
    grep -E '^\[  FAILED  \] [A-Za-z]|rror' "$log" | head -5 | tee -a "$summary"
  fi
done
echo "knob_tests: $([ $fail = 0 ] && echo ALL OK || echo FAILURES)" | tee -a "$summary"
exit $fail

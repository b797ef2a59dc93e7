#!/usr/bin/env bash
# The decode kernels that only a knob read once per process reaches (so no suite run of the default reaches them), each
# tested: the small case set of the suite the knob belongs to, run once per knob setting, side by side. The knobs read on
# every call (MLA_DECODE_N16, _N32, _FP8_VARIANT64 = ws3 / ws_split / ws_qreg, _MERGE, _TILE_ROWS, ...) are switched
# inside the suites already, case by case (tests/gpu/harness/scoped_env.h).
#
# With --flags DIR it also runs the kernels only a build flag reaches (scripts/flag_variants.txt): DIR/NAME/SUITE as
# scripts/flag_builds.sh leaves them, each on its suite's small set with no knob set, beside the knob runs.
#
#   scripts/knob_tests.sh [--bin DIR] [--flags DIR] [--out DIR] [--full] [--timeout S] [--sanitize [--race-filter F]]
#                                                                                             (GPU machine, repo root)
#
# --bin DIR  the test binaries (default build/bin); --out DIR  logs and summary.txt (default gpu-logs/knobs).
# --sanitize after the test runs, each setting under compute-sanitizer: memcheck on its small set (all side by side),
#            then racecheck on the cases of --race-filter (a gtest filter; the default takes each suite's h_q 64 s_q 3
#            causal case and its b1 h_q 16 one of 65 tokens, so both the 64-row and the 16-row kernels, with their
#            twins), passing when only marked hand-offs are reported (scripts/racecheck_rule.sh).
# --full     each suite's whole case list instead of its small set (MLA_SMALL_CASES=1, the sanitizer sets).
# --timeout  seconds per run (default 240). MLA_TEST_SEED as in gpu_check.sh (one seed for every run, printed).
# Exit status 0 only if every run finished and passed; a run cut short by the timeout fails.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=build/bin flags="" out=gpu-logs/knobs small=1 limit=240 sanitize=0 race_filter='*300_65_1*:*_b1_h16_sq1_len65*'
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --flags) flags=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --full) small=0; shift ;;
    --timeout) limit=$2; shift 2 ;;
    --sanitize) sanitize=1; shift ;;
    --race-filter) race_filter=$2; shift 2 ;;
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
label_of() {  # JOB -> the summary's name for it (a flag variant's with its flags)
  local exe knob
  read -r exe knob _ <<< "$1"
  if [ "$knob" != - ]; then echo "knob ${exe#"$bin"/} $knob"; return; fi
  echo "flag ${exe#"$flags"/} ($(cat "$(dirname "$exe")/FLAGS" 2> /dev/null))"
}
# run_phase TOOL: every job side by side, then each judged in job order into the summary. TOOL test runs the suite
# itself (its small set, or the whole list under --full); memcheck runs it under compute-sanitizer on the small set,
# racecheck on --race-filter's cases, whose hazards pass when all are marked hand-offs (scripts/racecheck_rule.sh).
fail=0
run_phase() {
  local tool=$1 filter='*' small_cases=1 tag=" $1" exe knob log i rc verdict counts pids=() logs=() pre=()
  case $tool in
    test) small_cases=$small tag="" ;;
    racecheck) filter=$race_filter ;;
  esac
  [ $tool = test ] || pre=(compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9)
  for j in "${jobs[@]}"; do
    read -r exe knob log <<< "$j"
    [ "$knob" = - ] && knob=MLA_KNOB_TESTS_NONE=1  # a name nothing reads: the binary's own defaults
    [ $tool = test ] || log=${log%.log}.$tool.log
    env "$knob" MLA_SMALL_CASES=$small_cases timeout "$limit" "${pre[@]}" "$exe" --gtest_filter="$filter" > "$log" 2>&1 &
    pids+=($!) logs+=("$log")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}"
    rc=$?
    log=${logs[$i]}
    verdict=""
    if [ $rc -eq 9 ] && [ $tool = racecheck ]; then verdict=" $(racecheck_verdict "$log")" && rc=0; fi
    # gtest's own closing count: a run that crashed or ran no test fails too (a timeout keeps its 124)
    if [ $rc -eq 0 ] && ! grep -qE '^\[  PASSED  \] [1-9]' "$log"; then rc=1; fi
    counts=$(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$log" | tr '\n' ' ')
    [ $tool = test ] || counts="$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1); $counts"
    echo "$(label_of "${jobs[$i]}")$tag rc=$rc: ${counts:-no closing count}$verdict" | tee -a "$summary"
    if [ $rc -ne 0 ]; then
      fail=1
      grep -E '^\[  FAILED  \] [A-Za-z]|rror' "$log" | head -5 | tee -a "$summary"
    fi
  done
}
run_phase test
if [ $sanitize = 1 ]; then
  command -v compute-sanitizer > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
  # shellcheck source=scripts/racecheck_rule.sh
  . scripts/racecheck_rule.sh
  run_phase memcheck
  run_phase racecheck
fi
echo "knob_tests: $([ $fail = 0 ] && echo ALL OK || echo FAILURES)" | tee -a "$summary"
exit $fail

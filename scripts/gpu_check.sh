#!/usr/bin/env bash
# Runs on the GPU machine (H200): every GPU test binary, then the benchmarks; logs and a summary under
# the directory given (default: ./gpu-logs).
#
#   scripts/gpu_check.sh [--out DIR] [--bin DIR] [--tests-only] [--bench-only] [--filter REGEX]
#                        [--sanitize] [--sanitize-only] [--sanitize-tools "memcheck racecheck"] [--sanitize-filter REGEX]
#                        [--bench-args "ARGS"] [--decode-formats "bf16 fp8"]
#                        [--shards N] [--shard-filter REGEX] [--e2e "IN:OUT:N ..."] [--e2e-formats "fp8 auto"]
#
# --bin DIR   use binaries built elsewhere (e.g. carried build/bin; a COMMIT file there names their commit in the
#             summary); otherwise configure and build here into build-gpu with all cores.
# --filter    only test/bench binaries whose name matches REGEX (e.g. 'decode|fp8').
# --sanitize  also run compute-sanitizer memcheck and racecheck on each test binary's small cases
#             (tests honour MLA_SMALL_CASES=1 to keep these short); --sanitize-filter limits which. racecheck passes
#             when its reports are all at named-barrier hand-offs marked "racecheck: hand-off" in the source.
# --sanitize-only  only the sanitizer runs (no full test run, no benches); --sanitize-tools picks the tools (default
#             both), e.g. the decode suites' memcheck that the H200 call and full_gpu_run.sh run side by side.
# --decode-formats  formats bench_decode runs, one table each (default: bf16 fp8 fp8_ds).
# --e2e "IN:OUT:N ..."  after the benches, `mlaserve bench throughput --model dummy` for each input/output/prompt
#             count, once per --e2e-formats entry (default: fp8 auto), each under MLA_E2E_TIMEOUT (default 300 s),
#             with --output-json; e.g. --e2e "512:512:2000 8192:1024:300" for the seed's two runs.
# --shards N  run each test binary matching --shard-filter (default: the decode suites, 'mla_decode') as N gtest shards
#             side by side (default 4; 1 = one process). A case draws its data and checks it on one core (its CPU
#             reference runs on all), so on the H200 machine's 16 cores the 16-bit and fp8 suites take ~100 s together
#             instead of ~390 s (session 60). The
#             engine and model tests stay one process: each sizes its KV cache from the free GPU memory.
# MLA_TEST_SEED: the data seed of every test (default: time-based), exported once and printed in the summary.
# Every binary runs under a time limit (MLA_STEP_TIMEOUT, default 300 s) so one hang cannot eat the lease.
set -uo pipefail
cd "$(dirname "$0")/.."
out=gpu-logs bin="" tests=1 bench=1 filter="." sanitize=0 sanitize_only=0 sanitize_tools="memcheck racecheck"
sanitize_filter="." bench_args="" decode_formats="bf16 fp8 fp8_ds"
e2e="" e2e_formats="fp8 auto" shards=4 shard_filter="mla_decode"
step_timeout=${MLA_STEP_TIMEOUT:-300}
# cuBLASLt is linked dynamically (CUDA 13 ships no static one here).
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --tests-only) bench=0; shift ;;
    --bench-only) tests=0; shift ;;
    --filter) filter=$2; shift 2 ;;
    --sanitize) sanitize=1; shift ;;
    --sanitize-only) sanitize=1 sanitize_only=1 bench=0; shift ;;
    --sanitize-tools) sanitize_tools=$2; shift 2
      [ -n "${sanitize_tools// }" ] || { echo "gpu_check: --sanitize-tools wants memcheck and/or racecheck" >&2; exit 2; }
      for tool in $sanitize_tools; do
        case $tool in memcheck|racecheck) ;; *) echo "gpu_check: unknown sanitizer tool '$tool'" >&2; exit 2 ;; esac
      done ;;
    --bench-args) bench_args=$2; shift 2 ;;
    --sanitize-filter) sanitize_filter=$2; shift 2 ;;
    --decode-formats) decode_formats=$2; shift 2 ;;
    --e2e) e2e=$2; shift 2 ;;
    --e2e-formats) e2e_formats=$2; shift 2 ;;
    --shards) shards=$2; shift 2
      [[ "$shards" =~ ^[1-9][0-9]*$ ]] || { echo "gpu_check: --shards wants a positive integer, got '$shards'" >&2; exit 2; } ;;
    --shard-filter) shard_filter=$2; shift 2 ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
summary="$out/summary.txt"
: > "$summary"
log() { echo "$*" | tee -a "$summary"; }
# One data seed for the whole run (tests/common/random.h; time-based unless given), so the shards of a suite draw
# from one seed and a failure anywhere replays with MLA_TEST_SEED=<this>.
export MLA_TEST_SEED=${MLA_TEST_SEED:-$(date +%s%N | cut -c1-16)}

# The commit the binaries were built from: MLA_COMMIT, else a COMMIT file beside carried binaries (--bin DIR; the
# device's copy of the tree may carry stale git metadata), else this tree's HEAD.
commit=${MLA_COMMIT:-}
[ -z "$commit" ] && [ -n "$bin" ] && [ -f "$bin/COMMIT" ] && commit="$(cat "$bin/COMMIT") (from $bin/COMMIT)"
[ -z "$commit" ] && commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
log "gpu_check $(date -u +%FT%TZ) commit $commit MLA_TEST_SEED=$MLA_TEST_SEED"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | sed 's/^/gpu: /' | tee -a "$summary"

if [ -z "$bin" ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
  if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > "$out/build.log" 2>&1 &&
         cmake --build build-gpu -j "$(nproc)" >> "$out/build.log" 2>&1; }; then
    log "BUILD FAILED (see build.log)"; tail -30 "$out/build.log"; exit 1
  fi
  bin=build-gpu/bin
fi

fail=0
# racecheck's verdict: only hand-offs marked in the source pass (the rule and why: scripts/racecheck_rule.sh).
# shellcheck source=scripts/racecheck_rule.sh
. scripts/racecheck_rule.sh
# One test binary into LOG: as --shards gtest shards side by side when its name matches --shard-filter (each shard's
# log appended to LOG in shard order), else one process. The status is the worst shard's.
run_tests() {
  local t=$1 log=$2 n=1 i rc=0 r pids=()
  echo "$(basename "$t")" | grep -Eq "$shard_filter" && n=$shards
  if [ "$n" -le 1 ]; then timeout "$step_timeout" "$t" > "$log" 2>&1; return; fi
  for ((i = 0; i < n; ++i)); do
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$step_timeout" "$t" > "$log.shard$i" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}"; r=$?; [ $r -gt $rc ] && rc=$r; done
  : > "$log"
  for ((i = 0; i < n; ++i)); do echo "### shard $i of $n" >> "$log"; cat "$log.shard$i" >> "$log"; rm -f "$log.shard$i"; done
  return $rc
}
# The summary's line for a test log: gtest's counts, summed over shards, and how many processes got to gtest's
# closing count (one that hung or crashed does not).
test_line() {
  awk '/^### shard [0-9]+ of [0-9]+$/ {n = $5}
       /^\[==========\] [0-9]+ tests? from .* ran/ {ran += $2; done++}
       /^\[  PASSED  \] [0-9]+ test/ {passed += $4}
       /^\[  FAILED  \] [0-9]+ test/ {failed += $4}
       END {if (n == 0) n = 1
            printf "%d tests ran (%d of %d process%s finished), %d passed, %d failed", ran, done, n, n == 1 ? "" : "es",
                   passed, failed}' "$1"
}
if [ "$tests" = 1 ]; then
  ran=0  # binaries that ran something: their full test run, or under --sanitize-only their sanitizer run
  for t in "$bin"/gpu_test_*; do
    name=$(basename "$t")
    echo "$name" | grep -Eq "$filter" || continue
    if [ "$sanitize_only" = 0 ]; then
      ran=$((ran + 1))
      start=$(date +%s)
      run_tests "$t" "$out/$name.log"
      rc=$?
      log "test $name rc=$rc $(( $(date +%s) - start ))s: $(test_line "$out/$name.log")"
      [ $rc -ne 0 ] && { fail=1; grep -E 'FAIL|Failure' "$out/$name.log" | head -20 | tee -a "$summary"; }
      # issue 4: the price of FP8 per tested shape class, from the suite's notes (BENCHMARKS.md's table)
      if [ "$name" = gpu_test_mla_decode_fp8 ]; then
        python3 scripts/fp8_price_table.py "$out/$name.log" > "$out/fp8_price_table.md"
        python3 scripts/fp8_suite_errors.py "$out/$name.log" > "$out/fp8_suite_errors.md"
      fi
    fi
    if [ "$sanitize" = 1 ] && echo "$name" | grep -Eq "$sanitize_filter"; then
      [ "$sanitize_only" = 1 ] && ran=$((ran + 1))
      for tool in $sanitize_tools; do
        MLA_SMALL_CASES=1 timeout "$step_timeout" compute-sanitizer --tool $tool --print-limit 100000 --error-exitcode 9 \
          "$t" > "$out/$name.$tool.log" 2>&1
        rc=$?
        log "sanitize $name $tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/$name.$tool.log" | tail -1);" \
            "$(test_line "$out/$name.$tool.log")"
        if [ $rc -eq 9 ] && [ $tool = racecheck ]; then
          verdict=$(racecheck_verdict "$out/$name.$tool.log") && rc=0
          log "sanitize $name racecheck: $verdict"
        fi
        [ $rc -ne 0 ] && fail=1
      done
    fi
  done
  # A test run that ran nothing (a misspelt --filter, a missing binary, or under --sanitize-only a --sanitize-filter
  # that leaves no binary of --filter) must not read as a pass.
  if [ "$ran" = 0 ] && [ "$bench" = 0 ]; then
    filters="--filter '$filter'"
    [ "$sanitize_only" = 1 ] && filters+=" and --sanitize-filter '$sanitize_filter'"
    log "no test binary in $bin matches $filters"
    fail=1
  fi
fi

if [ "$bench" = 1 ]; then
  for b in "$bin"/bench_*; do
    name=$(basename "$b")
    echo "$name" | grep -Eq "$filter" || continue
    variants=("")
    [ "$name" = bench_decode ] && variants=($decode_formats)
    for v in "${variants[@]}"; do
      tag=$name${v:+_$v}
      # shellcheck disable=SC2086
      timeout "$step_timeout" "$b" ${v:+--format $v} $bench_args > "$out/$tag.md" 2> "$out/$tag.err"
      rc=$?
      log "bench $tag rc=$rc"
      tee -a "$summary" < "$out/$tag.md"
      [ $rc -ne 0 ] && { fail=1; tail -5 "$out/$tag.err" | tee -a "$summary"; }
    done
  done
fi
for spec in $e2e; do
  IFS=: read -r in_len out_len n <<< "$spec"
  for f in $e2e_formats; do
    tag=e2e_${in_len}_${out_len}_${n}_$f
    timeout "${MLA_E2E_TIMEOUT:-300}" "$bin/mlaserve" bench throughput --model dummy --input-len "$in_len" \
      --output-len "$out_len" --num-prompts "$n" --kv-cache-dtype "$f" --output-json "$out/$tag.json" \
      > "$out/$tag.log" 2> "$out/$tag.err"
    rc=$?
    log "e2e $tag rc=$rc: $(grep -E '^Throughput' "$out/$tag.log")"
    tr '\r' '\n' < "$out/$tag.err" | grep -E '^(KV cache|CUDA graphs)' | tee -a "$summary"
    [ $rc -ne 0 ] && { fail=1; tr '\r' '\n' < "$out/$tag.err" | tail -3 | tee -a "$summary"; }
  done
done
log "gpu_check: $([ $fail = 0 ] && echo ALL OK || echo FAILURES)"
exit $fail

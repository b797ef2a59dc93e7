#!/bin/bash
# Everything the H200 should run after a change: every GPU test at HEAD (decode suites in parallel), memcheck on the decode suites' small
# cases, bench_decode x3 formats (18 rows), bench_prefill, bench_model, the 512/512 end-to-end pair.
# Usage (on the GPU machine): MLA_BIN=<dir with the binaries> scripts/full_gpu_run.sh <out dir>; one tarball all.tgz in it.
o=${1:-gpu-logs}; B=${MLA_BIN:-build/bin}; mkdir -p $o/t $o/b $o/s
# 240 s a binary: the decode suites run in parallel here, and the fp8 one took 125-138 s of that in session 31 (its
# CPU references plus up to 200 graph replays per small case), too near the 150 s this used to allow.
# One seed for every suite (a failure replays with it); one process a suite (--shards 1): three suites side by side
# already, beside the opt-in runs and the engine tests, on the machine's 16 cores.
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH MLA_STEP_TIMEOUT=240
export MLA_TEST_SEED=${MLA_TEST_SEED:-$(date +%s%N | cut -c1-16)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
( scripts/gpu_check.sh --bin $B --tests-only --shards 1 --filter 'mla_decode$' --out $o/t/a > $o/t/a.txt 2>&1 ) &
( scripts/gpu_check.sh --bin $B --tests-only --shards 1 --filter 'decode_fp8$' --out $o/t/b > $o/t/b.txt 2>&1 ) &
( scripts/gpu_check.sh --bin $B --tests-only --shards 1 --filter 'fp8ds' --out $o/t/c > $o/t/c.txt 2>&1 ) &
# The kernels only a read-once knob reaches (each the previous default or an alternative kept for comparison), on the
# suites' small sets; and those only a build flag reaches when MLA_FLAG_BIN names scripts/flag_builds.sh's output.
( scripts/knob_tests.sh --bin $B ${MLA_FLAG_BIN:+--flags $MLA_FLAG_BIN} --out $o/t/knobs --timeout 200 > $o/t/knobs.txt 2>&1 ) &
scripts/gpu_check.sh --bin $B --tests-only --filter 'cache|codecs|engine|convert|model' --out $o/t/d > $o/t/d.txt 2>&1
MLA_PREFILL_WARPS=5 $B/gpu_test_model_ops --gtest_filter='*prefill*' > $o/t/badknob.log 2>&1; echo "bad MLA_PREFILL_WARPS rc=$? (expect 1): $(grep -c MLA_PREFILL_WARPS $o/t/badknob.log) lines name it"
for kf in MLA_DECODE_L2_PREFETCH:bf16 MLA_DECODE_FP8_L2_PREFETCH:fp8 MLA_DECODE_FORCE_MMA_SYNC:bf16; do
  k=${kf%:*}; env $k=9 $B/bench_decode --format ${kf#*:} --rows 1 --reps 2 > $o/t/badknob_$k.log 2>&1; echo "bad $k=9 rc=$? (expect 1): $(grep -c $k $o/t/badknob_$k.log) lines name it"
done
wait
grep -h "^test\|^knob" $o/t/*.txt | cut -c1-200; grep -h -A3 "FAIL" $o/t/*.txt | head -20
# memcheck of the decode suites' small cases through gpu_check, side by side.
for t in gpu_test_mla_decode gpu_test_mla_decode_fp8 gpu_test_mla_decode_fp8ds; do
  ( MLA_STEP_TIMEOUT=120 scripts/gpu_check.sh --bin $B --sanitize-only --sanitize-tools memcheck --filter "^$t\$" \
      --out $o/s/$t > $o/s/$t.txt 2>&1; grep '^sanitize ' $o/s/$t.txt || echo "memcheck $t: no summary line" ) &
done; wait
# One verdict over the tests and the sanitizer: a failed suite or memcheck run (gpu_check's FAILURES).
bad=0; grep -q "gpu_check: FAILURES" $o/t/*.txt && bad=1
for f in $o/s/*.txt; do grep -q "gpu_check: ALL OK" "$f" || bad=1; done  # a run cut short has no verdict: fails too
grep -q "knob_tests: ALL OK" $o/t/knobs.txt || bad=1
echo "full_gpu_run tests: $([ $bad = 0 ] && echo ALL OK || echo FAILURES)"
# The benches and the end-to-end pair through gpu_check.sh (its bench and --e2e loops), one call per argument set.
gc() { scripts/gpu_check.sh --bin $B --bench-only --out "$@" 2>&1 | grep -E "^(bench|e2e|\| (bf16|fp8|fp8_ds) \|)|KV cache" | cut -c1-200; }
gc $o/b/decode --filter '^bench_decode$' --bench-args "--reps 30"
gc $o/b/prefill --filter '^bench_prefill$'
gc $o/b/model --filter '^bench_model$' --bench-args "--kv-cache-dtype auto,fp8 --batches 1,64,128,256 --steps 6"
MLA_E2E_TIMEOUT=110 gc $o/b/e2e --filter '^$' --e2e "512:512:2000" --e2e-formats "fp8 auto"
cd $o && tar czf all.tgz t s b && rm -rf t s b

#!/bin/bash
# Everything the H200 should run after a change: every GPU test at HEAD (decode suites in parallel), memcheck on the decode suites' small
# cases, bench_decode x3 formats (18 rows), bench_prefill, bench_model, the 512/512 end-to-end pair.
# Usage (on the GPU machine): MLA_BIN=<dir with the binaries> scripts/full_gpu_run.sh <out dir>; one tarball all.tgz in it.
o=${1:-gpu-logs}; B=${MLA_BIN:-build/bin}; mkdir -p $o/t $o/b $o/s
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$LD_LIBRARY_PATH MLA_STEP_TIMEOUT=150
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
( scripts/gpu_check.sh --bin $B --tests-only --filter 'mla_decode$' --out $o/t/a > $o/t/a.txt 2>&1 ) &
( scripts/gpu_check.sh --bin $B --tests-only --filter 'decode_fp8$' --out $o/t/b > $o/t/b.txt 2>&1 ) &
( scripts/gpu_check.sh --bin $B --tests-only --filter 'fp8ds' --out $o/t/c > $o/t/c.txt 2>&1 ) &
scripts/gpu_check.sh --bin $B --tests-only --filter 'cache|codecs|engine|convert|model' --out $o/t/d > $o/t/d.txt 2>&1
MLA_PREFILL_WARPS=5 $B/gpu_test_model_ops --gtest_filter='*prefill*' > $o/t/badknob.log 2>&1; echo "bad MLA_PREFILL_WARPS rc=$? (expect 1): $(grep -c MLA_PREFILL_WARPS $o/t/badknob.log) lines name it"
wait
grep -h "^test" $o/t/*.txt | cut -c1-200; grep -h -A3 "FAIL" $o/t/*.txt | head -20
for t in gpu_test_mla_decode gpu_test_mla_decode_fp8 gpu_test_mla_decode_fp8ds; do
  ( MLA_SMALL_CASES=1 timeout 120 compute-sanitizer --tool memcheck $B/$t > $o/s/$t.memcheck.log 2>&1; echo "memcheck $t rc=$?: $(grep -E 'ERROR SUMMARY' $o/s/$t.memcheck.log | tail -1) $(grep -E '^\[  (PASSED|FAILED)' $o/s/$t.memcheck.log | tr '\n' ' ')" ) &
done; wait
for f in bf16 fp8 fp8_ds; do timeout 60 $B/bench_decode --format $f --reps 30 > $o/b/decode_$f.md 2> $o/b/decode_$f.err; echo "bench_decode $f rc=$?"; grep "^| $f" $o/b/decode_$f.md | cut -d'|' -f3-5,6,10 | tr '\n' ';'; echo; done
timeout 30 $B/bench_prefill > $o/b/prefill.md 2>&1; echo "bench_prefill rc=$?"
timeout 100 $B/bench_model --kv-cache-dtype auto,fp8 --batches 1,64,128,256 --steps 6 > $o/b/model.md 2>&1; echo "bench_model rc=$?"; grep -E "^\|" $o/b/model.md | head -14
for f in fp8 auto; do t=e2e_512_512_2000_$f
  timeout 110 $B/mlaserve bench throughput --model dummy --input-len 512 --output-len 512 --num-prompts 2000 --kv-cache-dtype $f --output-json $o/b/$t.json > $o/b/$t.log 2> $o/b/$t.err
  echo "$t rc=$?: $(grep -E '^Throughput' $o/b/$t.log)"; grep -E "KV cache:|holds" $o/b/$t.err | cut -c1-200
done
cd $o && tar czf all.tgz t s b && rm -rf t s b

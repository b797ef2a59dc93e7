#!/bin/bash
# A/B for combine_many_chunks.patch on the H200 (one device call, ~60 s of wall time plus the tests' ~90 s):
#   here:   build HEAD and HEAD + the patch; for each, strip bench_decode and gpu_test_mla_decode{,_fp8,_fp8ds} into
#           DIR/bin and `tar cJf DIR/bin.tar.xz -C DIR bin` (DIR e.g. build/ab/base, build/ab/new; carry both DIRs)
#   device: bash bench/decode/patches/combine_many_chunks_ab.sh build/ab/base build/ab/new
# Two interleaved passes of batch-1 shapes whose rows take the many-split merge (17-128 splits; h_q 64 b1 and h_q
# 128 b1 on their own grids) and of the whole grid, then the new build's b1 / b2 / b7 / zero-length test cases.
set -u
BASE=$1 NEW=$2
O=${OUT:-/tmp/ab}/logs; mkdir -p $O
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} MLA_TEST_SEED=${MLA_TEST_SEED:-3601}
mkdir -p /tmp/ab_base /tmp/ab_new && tar xJf $BASE/bin.tar.xz -C /tmp/ab_base && tar xJf $NEW/bin.tar.xz -C /tmp/ab_new
T0=$(date +%s); t() { echo "[$(( $(date +%s) - T0 )) s]"; }
vals() { grep -E '^\| *(bf16|fp8) ' $1 | awk -F'|' '{printf "%s ", $6}'; }
SH="--shape 16,1,1024 --shape 16,1,1088 --shape 16,1,1536 --shape 16,1,2048 --shape 16,1,4096 --shape 16,1,8192"
SH="$SH --shape 32,1,2048 --shape 64,1,2048 --shape 64,1,8192 --shape 128,1,704 --shape 128,1,2048 --shape 128,1,4096"
for pass in 1 2; do for c in base new; do for f in bf16 fp8; do
  timeout 60 /tmp/ab_$c/bin/bench_decode --format $f --reps 50 $SH > $O/s_${f}_${c}_p$pass.log 2>&1
  echo "$f $c p$pass shapes: $(vals $O/s_${f}_${c}_p$pass.log)"
  timeout 60 /tmp/ab_$c/bin/bench_decode --format $f --reps 30 > $O/g_${f}_${c}_p$pass.log 2>&1
  echo "$f $c p$pass grid: $(vals $O/g_${f}_${c}_p$pass.log)"
done; done; done
echo "$(t) bench"
B=/tmp/ab_new/bin F='*_b1_*:*_b2_*:*_b7_*:*zero*'
for s in mla_decode mla_decode_fp8 mla_decode_fp8ds; do
  timeout 90 $B/gpu_test_$s --gtest_filter="$F" > $O/$s.log 2>&1
  echo "$(t) $s ($F) rc=$? $(grep -E '^\[  (PASSED|FAILED)' $O/$s.log | tr '\n' ' ')"
done
grep -h "^\[  FAILED  \].*ms)" $O/*.log | head

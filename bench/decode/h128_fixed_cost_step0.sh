#!/bin/bash
# Step 0 of bench/decode/STUDY_h128_fixed_cost.md: a zero-code decomposition of the h_q 128 big-batch fixed cost on
# shapes with equal pages on the longest part (32 / 64 / 128 / 256), three interleaved passes, each under the default
# merge and under MLA_DECODE_MERGE=combine (the same kernel instantiation on every shape), then the b64 shapes
# without head-tile pairs (lever L1's ceiling). ~1 min on the H200.
#   usage: bash bench/decode/h128_fixed_cost_step0.sh path/to/bench_decode   (logs under $OUT/step0 or /tmp/step0)
# Reading: b128 - b64 at equal pages = one sequence switch; b32 - b64 = split partials + combine; b64 across 32-256
# pages = whether the per-page time bends with the part's length.
set -u
B=${1:?usage: $0 path/to/bench_decode}
O=${OUT:-/tmp}/step0; mkdir -p "$O"
SH="--shape 128,64,2048 --shape 128,32,4096 --shape 128,64,4096 --shape 128,32,8192 --shape 128,128,2048"
SH="$SH --shape 128,64,8192 --shape 128,32,16384 --shape 128,128,4096 --shape 128,64,16384 --shape 128,128,8192"
vals() { grep -E '^\| *bf16 ' "$1" | awk -F'|' '{printf "%s ", $6}'; }
echo "shapes: $SH"
for pass in 1 2 3; do
  for merge in auto combine; do
    # shellcheck disable=SC2086
    MLA_DECODE_MERGE=$merge timeout 60 "$B" --format bf16 --reps 30 $SH > "$O/p${pass}_$merge.log" 2>&1
    echo "pass $pass merge $merge: $(vals "$O/p${pass}_$merge.log")"
  done
  # shellcheck disable=SC2086
  MLA_DECODE_HEAD_PAIRS=off timeout 60 "$B" --format bf16 --reps 30 $SH > "$O/p${pass}_nopairs.log" 2>&1
  echo "pass $pass no head-tile pairs: $(vals "$O/p${pass}_nopairs.log")"
done

#!/usr/bin/env bash
# Device side of a compile-time A/B of a decode kernel (session 75). bench/decode/mkvariant.sh builds the variants
# here; carry them packed as DIR/pk.tar.xz (VAR/bench_decode, TEST/gpu_test_mla_decode) or as DIR itself. Each pass
# times every variant on the rows twice: DRAM pages, then `--l2-pages L2`, the H100 proxy for the H200's
# compute-bound page (BENCHMARKS.md "Session 74" c3). Passes interleave the variants. Then each test binary runs.
# Logs go to $OUT/r, packed into $OUT/ab.tgz (the device returns few files); bench/decode/ab_summary.py reads them.
#   VARS="p0 s4" TESTS="t4" [PASSES=3 ROWS=13-18 FORMAT=bf16 L2=128 MODES="dram l2" TF=gtest-filter TLIM=240] \
#     bash bench/decode/ab_pages.sh DIR
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: VARS=\"A B\" [TESTS=T] bash $0 DIR" >&2; exit 2; }
dir=$1
: "${OUT:?OUT: the device output folder}"
R=$OUT/r
mkdir -p "$R"
[ -f "$dir/pk.tar.xz" ] && tar -xJf "$dir/pk.tar.xz" -C "$dir"
nvidia-smi --query-gpu=name,serial,driver_version --format=csv,noheader > "$R/gpu.txt" 2>&1
for pass in $(seq 1 "${PASSES:-3}"); do
  for v in ${VARS:?}; do
    for mode in ${MODES:-dram l2}; do  # MODES=dram: a change off the page loop (the combine) needs no L2 proxy
      extra=""
      [ "$mode" = l2 ] && extra="--l2-pages ${L2:-128}"
      # shellcheck disable=SC2086  # extra is two words or none
      timeout 120 "$dir/$v/bench_decode" --format "${FORMAT:-bf16}" --rows "${ROWS:-13-18}" $extra \
        > "$R/${mode}_${v}_$pass.txt" 2>&1
      echo "$mode $v $pass rc $?" >> "$R/rc.txt"
    done
  done
done
tar -czf "$OUT/ab.tgz" -C "$OUT" r  # the timings come back even if a test below runs past the call's limit
for t in ${TESTS:-}; do
  timeout "${TLIM:-240}" "$dir/$t/gpu_test_mla_decode" --gtest_filter="${TF:-*}" > "$R/test_$t.txt" 2>&1
  echo "test $t rc $?" >> "$R/rc.txt"
  tail -n 3 "$R/test_$t.txt"
done
tr '\n' ' ' < "$R/rc.txt"
echo
tar -czf "$OUT/ab.tgz" -C "$OUT" r && rm -rf "$R"

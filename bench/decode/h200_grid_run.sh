#!/usr/bin/env bash
# The call that makes the standing tables and the test record of the decode kernels on an H200 (session 87; it was
# build/s86d/run.sh, git-ignored and lost with build/, so it lives here now).
#
#   bench/decode/h200_grid_run.sh PK [LIMIT]      (on the device, from the repo root; logs under $OUT)
#
# PK: a tar.xz of bin/{bench_decode, gpu_test_mla_decode, gpu_test_mla_decode_fp8, gpu_test_mla_decode_fp8ds,
#     gpu_test_engine_cuda, gpu_test_model_forward}, built here, stripped (bench/decode/h200_grid_pack.sh makes it),
#     and bin/flags/ (the build-flag variants' suites) when scripts/flag_builds.sh has made them.
# LIMIT: seconds the whole call may take (default 330); the test shards get what the grid leaves.
# MLA_GRID_PASSES (default 3): grid passes; 0 runs the tests only (no --unrolled either).
# MLA_ANY_GPU=1 runs on any GPU; by default anything but an H200 stops at once, so a call that lands on another
# card costs only the machine's start: the tables are held to ANCHORS.md's H200 numbers, and H100 test records
# exist already (BENCHMARKS.md "Session 86").
#
# Order: the grid first (what only an H200 can give), tarred into $OUT/grid.tgz after every format, so a call cut
# short keeps what it ran; then the three decode suites side by side through scripts/gpu_check.sh, in the time left;
# then the engine and model tests if time remains, then memcheck of the suites' small cases, then the knob runs
# (scripts/knob_tests.sh). Read the grid with
# `bench/decode/grid_table.py r FORMAT` on the unpacked grid.tgz.
set -u
start=$(date +%s)
PK=${1:?usage: h200_grid_run.sh PK [LIMIT]}
LIMIT=${2:-330}
O=${OUT:-/tmp/h200_grid_run}
mkdir -p "$O/r"
left() { echo $(( LIMIT - ($(date +%s) - start) )); }
gpu=$(nvidia-smi --query-gpu=name,serial,driver_version,clocks.max.sm,power.limit --format=csv,noheader)
echo "gpu: $gpu" | tee "$O/r/gpu.txt"
case "$gpu" in
  *H200*) ;;
  *) [ "${MLA_ANY_GPU:-0}" = 1 ] || { echo "not an H200: stopping (MLA_ANY_GPU=1 runs anyway)"; exit 0; } ;;
esac
D=$(mktemp -d)
tar -xJf "$PK" -C "$D" || { echo "cannot unpack $PK"; exit 1; }
B=$D/bin
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"  # cuBLASLt is dynamic (model tests)
export MLA_TEST_SEED=${MLA_TEST_SEED:-$(date +%s%N | cut -c1-16)}
echo "seed $MLA_TEST_SEED" >> "$O/r/gpu.txt"
save() { tar -czf "$O/grid.tgz" -C "$O" r; }
SUITES="gpu_test_mla_decode gpu_test_mla_decode_fp8 gpu_test_mla_decode_fp8ds"  # the decode suites: shards, memcheck
# Three passes, formats interleaved, so a slow stretch of the machine touches every format alike.
for pass in $(seq 1 "${MLA_GRID_PASSES:-3}"); do
  for f in bf16 fp8 fp16 fp8_ds; do
    timeout 60 "$B/bench_decode" --format $f --reps 30 > "$O/r/grid_${f}_$pass.txt" 2>&1
    echo "grid $f pass $pass rc=$? at $(( $(date +%s) - start )) s"
    save
  done
done
for f in bf16 fp8; do
  [ "${MLA_GRID_PASSES:-3}" -gt 0 ] || break
  timeout 60 "$B/bench_decode" --format $f --unrolled 20 > "$O/r/unrolled_$f.txt" 2>&1
  echo "unrolled $f rc=$? at $(( $(date +%s) - start )) s"
  save
done
# The suites through scripts/gpu_check.sh (four gtest shards each; its summary line, and the fp8 suite's price-of-FP8
# tables), the three side by side: twelve processes, each case checked on one core, its CPU reference on all.
# gpu_check's per-binary limit is the time left; its logs go under r/t_SUITE/, and its summary's test line is printed.
# gc LIMIT SUITE [DIR-PREFIX [GPU_CHECK-OPTIONS]]
gc() {
  local d=$O/r/${3:-t}_$2
  MLA_STEP_TIMEOUT=$1 scripts/gpu_check.sh --bin "$B" --tests-only --filter "^$2\$" --out "$d" ${4:-} > /dev/null 2>&1
  grep -E '^(test|sanitize) ' "$d/summary.txt" || echo "$2: no summary line"
}
t=$(( $(left) - 15 ))
if [ $t -gt 30 ]; then
  for s in $SUITES; do gc $t $s & done
  wait
  save
fi
t=$(( $(left) - 5 ))
for s in gpu_test_engine_cuda gpu_test_model_forward; do
  [ $t -gt 20 ] || break
  gc $t $s
  t=$(( $(left) - 5 ))
done
# memcheck of the decode suites' small cases through gpu_check (logs under r/m_SUITE/), side by side (19-107 s on
# H100s), if the time allows.
t=$(( $(left) - 5 ))
if [ $t -gt 30 ]; then
  for s in $SUITES; do gc $t $s m "--sanitize-only --sanitize-tools memcheck" & done
  wait
fi
save
# The kernels only a read-once knob reaches, on the suites' small sets (scripts/knob_tests.sh; logs under r/knobs/), if
# the time allows; and those only a build flag reaches, where the pack holds them (bin/flags/, scripts/flag_builds.sh).
t=$(( $(left) - 5 ))
if [ $t -gt 40 ]; then
  fl=()
  [ -d "$B/flags" ] && fl=(--flags "$B/flags")
  scripts/knob_tests.sh --bin "$B" "${fl[@]}" --out "$O/r/knobs" --timeout $t > /dev/null 2>&1
  grep -E '^(knob|flag)' "$O/r/knobs/summary.txt" || echo "knob_tests: no summary"
fi
save
echo "done at $(( $(date +%s) - start )) s"

#!/usr/bin/env bash
# One H200 call for the grouped MoE: the model op tests (moe_align, grouped_gemm and the rest), the CUDA
# forward vs the CPU forward, racecheck on moe_align and memcheck on small grouped GEMM cases, bench_moe,
# then bench_model on dummy V2-Lite with both MoE paths (before = per_expert, after = grouped) in one
# process per run, bf16 then fp8 KV over one set of host weights.
#
#   bench/moe/h200_run.sh BIN_DIR OUT_DIR [bench_model args...]
set -uo pipefail
bin=$1 out=$2
shift 2
export LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
san=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
step() {  # name limit_s command...
  local name=$1 lim=$2 start
  shift 2
  start=$(date +%s)
  timeout "$lim" "$@" > "$out/$name.log" 2>&1
  echo "== $name rc=$? $(( $(date +%s) - start ))s"
}
step model_ops 45 "$bin/gpu_test_model_ops"
grep -E '^\[case\].*(moe_align|grouped_gemm)|FAILED|PASSED' "$out/model_ops.log" | cut -c1-230
# A failing op test (the new wgmma kernel above all) must not cost the benchmark numbers: fall back to the
# mma.sync kernel for block_m 128 in everything after it.
grep -q '^\[  PASSED  \]' "$out/model_ops.log" && ! grep -q '^\[  FAILED  \]' "$out/model_ops.log" ||
  { export MLA_GROUPED_GEMM_MMA_SYNC=1; echo "== model_ops failed: MLA_GROUPED_GEMM_MMA_SYNC=1 from here on"; }
step model_forward 45 "$bin/gpu_test_model_forward"
grep -E 'FAILED|PASSED|ran\.' "$out/model_forward.log"
step model_forward_per_expert 45 env MLA_MOE_PATH=per_expert "$bin/gpu_test_model_forward" --gtest_filter='*PrefillMatchesCpu*'
grep -E '^\[model\]|FAILED|PASSED' "$out/model_forward_per_expert.log"
grep -E '^\[model\].*prefill:' "$out/model_forward.log"
step racecheck 25 "$san" --tool racecheck --error-exitcode 9 "$bin/gpu_test_model_ops" --gtest_filter='moe_align.*'
tail -2 "$out/racecheck.log"
step memcheck 25 "$san" --tool memcheck --error-exitcode 9 "$bin/gpu_test_model_ops" \
    --gtest_filter='grouped_gemm.bm16_edge*:grouped_gemm.bm16_tiny*:grouped_gemm.bm64_edge*:grouped_gemm.bm128_all*:moe_align.t700*:moe_align.t1500*'
tail -2 "$out/memcheck.log"
step bench_moe 30 "$bin/bench_moe"
cat "$out/bench_moe.log"
step bench_model 120 "$bin/bench_model" --moe-path both --kv-cache-dtype auto,fp8 "$@"
cat "$out/bench_model.log"

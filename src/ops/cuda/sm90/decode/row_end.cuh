#pragma once
// A softmax row's end, wherever a segment or a merge writes one (every epilogue, the fused merge, the combine): the
// weight 1 / sum that normalizes the output and the row's log-sum-exp; and the merges' weight of a partial. One place
// for the empty-row contract (docs/mla_decode.md "Empty rows"): a row that saw no key -- its sum is 0 and its max
// -inf; the kernels test the sum, the merges the max -- writes zeros and lse = -inf, never 1 / 0 or a NaN. A seen row's
// sum is >= 1 (its max's own term), the input the one-MUFU forms in ptx.h are exact enough for.
#include <cmath>

#include "ops/cuda/sm90/decode/ptx.h"  // exp_ftz, ln_approx, rcp_approx

namespace mla::sm90::decode {

// scale / sum, or 0 for an empty row. scale folds a factor the output carries (fp8: k_scale); the default 1 folds away.
__device__ __forceinline__ float row_inv(bool seen, float sum, float scale = 1.f) {
  return seen ? scale * rcp_approx(sum) : 0.f;
}
// max_term + ln(sum), or -inf for an empty row; max_term is the row's max in natural-log units (max * softmax_scale).
__device__ __forceinline__ float row_lse(bool seen, float sum, float max_term) {
  return seen ? max_term + ln_approx(sum) : -INFINITY;
}
// exp(m - m_new): what a merge weighs a partial (a split, or its own running sum) by whose max is m, once the row's
// max is m_new >= m (natural-log units, as lse). m_new must be finite: every merge skips, or zeroes, a step where no
// partial has seen a key. A partial that saw none (m = -inf) then weighs 0 with no select: ex2 of -inf is +0.
__device__ __forceinline__ float merge_weight(float m, float m_new) { return exp_ftz(m - m_new); }

}  // namespace mla::sm90::decode

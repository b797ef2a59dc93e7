#pragma once
// merge_attn_states: combines two partial attention results over disjoint key sets (e.g. the cached
// prefix and the new tokens of a chunked prefill) into the result over their union (vLLM's layout).
//
//   la, lb = lse_a[h, n], lse_b[h, n]; +inf counts as -inf (an empty side, as some backends report it)
//   both empty : out = 0, lse = -inf
//   b empty    : out = out_a, lse = la        (out_b is not read: it may hold anything, NaN included)
//   a empty    : out = out_b, lse = lb
//   otherwise  : m = max(la, lb), wa = exp(la - m), wb = exp(lb - m), s = wa + wb
//                out = out_a * (wa / s) + out_b * (wb / s), lse = m + log(s)
// NaN in an lse propagates to that (n, h)'s out and lse. Arithmetic in float, out rounded to nearest even.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct MergeAttnStatesParams {
  TensorView out;      // [n_tokens, n_heads, head_dim] bf16 | fp16 | fp32, contiguous; head_dim % 8 == 0
  TensorView lse;      // [n_heads, n_tokens] fp32, contiguous; optional (rank 0: not written)
  TensorView out_a;    // [n_tokens, n_heads, head_dim], dtype of out, contiguous
  TensorView lse_a;    // [n_heads, n_tokens] fp32, natural log
  TensorView out_b;    // [n_tokens, n_heads, head_dim], dtype of out, contiguous
  TensorView lse_b;    // [n_heads, n_tokens] fp32
};

Status validate_merge_attn_states(const MergeAttnStatesParams& p);

namespace ref {
Status merge_attn_states(const MergeAttnStatesParams& p);  // host pointers
}  // namespace ref

namespace cuda {
// Device pointers; one thread per 8 outputs; no allocation, graph-capturable.
Status merge_attn_states(const MergeAttnStatesParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

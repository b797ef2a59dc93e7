#pragma once
// moe_combine: the weighted sum of each token's routed experts' outputs, plus the shared experts' output.
//
//   out[i, :] = shared[i, :] + Σ_j topk_weights[i, j] · expert_out[src_rows[i, j], :]    (float, j ascending)
//
// expert_out holds the experts' output rows in whatever order they were computed (sorted by expert);
// src_rows says where token i's j-th expert's row landed.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct MoeCombineParams {
  TensorView expert_out;    // [n_rows, H] bf16, row stride >= H
  TensorView src_rows;      // [t, k] int32 in [0, n_rows), contiguous
  TensorView topk_weights;  // [t, k] fp32, contiguous
  TensorView shared;        // [t, H] bf16, row stride >= H; optional (rank 0: no shared experts)
  TensorView out;           // [t, H] bf16, row stride >= H; may alias shared
};

namespace cuda {
// Device pointers; one warp per token, 16-byte accesses; no allocation.
Status moe_combine(const MoeCombineParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

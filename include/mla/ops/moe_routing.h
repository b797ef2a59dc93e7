#pragma once
// moe_routing: DeepSeek-V2's router on the GPU, the same rule as model::cpu::route:
//
//   s = softmax(logits[i, :])                          (float)
//   group-limited: keep the topk_group groups (of n_group equal groups) with the highest best score,
//                  zero the other groups' scores (ties: the lower group index wins)
//   top-k of s (ties: the lower expert index wins) → ids[i, :], w = s[ids]
//   norm_topk_prob and k > 1: w /= (Σ w + 1e-20)   else: w *= routed_scaling_factor
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

constexpr int kMoeMaxExperts = 256;  // eight scores per lane of a warp
constexpr int kMoeMaxTopK = 16;

struct MoeRoutingParams {
  TensorView logits;        // [t, E] fp32, row stride >= E (the router GEMM's output); E <= 256
  TensorView topk_ids;      // [t, k] int32, contiguous
  TensorView topk_weights;  // [t, k] fp32, contiguous
  int n_group = 1;          // group-limited only: E % n_group == 0, n_group <= 32
  int topk_group = 1;
  bool group_limited = false;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.f;
};

namespace cuda {
// Device pointers; one warp per token; no allocation.
Status moe_routing(const MoeRoutingParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

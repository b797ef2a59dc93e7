// moe_routing: one warp per token. Lane l holds the scores of experts l, l + 32, l + 64, ... in registers;
// every selection is a warp arg-max whose ties go to the lower index, so the result is the CPU rule's.
#include "mla/ops/moe_routing.h"

#include <climits>

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "moe_routing";
constexpr int kPerLane = kMoeMaxExperts / 32;

struct RoutingKernelParams {
  const float* logits;  // [rows, ld]
  int32_t* ids;         // [rows, k]
  float* weights;       // [rows, k]
  int64_t rows, ld;
  int num_experts, k, n_group, topk_group;
  bool group_limited, norm_topk_prob;
  float routed_scaling_factor;
};

// Arg-max over the warp of (v, idx): the larger v, ties to the smaller idx.
__device__ __forceinline__ void warp_argmax(float& v, int& idx) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(model_ops::kFullMask, v, o);
    const int oi = __shfl_xor_sync(model_ops::kFullMask, idx, o);
    if (ov > v || (ov == v && oi < idx)) v = ov, idx = oi;
  }
}

__global__ void moe_routing_kernel(const __grid_constant__ RoutingKernelParams p) {
  const int64_t row = int64_t(blockIdx.x) * model_ops::kWarpsPerBlock + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32, E = p.num_experts;
  float s[kPerLane];
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int e = j * 32 + lane;
    s[j] = e < E ? p.logits[row * p.ld + e] : -INFINITY;
    mx = fmaxf(mx, s[j]);
  }
  mx = model_ops::warp_max(mx);
  float sum = 0;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    s[j] = j * 32 + lane < E ? expf(s[j] - mx) : 0.f;
    sum += s[j];
  }
  sum = model_ops::warp_sum(sum);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) s[j] = j * 32 + lane < E ? s[j] / sum : -INFINITY;

  if (p.group_limited) {
    const int per = E / p.n_group;
    float best = -INFINITY;  // lane g: the best score of group g
    for (int g = 0; g < p.n_group; ++g) {
      float m = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = j * 32 + lane;
        if (e < E && e / per == g) m = fmaxf(m, s[j]);
      }
      m = model_ops::warp_max(m);
      if (lane == g) best = m;
    }
    unsigned keep = 0;
    for (int r = 0; r < p.topk_group; ++r) {
      float v = lane < p.n_group && !((keep >> lane) & 1u) ? best : -INFINITY;
      int idx = lane < p.n_group && !((keep >> lane) & 1u) ? lane : INT_MAX;
      warp_argmax(v, idx);
      if (idx < 32) keep |= 1u << idx;
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = j * 32 + lane;
      if (e < E && !((keep >> (e / per)) & 1u)) s[j] = 0.f;
    }
  }

  int sel_id[kMoeMaxTopK];
  float sel_w[kMoeMaxTopK];
  for (int r = 0; r < p.k; ++r) {
    float v = -INFINITY;
    int idx = INT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {  // e ascending within the lane: strict > keeps the lower index on ties
      const int e = j * 32 + lane;
      if (e < E && s[j] > v) v = s[j], idx = e;
    }
    warp_argmax(v, idx);
    sel_id[r] = idx;
    sel_w[r] = v;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j)
      if (j * 32 + lane == idx) s[j] = -INFINITY;  // taken: never chosen again
  }
  if (lane == 0) {
    float wsum = 0;
    for (int r = 0; r < p.k; ++r) wsum += sel_w[r];
    for (int r = 0; r < p.k; ++r) {
      // DeepSeek-V2: either renormalize or scale, never both.
      const float w = p.k > 1 && p.norm_topk_prob ? sel_w[r] / (wsum + 1e-20f) : sel_w[r] * p.routed_scaling_factor;
      p.ids[row * p.k + r] = sel_id[r];
      p.weights[row * p.k + r] = w;
    }
  }
}

}  // namespace

Status moe_routing(const MoeRoutingParams& p, Stream stream) {
  if (!(p.logits.rank == 2 && p.logits.dtype == DType::kFp32 && p.logits.data && p.logits.stride[1] == 1 &&
        p.logits.stride[0] >= p.logits.shape[1] && p.logits.shape[1] >= 1 && p.logits.shape[1] <= kMoeMaxExperts))
    return Status::invalid(kOp, "logits: expected fp32[t, E <= 256] with unit column stride, got " + p.logits.str());
  const int64_t t = p.logits.shape[0], E = p.logits.shape[1];
  if (p.topk_ids.rank != 2 || p.topk_ids.shape[0] != t)
    return Status::invalid(kOp, "topk_ids: expected int32[" + std::to_string(t) + ", k], got " + p.topk_ids.str());
  const int64_t k = p.topk_ids.shape[1];
  if (k < 1 || k > kMoeMaxTopK || k > E)
    return Status::invalid(kOp,
                           "top-k " + std::to_string(k) + " must be in [1, min(16, E = " + std::to_string(E) + ")]");
  MLA_TRY(model_ops::check_array(kOp, "topk_ids", p.topk_ids, DType::kInt32, t * k));
  MLA_TRY(model_ops::check_array(kOp, "topk_weights", p.topk_weights, DType::kFp32, t * k));
  if (p.group_limited && (p.n_group < 1 || p.n_group > 32 || E % p.n_group != 0 || p.topk_group < 1 ||
                          p.topk_group > p.n_group || int64_t(p.topk_group) * (E / p.n_group) < k))
    return Status::invalid(kOp, "group-limited routing: n_group " + std::to_string(p.n_group) + ", topk_group " +
                                    std::to_string(p.topk_group) + ", E " + std::to_string(E) + ", k " +
                                    std::to_string(k) + " (need n_group <= 32 dividing E, enough experts kept)");
  if (t == 0) return Status::ok();
  const RoutingKernelParams kp{.logits = p.logits.ptr<const float>(),
                               .ids = p.topk_ids.ptr<int32_t>(),
                               .weights = p.topk_weights.ptr<float>(),
                               .rows = t,
                               .ld = p.logits.stride[0],
                               .num_experts = static_cast<int>(E),
                               .k = static_cast<int>(k),
                               .n_group = p.n_group,
                               .topk_group = p.topk_group,
                               .group_limited = p.group_limited,
                               .norm_topk_prob = p.norm_topk_prob,
                               .routed_scaling_factor = p.routed_scaling_factor};
  moe_routing_kernel<<<model_ops::rows_grid(t), 32 * model_ops::kWarpsPerBlock, 0,
                       reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

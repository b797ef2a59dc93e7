// moe_combine: one warp per token; the k expert rows and the shared row are summed in float, in a fixed
// order, and rounded to bf16 once.
#include "mla/ops/moe_combine.h"

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "moe_combine";

struct CombineKernelParams {
  const __nv_bfloat16* expert_out;  // [n_rows, ld_expert]
  const int32_t* src_rows;          // [t, k]
  const float* weights;             // [t, k]
  const __nv_bfloat16* shared;      // [t, ld_shared] or null
  __nv_bfloat16* out;               // [t, ld_out]
  int64_t rows, hidden, n_rows, ld_expert, ld_shared, ld_out;
  int k;
};

__global__ void moe_combine_kernel(const __grid_constant__ CombineKernelParams p) {
  const int64_t row = int64_t(blockIdx.x) * model_ops::kWarpsPerBlock + threadIdx.x / 32;
  if (row >= p.rows) return;
  for (int64_t c = (threadIdx.x % 32) * 8; c < p.hidden; c += 256) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (p.shared) model_ops::load8(p.shared + row * p.ld_shared + c, acc);
    for (int j = 0; j < p.k; ++j) {
      const int64_t r = p.src_rows[row * p.k + j];
      if (r < 0 || r >= p.n_rows) continue;
      const float w = p.weights[row * p.k + j];
      float y[8];
      model_ops::load8(p.expert_out + r * p.ld_expert + c, y);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += w * y[i];
    }
    model_ops::store8(p.out + row * p.ld_out + c, acc);
  }
}

}  // namespace

Status moe_combine(const MoeCombineParams& p, Stream stream) {
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16}, -1, -1));
  const int64_t t = p.out.shape[0], H = p.out.shape[1];
  MLA_TRY(model_ops::check_rows_view(kOp, "expert_out", p.expert_out, {DType::kBf16}, -1, H));
  if (p.src_rows.rank != 2 || p.src_rows.shape[0] != t)
    return Status::invalid(kOp, "src_rows: expected int32[" + std::to_string(t) + ", k], got " + p.src_rows.str());
  const int64_t k = p.src_rows.shape[1];
  MLA_TRY(model_ops::check_array(kOp, "src_rows", p.src_rows, DType::kInt32, t * k));
  MLA_TRY(model_ops::check_array(kOp, "topk_weights", p.topk_weights, DType::kFp32, t * k));
  if (p.shared.defined()) MLA_TRY(model_ops::check_rows_view(kOp, "shared", p.shared, {DType::kBf16}, t, H));
  if (t == 0) return Status::ok();
  const CombineKernelParams kp{.expert_out = p.expert_out.ptr<const __nv_bfloat16>(),
                               .src_rows = p.src_rows.ptr<const int32_t>(),
                               .weights = p.topk_weights.ptr<const float>(),
                               .shared = p.shared.defined() ? p.shared.ptr<const __nv_bfloat16>() : nullptr,
                               .out = p.out.ptr<__nv_bfloat16>(),
                               .rows = t,
                               .hidden = H,
                               .n_rows = p.expert_out.shape[0],
                               .ld_expert = p.expert_out.stride[0],
                               .ld_shared = p.shared.defined() ? p.shared.stride[0] : 0,
                               .ld_out = p.out.stride[0],
                               .k = static_cast<int>(k)};
  moe_combine_kernel<<<model_ops::rows_grid(t), 32 * model_ops::kWarpsPerBlock, 0,
                       reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

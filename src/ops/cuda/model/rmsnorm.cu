// rmsnorm / add_rmsnorm: one warp per row. The second pass re-reads the row (an L1/L2 hit for the
// row sizes of these models) instead of holding it in registers, so any hidden size works.
#include "mla/ops/rmsnorm.h"

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

template <class In>
struct NormKernelParams {
  In* x;                   // [rows, ld_x]: rmsnorm input, or add_rmsnorm's residual (read and written)
  const __nv_bfloat16* add;  // [rows, ld_add] or null: add_rmsnorm's sublayer output
  const __nv_bfloat16* w;  // [n]
  __nv_bfloat16* out;      // [rows, ld_out]
  int64_t rows, n, ld_x, ld_add, ld_out;
  float eps;
};

template <class In>
__global__ void norm_kernel(const __grid_constant__ NormKernelParams<In> p) {
  const int64_t row = int64_t(blockIdx.x) * model_ops::kWarpsPerBlock + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  In* x = p.x + row * p.ld_x;
  float ss = 0;
  for (int64_t c = lane * 8; c < p.n; c += 256) {
    float v[8];
    model_ops::load8(x + c, v);
    if (p.add) {
      float a[8];
      model_ops::load8(p.add + row * p.ld_add + c, a);
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] += a[i];
      model_ops::store8(x + c, v);
      model_ops::load8(x + c, v);  // the stored (possibly rounded) residual is what gets normalized
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[i] * v[i];
  }
  ss = model_ops::warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(p.n) + p.eps);
  for (int64_t c = lane * 8; c < p.n; c += 256) {
    float v[8], w[8];
    model_ops::load8(x + c, v);
    model_ops::load8(p.w + c, w);
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = w[i] * (v[i] * inv);
    model_ops::store8(p.out + row * p.ld_out + c, v);
  }
}

template <class In>
Status launch(const char* op, const TensorView& x, const TensorView* add, const TensorView& w, const TensorView& out,
              float eps, Stream stream) {
  const NormKernelParams<In> kp{.x = x.ptr<In>(),
                                .add = add ? add->ptr<const __nv_bfloat16>() : nullptr,
                                .w = w.ptr<const __nv_bfloat16>(),
                                .out = out.ptr<__nv_bfloat16>(),
                                .rows = x.shape[0],
                                .n = x.shape[1],
                                .ld_x = x.stride[0],
                                .ld_add = add ? add->stride[0] : 0,
                                .ld_out = out.stride[0],
                                .eps = eps};
  if (kp.rows == 0) return Status::ok();
  norm_kernel<In><<<model_ops::rows_grid(kp.rows), 32 * model_ops::kWarpsPerBlock, 0,
                    reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(op);
  return Status::ok();
}

Status check_eps(const char* op, float eps) {
  if (eps >= 0 && eps < 1) return Status::ok();
  return Status::invalid(op, "eps must be in [0, 1), got " + std::to_string(eps));
}

}  // namespace

Status rmsnorm(const RmsNormParams& p, Stream stream) {
  constexpr const char* kOp = "rmsnorm";
  MLA_TRY(model_ops::check_rows_view(kOp, "x", p.x, {DType::kBf16, DType::kFp32}, -1, -1));
  MLA_TRY(model_ops::check_array(kOp, "w", p.w, DType::kBf16, p.x.shape[1]));
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16}, p.x.shape[0], p.x.shape[1]));
  MLA_TRY(check_eps(kOp, p.eps));
  if (p.x.dtype == DType::kFp32) return launch<float>(kOp, p.x, nullptr, p.w, p.out, p.eps, stream);
  return launch<__nv_bfloat16>(kOp, p.x, nullptr, p.w, p.out, p.eps, stream);
}

Status add_rmsnorm(const AddRmsNormParams& p, Stream stream) {
  constexpr const char* kOp = "add_rmsnorm";
  MLA_TRY(model_ops::check_rows_view(kOp, "residual", p.residual, {DType::kFp32, DType::kBf16}, -1, -1));
  const int64_t t = p.residual.shape[0], n = p.residual.shape[1];
  MLA_TRY(model_ops::check_rows_view(kOp, "x", p.x, {DType::kBf16}, t, n));
  MLA_TRY(model_ops::check_array(kOp, "w", p.w, DType::kBf16, n));
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16}, t, n));
  MLA_TRY(check_eps(kOp, p.eps));
  if (p.out.data == p.residual.data) return Status::invalid(kOp, "out must not alias residual");
  if (p.residual.dtype == DType::kFp32) return launch<float>(kOp, p.residual, &p.x, p.w, p.out, p.eps, stream);
  return launch<__nv_bfloat16>(kOp, p.residual, &p.x, p.w, p.out, p.eps, stream);
}

}  // namespace mla::cuda

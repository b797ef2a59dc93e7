// silu_mul: a grid-stride loop over 8-value chunks of [t, n].
#include "mla/ops/silu_mul.h"

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "silu_mul";

struct SiluMulKernelParams {
  const __nv_bfloat16* gate;
  const __nv_bfloat16* up;
  __nv_bfloat16* out;
  int64_t rows, chunks_per_row, ld_gate, ld_up, ld_out;
};

__global__ void silu_mul_kernel(const __grid_constant__ SiluMulKernelParams p) {
  const int64_t total = p.rows * p.chunks_per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.chunks_per_row, c = (i % p.chunks_per_row) * 8;
    float g[8], u[8];
    model_ops::load8(p.gate + row * p.ld_gate + c, g);
    model_ops::load8(p.up + row * p.ld_up + c, u);
#pragma unroll
    for (int k = 0; k < 8; ++k) g[k] = g[k] / (1.0f + expf(-g[k])) * u[k];
    model_ops::store8(p.out + row * p.ld_out + c, g);
  }
}

}  // namespace

Status silu_mul(const SiluMulParams& p, Stream stream) {
  MLA_TRY(model_ops::check_rows_view(kOp, "gate", p.gate, {DType::kBf16}, -1, -1));
  MLA_TRY(model_ops::check_rows_view(kOp, "up", p.up, {DType::kBf16}, p.gate.shape[0], p.gate.shape[1]));
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16}, p.gate.shape[0], p.gate.shape[1]));
  const SiluMulKernelParams kp{.gate = p.gate.ptr<const __nv_bfloat16>(), .up = p.up.ptr<const __nv_bfloat16>(),
                               .out = p.out.ptr<__nv_bfloat16>(), .rows = p.gate.shape[0],
                               .chunks_per_row = p.gate.shape[1] / 8, .ld_gate = p.gate.stride[0],
                               .ld_up = p.up.stride[0], .ld_out = p.out.stride[0]};
  const int64_t total = kp.rows * kp.chunks_per_row;
  if (total == 0) return Status::ok();
  const int64_t blocks = (total + 255) / 256;
  silu_mul_kernel<<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256, 0,
                    reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

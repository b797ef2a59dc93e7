#pragma once
// RMSNorm and the fused residual-add + RMSNorm of the pre-norm block boundary.
//
//   rmsnorm     : out[i, :] = w * (x[i, :] / sqrt(mean(x[i, :]^2) + eps))
//   add_rmsnorm : residual[i, :] += x[i, :];  out[i, :] = rmsnorm(residual[i, :])
//
// Arithmetic in float; out rounded to bf16 once. The residual may be kept in fp32: it is the sum of every
// layer's attention and MLP outputs, and rounding it to bf16 after each of 2·L additions would add 2·L
// rounding errors of 2^-9 relative to the largest term, while each layer's update is often far smaller
// than the stream itself (small updates would be partly or wholly lost). fp32 costs one extra 2 bytes per
// value per read and write of a memory-bound op.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct RmsNormParams {
  TensorView x;    // [t, n] bf16 | fp32, row stride >= n
  TensorView w;    // [n] bf16, contiguous
  TensorView out;  // [t, n] bf16, row stride >= n; may alias x
  float eps = 1e-6f;
};

struct AddRmsNormParams {
  TensorView x;         // [t, n] bf16, row stride >= n: the sublayer output to add
  TensorView residual;  // [t, n] fp32 | bf16, row stride >= n: updated in place
  TensorView w;         // [n] bf16, contiguous
  TensorView out;       // [t, n] bf16, row stride >= n; may alias x, not residual
  float eps = 1e-6f;
};

namespace cuda {
// Device pointers; one warp per row, 16-byte loads; no allocation.
Status rmsnorm(const RmsNormParams& p, Stream stream);
Status add_rmsnorm(const AddRmsNormParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

#pragma once
// silu_mul: out = silu(gate) · up, silu(x) = x / (1 + exp(-x)) in float (the SwiGLU MLP's middle).
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct SiluMulParams {
  TensorView gate;  // [t, n] bf16, row stride >= n
  TensorView up;    // [t, n] bf16, row stride >= n
  TensorView out;   // [t, n] bf16, row stride >= n; may alias gate or up
};

namespace cuda {
// Device pointers; 8 values per thread (16-byte accesses); no allocation.
Status silu_mul(const SiluMulParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

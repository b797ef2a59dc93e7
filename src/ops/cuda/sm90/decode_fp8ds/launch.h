#pragma once
// Host entry of the exact-code fp8_ds kernels (this directory). Called by src/ops/cuda/mla_decode.cu after
// validation; the combine kernel is decode/'s.
#include <cuda_runtime_api.h>

#include "mla/core/status.h"
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode_fp8ds {

// 16-row tiles (rows = s_q * h_q = 16) on the warp-specialized wgmma kernel (kernel_ws16.cuh): grid = (num_parts, 1).
Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream);

}  // namespace mla::sm90::decode_fp8ds

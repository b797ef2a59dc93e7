#pragma once
// Host entry of the exact-code fp8_ds kernels (this directory). Called by src/ops/cuda/mla_decode.cu after
// validation; the combine kernel is decode/'s.
#include <cuda_runtime_api.h>

#include "mla/core/status.h"
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode_fp8ds {

// 16-row tiles (rows = s_q * h_q = 16): grid = (num_parts, 1). See kernel_rg1.cuh.
Status launch_decode_fp8ds_rg1(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream);
// The same tiles on the warp-specialized wgmma kernel (kernel_ws16.cuh): grid = (num_parts, 1). base: run F2's
// schedule instead of the default (comparison).
Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream, bool base = false);

}  // namespace mla::sm90::decode_fp8ds

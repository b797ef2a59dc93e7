#pragma once
// Host entry of the owner-converts fp8_ds kernel for 64-row tiles of h_q >= 64 (kernel_ws64.cuh). Called by
// src/ops/cuda/mla_decode.cu after validation and encode_tensor_maps_fp8ds; the combine kernel is decode/'s.
#include <cuda_runtime_api.h>

#include "mla/core/status.h"
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode_fp8ds {

// grid = (num_parts, num_head_tiles). plain_out: the form without the TMA-store epilogue for direct segments, for
// steps whose sequences are all cut (decode_plan_spreads_sequences) merged by the combine (p.merge_counters null).
Status launch_decode_fp8ds_ws64(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream,
                                bool plain_out = false);

}  // namespace mla::sm90::decode_fp8ds

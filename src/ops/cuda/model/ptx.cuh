#pragma once
// The model kernels' PTX wrappers are the decode kernels', named here in mla::cuda for grouped_gemm*.cu and
// prefill_attention.cu: sm90/decode/ptx.h (cp.async with its zero fill, ldmatrix, mma.sync bf16) and
// sm90/decode/wgmma.h (the grouped GEMM's wgmma, its fences and shared-memory descriptors).
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"

namespace mla::cuda {

using sm90::decode::cp_async_16;
using sm90::decode::cp_async_commit;
using sm90::decode::cp_async_wait;
using sm90::decode::ldmatrix_x4;
using sm90::decode::ldmatrix_x4_trans;
using sm90::decode::mma_bf16;
using sm90::decode::smem_u32;

using sm90::decode::fence_operands;
using sm90::decode::fence_proxy_async;
using sm90::decode::make_smem_desc;
using sm90::decode::wgmma_commit;
using sm90::decode::wgmma_fence;
using sm90::decode::wgmma_m64n256k16_bf16;
using sm90::decode::wgmma_wait_group;

}  // namespace mla::cuda

#pragma once
// Definition of launch_decode_fp8_ws, included only by the instantiation files (one per WsSchedule).
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"

namespace mla::sm90::decode_fp8 {

template <class S>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = ws_smem_layout<S>().total;
  auto* kernel = &mla_decode_fp8_ws_kernel<S>;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode (fp8)", attr);
  kernel<<<grid, kWsThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode (fp8)");
  return Status::ok();
}

}  // namespace mla::sm90::decode_fp8

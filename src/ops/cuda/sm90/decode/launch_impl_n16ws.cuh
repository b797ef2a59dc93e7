#pragma once
// Definition of launch_decode_n16ws, included only by its instantiation files.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/kernel_n16ws.cuh"
#include "ops/cuda/sm90/decode/launch.h"

namespace mla::sm90::decode {

template <class Traits>
Status launch_decode_n16ws(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = n16ws::smem_layout_n16ws().total;
  auto* kernel = &n16ws::mla_decode_n16ws_kernel<Traits>;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode", attr);
  kernel<<<grid, n16ws::kThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode");
  clock_probe_fold(stream, kClock16BitN16Ws);  // diagnostics builds only (clock_probe.cuh)
  return Status::ok();
}

}  // namespace mla::sm90::decode

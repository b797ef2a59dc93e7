// The warp-specialized exact-code fp8_ds kernel for 16-row tiles (kernel_ws16.cuh) and its launcher.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode_fp8ds/kernel_ws16.cuh"
#include "ops/cuda/sm90/decode_fp8ds/launch.h"

namespace mla::sm90::decode_fp8ds {

Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = ws16::layout().total;
  auto* kernel = &ws16::mla_decode_fp8ds_ws16_kernel;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode", attr);
  kernel<<<grid, ws16::kThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode");
  return Status::ok();
}

}  // namespace mla::sm90::decode_fp8ds

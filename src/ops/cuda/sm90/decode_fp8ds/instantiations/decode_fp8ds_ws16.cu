// The warp-specialized exact-code fp8_ds kernel for 16-row tiles (kernel_ws16.cuh) and its launcher.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode_fp8ds/kernel_ws16.cuh"
#include "ops/cuda/sm90/decode_fp8ds/launch.h"

namespace mla::sm90::decode_fp8ds {

namespace {
template <bool kOpt>
cudaError_t set_smem_limit() {
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(&ws16::mla_decode_fp8ds_ws16_kernel<kOpt>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, ws16::layout().total);
  return attr;
}
}  // namespace

Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream, bool base) {
  constexpr int smem = ws16::layout().total;
  auto* kernel = base ? &ws16::mla_decode_fp8ds_ws16_kernel<false> : &ws16::mla_decode_fp8ds_ws16_kernel<true>;
  MLA_CUDA_TRY("mla_decode", base ? set_smem_limit<false>() : set_smem_limit<true>());
  kernel<<<grid, ws16::kThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode");
  return Status::ok();
}

}  // namespace mla::sm90::decode_fp8ds

// The warp-specialized exact-code fp8_ds kernel for 16-row tiles (kernel_ws16.cuh) and its launcher.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/launch_kernel.cuh"
#include "ops/cuda/sm90/decode_fp8ds/kernel_ws16.cuh"
#include "ops/cuda/sm90/decode_fp8ds/launch.h"

namespace mla::sm90::decode_fp8ds {

Status launch_decode_fp8ds_ws16(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = ws16::layout().total;
  return decode::launch_merging_kernel<&ws16::mla_decode_fp8ds_ws16_kernel<true>,
                                       &ws16::mla_decode_fp8ds_ws16_kernel<false>>(p, grid, ws16::kThreads, smem, stream);
}

}  // namespace mla::sm90::decode_fp8ds

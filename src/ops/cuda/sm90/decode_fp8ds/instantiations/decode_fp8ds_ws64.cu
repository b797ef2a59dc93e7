// The owner-converts fp8_ds kernel for 64-row tiles (kernel_ws64.cuh) and its launcher.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/launch_kernel.cuh"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8ds/kernel_ws64.cuh"
#include "ops/cuda/sm90/decode_fp8ds/launch_ws64.h"

namespace mla::sm90::decode_fp8ds {

Status launch_decode_fp8ds_ws64(const decode::DecodeKernelParams& p, dim3 grid, cudaStream_t stream, bool plain_out) {
  constexpr int smem = decode::ws_smem_layout(true).total;
  if (plain_out) {
    if (p.merge_counters != nullptr)
      return Status::internal("mla_decode", "fp8_ds ws64 with plain stores has no fused merge (merge_counters given)");
    return decode::launch_kernel<&ws64::mla_decode_fp8ds_ws64_kernel<false, false>>(
        p, grid, decode::kWsThreads, smem, stream, "mla_decode", /*pairable=*/true);
  }
  return decode::launch_merging_kernel<&ws64::mla_decode_fp8ds_ws64_kernel<true>,
                                       &ws64::mla_decode_fp8ds_ws64_kernel<false>>(
      p, grid, decode::kWsThreads, smem, stream, "mla_decode", /*pairable=*/true);
}

}  // namespace mla::sm90::decode_fp8ds

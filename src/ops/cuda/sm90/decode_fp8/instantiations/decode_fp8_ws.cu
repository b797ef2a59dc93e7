// fp8 (e4m3) KV, 64-row tiles, warp-specialized (kernel_ws.cuh): schedule pvfirst (the default,
// MLA_DECODE_FP8_VARIANT64=ws) and overlap (MLA_DECODE_FP8_VARIANT64=ws_overlap).
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"

namespace mla::sm90::decode_fp8 {

template <bool kPvFirst>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  using S = WsSchedule<kPvFirst>;
  constexpr int smem = ws_smem_layout<S>().total;
  auto* kernel = &mla_decode_fp8_ws_kernel<S>;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  MLA_CUDA_TRY("mla_decode (fp8)", attr);
  kernel<<<grid, kWsThreads, smem, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode (fp8)");
  return Status::ok();
}

template Status launch_decode_fp8_ws<true>(const Fp8DecodeParams&, dim3, cudaStream_t);
template Status launch_decode_fp8_ws<false>(const Fp8DecodeParams&, dim3, cudaStream_t);

}  // namespace mla::sm90::decode_fp8

// fp8 (e4m3) KV, 64-row tiles, the scorer-split warp-specialized kernel (kernel_ws3.cuh; experimental,
// MLA_DECODE_FP8_VARIANT64=ws3).
#include "ops/cuda/sm90/decode_fp8/kernel_ws3.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

Status launch_decode_fp8_ws3(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  return after_ws_launch(
      launch_fp8_kernel<&mla_decode_fp8_ws3_kernel>(p, grid, kWs3Threads, ws3_smem_layout().total, stream), stream,
      decode::kClockFp8Ws3);
}

}  // namespace mla::sm90::decode_fp8

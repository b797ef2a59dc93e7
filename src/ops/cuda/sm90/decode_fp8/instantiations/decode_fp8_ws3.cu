// fp8 (e4m3) KV, 64-row tiles, the scorer-split warp-specialized kernel (kernel_ws3.cuh; experimental,
// MLA_DECODE_FP8_VARIANT64=ws3).
#include "ops/cuda/sm90/decode_fp8/kernel_ws3.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

Status launch_decode_fp8_ws3(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  const Status st =
      launch_fp8_kernel<&mla_decode_fp8_ws3_kernel>(p, grid, kWs3Threads, ws3_smem_layout().total, stream);
#ifdef MLA_DECODE_PHASES
  if (st.is_ok()) decode::phase_sums_print_kernel<<<1, 1, 0, stream>>>();  // ../decode/phase_sums.cuh
#endif
#ifdef MLA_DECODE_CLOCK
  if (st.is_ok()) decode::clock_probe_fold_kernel<<<1, 1, 0, stream>>>(0);  // ../decode/clock_probe.cuh
#endif
  return st;
}

}  // namespace mla::sm90::decode_fp8

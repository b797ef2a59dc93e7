#pragma once
// Definition of launch_decode_fp8_ws, included only by the instantiation files (one per WsSchedule).
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

template <class S>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  const Status st =
      launch_fp8_kernel<&mla_decode_fp8_ws_kernel<S>>(p, grid, kWsThreads, ws_smem_layout<S>().total, stream);
#ifdef MLA_DECODE_PHASES
  if (st.is_ok()) decode::phase_sums_print_kernel<<<1, 1, 0, stream>>>();  // diagnostics builds (../decode/phase_sums.cuh)
#endif
#ifdef MLA_DECODE_CLOCK
  if (st.is_ok()) decode::clock_probe_fold_kernel<<<1, 1, 0, stream>>>(0);  // ../decode/clock_probe.cuh
#endif
  return st;
}

}  // namespace mla::sm90::decode_fp8

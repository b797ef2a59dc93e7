#pragma once
// Definition of launch_decode_fp8_ws, included only by the instantiation files (one per WsSchedule).
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

template <class S>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = ws_smem_layout<S>().total;
  constexpr auto fused = &mla_decode_fp8_ws_kernel<S, true>, combine = &mla_decode_fp8_ws_kernel<S, false>;
  return after_ws_launch(
      launch_fp8_merging_kernel<fused, combine>(p, grid, kWsThreads, smem, stream, /*pairable=*/true), stream,
      decode::kClockFp8Ws);
}

template <class S>
Status launch_decode_fp8_ws_combined(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  if (p.d.merge_counters != nullptr)
    return Status::internal("mla_decode (fp8)", "this 64-row schedule has no fused merge (merge_counters given)");
  constexpr int smem = ws_smem_layout<S>().total;
  return after_ws_launch(launch_fp8_kernel<&mla_decode_fp8_ws_kernel<S, false>>(p, grid, kWsThreads, smem, stream,
                                                                                 /*pairable=*/true),
                         stream, decode::kClockFp8Ws);
}

}  // namespace mla::sm90::decode_fp8

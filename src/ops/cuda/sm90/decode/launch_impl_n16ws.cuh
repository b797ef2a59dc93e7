#pragma once
// Definition of launch_decode_n16ws, included only by its instantiation files.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/kernel_n16ws.cuh"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/launch_kernel.cuh"

namespace mla::sm90::decode {

template <class Traits>
Status launch_decode_n16ws(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = n16ws::smem_layout_n16ws().total;
  MLA_TRY((launch_merging_kernel<&n16ws::mla_decode_n16ws_kernel<Traits, true>,
                                 &n16ws::mla_decode_n16ws_kernel<Traits, false>>(p, grid, n16ws::kThreads, smem,
                                                                                 stream)));
  clock_probe_fold(stream, kClock16BitN16Ws);  // diagnostics builds only (clock_probe.cuh)
  return Status::ok();
}

}  // namespace mla::sm90::decode

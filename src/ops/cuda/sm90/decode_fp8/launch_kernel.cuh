#pragma once
// Launch of one fp8 decode kernel instantiation with its dynamic shared memory (launch_impl*.cuh).
#include <cuda_runtime_api.h>

#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/clock_probe.cuh"
#include "ops/cuda/sm90/decode/launch_kernel.cuh"
#include "ops/cuda/sm90/decode/phase_sums.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8 {

// kKernel: the kernel's address (../decode/launch_kernel.cuh), errors named "mla_decode (fp8)".
// pairable: head-tile pairs (../decode/launch_kernel.cuh launch_kernel).
template <auto kKernel>
Status launch_fp8_kernel(const Fp8DecodeParams& p, dim3 grid, int threads, int smem, cudaStream_t stream,
                         bool pairable = false) {
  return decode::launch_kernel<kKernel>(p, grid, threads, smem, stream, "mla_decode (fp8)", pairable);
}

// A kernel with a fused-merge instantiation (../decode/launch_kernel.cuh launch_merging_kernel), errors named as above.
// pairable: head-tile pairs (../decode/launch_kernel.cuh launch_kernel).
template <auto kFusedKernel, auto kCombineKernel>
Status launch_fp8_merging_kernel(const Fp8DecodeParams& p, dim3 grid, int threads, int smem, cudaStream_t stream,
                                 bool pairable = false) {
  return decode::launch_merging_kernel<kFusedKernel, kCombineKernel>(p, grid, threads, smem, stream,
                                                                     "mla_decode (fp8)", pairable);
}

// Behind a 64-row warp-specialized launch (st: its status): the diagnostics builds' printer and clock fold
// (../decode/phase_sums.cuh, clock_probe.cuh), nothing otherwise. Static, as the kernels those launch.
static inline Status after_ws_launch(const Status& st, cudaStream_t stream, decode::ClockProbeKernel kernel) {
  if (st.is_ok()) {
    decode::phase_sums_print(stream);
    decode::clock_probe_fold(stream, kernel);
  }
  return st;
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Definition of launch_decode_fp8, included only by the instantiation files.
#include "ops/cuda/sm90/decode_fp8/kernel.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

template <int RG>
Status launch_decode_fp8(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  return launch_fp8_kernel<&mla_decode_fp8_kernel<RG>>(p, grid, kThreads,
                                                             smem_layout(RG, WarpShape<RG>::kSlices).total, stream);
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Definition of launch_decode_fp8_h16, included only by its instantiation file.
#include "ops/cuda/sm90/decode_fp8/kernel_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

Status launch_decode_fp8_h16(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel>(p, grid, h16::kThreads, h16::smem_layout_h16().total,
                                                            stream);
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Definition of launch_decode_fp8_h16, included only by its instantiation file.
#include <cstdlib>

#include "ops/cuda/sm90/decode_fp8/kernel_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

Status launch_decode_fp8_h16(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  // Temporary A/B knob of run H7 (kernel_h16.cuh kVar), read once.
  static const int var = [] {
    const char* v = std::getenv("MLA_DECODE_FP8_H16");
    return v ? std::atoi(v) : 0;
  }();
  constexpr int smem = h16::smem_layout_h16().total;
  switch (var) {
    case 1: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<1>>(p, grid, h16::kThreads, smem, stream);
    case 15: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<15>>(p, grid, h16::kThreads, smem, stream);
    case 11: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<11>>(p, grid, h16::kThreads, smem, stream);
    case 9: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<9>>(p, grid, h16::kThreads, smem, stream);
    case 41: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<41>>(p, grid, h16::kThreads, smem, stream);
    case 47: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<47>>(p, grid, h16::kThreads, smem, stream);
    case 79: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<79>>(p, grid, h16::kThreads, smem, stream);
    case 111: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<111>>(p, grid, h16::kThreads, smem, stream);
    default: return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<0>>(p, grid, h16::kThreads, smem, stream);
  }
}

}  // namespace mla::sm90::decode_fp8

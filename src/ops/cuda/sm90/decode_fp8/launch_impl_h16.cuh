#pragma once
// Definition of launch_decode_fp8_h16, included only by its instantiation file.
#include "ops/cuda/sm90/decode_fp8/kernel_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

Status launch_decode_fp8_h16(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  const int smem = h16::smem_layout_h16().total;
  // p.h16_early_s picks the instantiation (the forced ones exist for tests: kernel_h16.cuh, scorer).
  const Status st = [&]() -> Status {
    switch (p.h16_early_s) {
      case kEarlySAlways:
        return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<kEarlySAlways>>(p, grid, h16::kThreads, smem, stream);
      case kEarlySNever:
        return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<kEarlySNever>>(p, grid, h16::kThreads, smem, stream);
      default:
        return launch_fp8_kernel<&h16::mla_decode_fp8_h16_kernel<kEarlySAuto>>(p, grid, h16::kThreads, smem, stream);
    }
  }();
  if (st.is_ok()) decode::clock_probe_fold(stream, decode::kClockFp8H16);  // diagnostics builds only
  return st;
}

}  // namespace mla::sm90::decode_fp8

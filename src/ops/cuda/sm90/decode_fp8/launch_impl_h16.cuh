#pragma once
// Definition of the 16- and 32-row wgmma launchers (kernel_h16.cuh), included only by their instantiation files
// (decode_fp8_h16.cu: RG 1, decode_fp8_n32.cu: RG 2).
#include "ops/cuda/sm90/decode_fp8/kernel_h16.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/launch_kernel.cuh"

namespace mla::sm90::decode_fp8 {

template <int RG>
Status launch_decode_fp8_tile(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  const int smem = h16::smem_layout_h16<RG>().total;
  constexpr int kThreads = h16::Tile<RG>::kThreads;
  // p.h16_early_s picks the instantiation (the forced ones exist for tests: kernel_h16.cuh, scorer). The 32-row form's
  // default is `always`: its scorer's page is long enough that page j + 1 has nearly always landed, and the probe cost
  // it more than it saved (H200 session 23 call 4, h32: b128 s8192 172.0-172.4 us always, 175.2-175.7 auto; b32 s8192
  // 57.6-57.9 / 58.6-58.8; no row slower), so it has no `auto` instantiation.
  // Each schedule's fused-merge or combine-mode instantiation (decode/launch_kernel.cuh, mla_decode.cu).
  auto launch = [&]<H16EarlyS kEarly>() -> Status {
    constexpr auto fused = &h16::mla_decode_fp8_h16_kernel<RG, kEarly, true>;
    constexpr auto combine = &h16::mla_decode_fp8_h16_kernel<RG, kEarly, false>;
    return launch_fp8_merging_kernel<fused, combine>(p, grid, kThreads, smem, stream);
  };
  const Status st = [&]() -> Status {
    if (p.h16_early_s == kEarlySNever) return launch.template operator()<kEarlySNever>();
    if constexpr (RG == 1) {
      if (p.h16_early_s == kEarlySAuto) return launch.template operator()<kEarlySAuto>();
    }
    return launch.template operator()<kEarlySAlways>();
  }();
  // Diagnostics builds only.
  if (st.is_ok()) decode::clock_probe_fold(stream, RG == 1 ? decode::kClockFp8H16 : decode::kClockFp8N32);
  return st;
}

}  // namespace mla::sm90::decode_fp8

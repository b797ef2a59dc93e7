#pragma once
// Definition of launch_decode, included only by the instantiation files.
#include "mla/core/cuda_check.h"
#include "ops/cuda/sm90/decode/kernel.cuh"
#include "ops/cuda/sm90/decode/kernel_ws.cuh"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/launch_kernel.cuh"
#include "ops/cuda/sm90/decode/traits.h"

namespace mla::sm90::decode {

template <class Traits, int RG, bool kWg>
Status launch_decode(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr int smem = PageLoaderOf<Traits, RG, kWg>::type::layout(RG, WarpShape<RG>::kSlices).total;
  static_assert(smem <= 227 * 1024, "fits the sm90 shared-memory limit");
  MLA_TRY((launch_kernel<&mla_decode_kernel<Traits, RG, kWg>>(p, grid, kThreads, smem, stream)));
  clock_probe_fold(stream, kClock16BitN16);  // diagnostics builds only (clock_probe.cuh)
  return Status::ok();
}

template <class Traits, bool kPvFirst, bool kSlabBars>
Status launch_decode_ws(const DecodeKernelParams& p, dim3 grid, cudaStream_t stream, bool plain_out) {
  static_assert(kPvFirst && kSlabBars, "only the pvfirst schedule with per-slab barriers is built (kernel_ws.cuh)");
  constexpr int smem = ws_smem_layout(Traits::kFormat == KvFormat::kFp8Ds).total;
  // A fused-merge instantiation and a plain-store form for the 16-bit formats only: fp8_ds's producer-converts path has
  // neither (its ws16 and owner-converts kernels have their own; mla_decode.cu passes no counters here), so both
  // merging choices are its one kernel.
  constexpr bool k16 = Traits::kFormat != KvFormat::kFp8Ds;
  if (plain_out) {
    if constexpr (k16) {
      if (p.merge_counters != nullptr)
        return Status::internal("mla_decode",
                                "the 64-row plain-store form merges through the combine (merge_counters given)");
      MLA_TRY((launch_kernel<&mla_decode_ws_kernel<Traits, false, false>>(p, grid, kWsThreads, smem, stream,
                                                                           "mla_decode", /*pairable=*/true)));
    } else {
      return Status::internal("mla_decode", "the fp8_ds producer-converts 64-row kernel has no plain-store form");
    }
  } else {
    MLA_TRY((launch_merging_kernel<&mla_decode_ws_kernel<Traits, k16>, &mla_decode_ws_kernel<Traits, false>>(
        p, grid, kWsThreads, smem, stream, "mla_decode", /*pairable=*/true)));
  }
  phase_sums_print(stream);             // diagnostics builds only (phase_sums.cuh)
  clock_probe_fold(stream, kClockWs64);  // (clock_probe.cuh)
  return Status::ok();
}

}  // namespace mla::sm90::decode

#pragma once
// Definition of launch_decode_fp8_ws, included only by the instantiation files (one per WsSchedule).
#include <cuda_runtime_api.h>

#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/launch.h"

namespace mla::sm90::decode_fp8 {

// MLA_DECODE_FP8_STEAL (steal_ws.cuh; unset or 0: off). T: fixed tails of T pages (Z = C = T); dT: the same,
// deterministic (every tail a piece of its own, whoever walks it); zZcC: zones of Z pages claimed in chunks of C, a
// thief takes the second half of the most-behind part's unclaimed chunks. Temporary, for the A/B of NOTES_plan.md
// session 8 (tail); read on every call so tests can switch it between cases. *cfg = Z | C << 8 | det << 16.
inline Status steal_config(dim3 grid, int* cfg) {
  struct Mode {
    const char* name;
    int z, c, det;
  };
  static constexpr Mode kModes[] = {{"0", 0, 0, 0},      {"2", 2, 2, 0},      {"3", 3, 3, 0},      {"4", 4, 4, 0},
                                    {"6", 6, 6, 0},      {"8", 8, 8, 0},      {"12", 12, 12, 0},   {"16", 16, 16, 0},
                                    {"d2", 2, 2, 1},     {"d3", 3, 3, 1},     {"d4", 4, 4, 1},     {"d8", 8, 8, 1},
                                    {"z16c2", 16, 2, 0}, {"z32c2", 32, 2, 0}, {"z32c4", 32, 4, 0}, {"z64c2", 64, 2, 0},
                                    {"z64c4", 64, 4, 0}, {"z64c8", 64, 8, 0}};
  const EnvKnob k = read_env_knob("MLA_DECODE_FP8_STEAL", {"0", "2", "3", "4", "6", "8", "12", "16", "d2", "d3", "d4",
                                                           "d8", "z16c2", "z32c2", "z32c4", "z64c2", "z64c4", "z64c8"});
  MLA_TRY(k.status);
  const Mode m = kModes[k.index < 0 ? 0 : k.index];
  *cfg = m.z == 0 ? 0 : m.z | m.c << 8 | m.det << 16;
  if (static_cast<int64_t>(grid.x) * grid.y > kStealMaxCtas) *cfg = 0;  // the words cover kStealMaxCtas CTAs
  return Status::ok();
}

template <class S>
Status launch_decode_fp8_ws(const Fp8DecodeParams& p, dim3 grid, cudaStream_t stream) {
  int steal = 0;
  MLA_TRY(steal_config(grid, &steal));
  constexpr int kSmem = ws_smem_layout<S>().total;
  // Raising the dynamic shared-memory limit is a function attribute, not a stream operation: done once.
  static const cudaError_t attr =
      cudaFuncSetAttribute(mla_decode_fp8_ws_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  MLA_CUDA_TRY("mla_decode (fp8)", attr);
  mla_decode_fp8_ws_kernel<S><<<grid, kWsThreads, kSmem, stream>>>(p, steal);
  MLA_CUDA_TRY_LAUNCH("mla_decode (fp8)");
  return Status::ok();
}

}  // namespace mla::sm90::decode_fp8

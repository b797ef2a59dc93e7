#pragma once
// Which fp8 decode kernel runs a step's tiles (dispatch.cu run_decode_fp8), as a rule of the first tile's rows and the
// knobs: the dispatch takes it from here, and the fp8 GPU suite picks the reference's arithmetic by it (each family
// adds up its products its own way: tests/gpu/test_mla_decode_fp8.cu fp8_reference_sums). Plain C++: no CUDA types.
#include "mla/core/env_knob.h"
#include "mla/core/status.h"

namespace mla::sm90::decode_fp8 {

// How tiles of 32-47 rows run (MLA_DECODE_N32, n32_mode below): the fp8 32-row wgmma kernel where the tile is exactly
// 32 rows (kAuto; else as kWs), the 64-row warp-specialized kernel (kWs) or the two-row-group mma.sync one (kMma).
enum class N32Mode { kAuto, kWs, kMma };

// MLA_DECODE_N32 = auto (default) | ws | mma: tiles of 32-47 query rows (h_q 32 s_q 1, h_q 16 s_q 2) on the formats'
// 64-row warp-specialized kernels (ws), whose rows past the tile compute the next sequence's q (finite, never
// written), or on the 256-thread mma.sync kernels of two row groups (mma), the default until session 22: those ran
// 1.5-2.7x slower than the same bytes at h_q 64 (H200, b128 s4096: bf16 227.3 us against h_q 64's 154.5, fp8 216.6
// against 105.9; bench/decode/NOTES.md "Session 22"). auto is ws, but for fp8 tiles of exactly 32 rows, which run the
// 16-row keys-as-M wgmma kernel with two row groups (kernel_h16.cuh, session 23). Read on every call (mla_decode.cu;
// the fp8 suite, to pick its reference's sums), so the tests run each such case on every choice.
inline Status n32_mode(N32Mode* mode) {
  const EnvKnob k = read_env_knob("MLA_DECODE_N32", {"auto", "ws", "mma"});
  MLA_TRY(k.status);
  *mode = k.index < 0 ? N32Mode::kAuto : static_cast<N32Mode>(k.index);  // the list's order is N32Mode's
  return Status::ok();
}

enum class Fp8KernelFamily {
  kH16,      // the keys-as-M wgmma kernel (kernel_h16.cuh): 16-row tiles, and 32-row ones under N32Mode::kAuto
  kMmaSync,  // the mma.sync kernels (kernel.cuh): 32-47-row tiles under kMma, any tile under the mma_sync variant
  kWs64,     // the 64-row warp-specialized wgmma kernels (kernel_ws.cuh, kernel_ws3.cuh): 48-64-row tiles, and 32-47
             // under kWs
};

// rows_per_seq: s_q * h_q; tile_rows: the geometry's head-tile rows (16 for narrow tiles, else 64); mma_sync_variant:
// MLA_DECODE_FP8_VARIANT64=mma_sync.
constexpr Fp8KernelFamily fp8_kernel_family(int rows_per_seq, int tile_rows, N32Mode n32, bool mma_sync_variant) {
  const int groups = (rows_per_seq < tile_rows ? rows_per_seq : tile_rows) / 16;  // 16-row groups of the first tile
  if (groups == 1 || (rows_per_seq == 32 && n32 == N32Mode::kAuto)) return Fp8KernelFamily::kH16;
  if ((groups == 2 && n32 == N32Mode::kMma) || mma_sync_variant) return Fp8KernelFamily::kMmaSync;
  return Fp8KernelFamily::kWs64;
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Constants of the paired 16-row fp8 decode kernel (kernel_h16pp.cuh): the same products and operand layouts as the
// hand-off kernel (config_h16.h, mainloop_h16.cuh), but each warpgroup computes whole pages: warpgroup w takes the
// part's pages j with j % 2 == w (S^T, softmax, P, O^T += V^T P^T into its own O), and the two states are merged at
// each segment end. Why: the hand-off kernel is bound by the two warpgroups' serial chain S_j -> P_j -> PV_j
// (NOTES_fp8.md run H10: accumulator 27 % of its samples at P_full, scorer 14 % at P_empty); here the two chains on
// each SM sub-partition are independent.
#include "ops/cuda/sm90/decode_fp8/config_h16.h"

namespace mla::sm90::decode_fp8::h16pp {

using h16::kRows;
constexpr int kWarpgroups = 2;
constexpr int kThreads = 128 * kWarpgroups;
// Four stages, an even count, so page j + 4 has the parity (the owner) of page j: each warpgroup refills the stage
// it just consumed with its own next-but-one page (stages w and w + 2 are warpgroup w's), no empty barriers and no
// cross-warpgroup producer. Not five: the merge buffer below (32 KB) and five 40 KB stages do not both fit.
constexpr int kStages = 4;
static_assert(kStages % kWarpgroups == 0, "a stage always holds pages of one warpgroup");
constexpr int kQSlots = 2;  // as h16: sequence n + 2 into n's slot once both warpgroups are past n's last S
// The merge at a segment end: warpgroup w gives the other the half of its O^T that the other writes out (4 of its 8
// M tiles, 32 floats per thread), as float4 [w][8][128 threads] so each warp stores 512 contiguous bytes.
constexpr int kMergeHalfBytes = 128 * 32 * 4;  // 16384 per warpgroup

// Named barriers (the segment merge uses __syncthreads): per warpgroup its row-max exchange, its P-ready barrier and
// its one-item-segment finalize (128 threads each).
constexpr int kBarExchange = 1;  // + warpgroup
constexpr int kBarPReady = 3;    // + warpgroup
constexpr int kBarSolo = 5;      // + warpgroup

struct SmemLayoutH16pp {
  int k_offset, q_offset, p_offset, x_offset, red_offset, lsum_offset, mrow_offset, lsum_solo_offset, bar_offset, total;
};
constexpr SmemLayoutH16pp smem_layout_h16pp() {
  SmemLayoutH16pp s{};
  s.k_offset = 0;
  s.q_offset = s.k_offset + kStages * kSlabTileBytes;
  s.p_offset = s.q_offset + kQSlots * h16::kQTileBytes;  // one P buffer per warpgroup
  s.x_offset = s.p_offset + kWarpgroups * h16::kPBufBytes;
  s.red_offset = s.x_offset + kWarpgroups * kMergeHalfBytes;  // float [2 wg][16 rows][4 warps]: page row maxima
  s.lsum_offset = s.red_offset + kWarpgroups * kRows * 4 * 4;  // float [2 wg][16 rows][4 warps]: segment row sums
  s.mrow_offset = s.lsum_offset + kWarpgroups * kRows * 4 * 4;  // float [2 wg][16 rows]: segment row maxima
  s.lsum_solo_offset = s.mrow_offset + kWarpgroups * kRows * 4;  // float [2 wg][16 rows][4 warps]: one-item segments
  s.bar_offset = s.lsum_solo_offset + kWarpgroups * kRows * 4 * 4;  // mbarriers: full[kStages], q_full[kQSlots]
  s.total = s.bar_offset + 8 * (kStages + kQSlots);
  return s;
}
static_assert(smem_layout_h16pp().total <= 227 * 1024, "paired 16-row kernel fits the sm90 shared-memory limit");
static_assert(smem_layout_h16pp().q_offset % 1024 == 0 && smem_layout_h16pp().p_offset % 1024 == 0 &&
                  smem_layout_h16pp().x_offset % 16 == 0 && smem_layout_h16pp().bar_offset % 8 == 0,
              "wgmma operands on 1024-byte swizzle atoms, float4 and mbarrier alignment");

}  // namespace mla::sm90::decode_fp8::h16pp

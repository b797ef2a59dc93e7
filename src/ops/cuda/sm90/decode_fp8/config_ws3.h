#pragma once
// Shared-memory layout and roles of the scorer-split 64-row fp8 kernel (kernel_ws3.cuh). Operand layouts are the
// 64-row kernel's (config_ws.h): Q tile in five 128-byte-swizzled slabs, K pages in four and a 64-byte-swizzled rope
// box at the start of the fifth (mainloop_ws.cuh issue_page_tma), V^T stages of 256 rows x 128
// bytes, P halves of 64 bytes in 128-byte rows.
#include "ops/cuda/sm90/decode_fp8/config_ws.h"

namespace mla::sm90::decode_fp8 {

// Warpgroups: 0 / 1 accumulators (output columns [0, 256) / [256, 512): the epilogue's `wg`), 2 the scorer (S, the
// softmax, P of every page), 3 the producer (warp 0 lane 0: TMA of Q and pages; warps 1..3: V^T transposers).
constexpr int kWs3Threads = 512;
constexpr int kWs3Scorer = 2, kWs3Producer = 3;
// Transpose warps: 1..3 of the producer warpgroup (kernel_ws.cuh's ws_transposer, as in the ws kernel).
constexpr int kWs3TrWarps = 3, kWs3TransposeThreads = 32 * kWs3TrWarps;
constexpr int kWs3KStages = 2, kWs3VStages = 2;
constexpr int kWs3PSlots = 4;  // P halves (two per 8 KB buffer) with their row maxima and row sums
constexpr int kWs3QRegSteps = 8;  // the scorer's S: the last 8 k32 steps take Q from registers (as WsQReg)
static_assert(kWs3QRegSteps > 0, "kernel_ws3.cuh always loads Q fragments");
// Register split (setmaxnreg; 4 x 128 = 512 per thread-slot at launch): accumulators hold O (128) + state; the
// scorer S (32), 8 Q steps (32) and the softmax; the producer warpgroup the transposers (56, as in kernel_ws.cuh).
// ptxas checks every instruction against the launch's 128, not the setmaxnreg budget (C7602): hence P.V as
// m64n128k32.
constexpr int kWs3AccRegs = 168, kWs3ScorerRegs = 120, kWs3ProducerRegs = 56;
static_assert(2 * kWs3AccRegs + kWs3ScorerRegs + kWs3ProducerRegs == 4 * 128, "the launch's 128 registers x 512");

struct Ws3SmemLayout {
  int q_offset, k_offset, vt_offset, p_offset, m_offset, rs_offset, l_offset, bar_offset, total;
};
constexpr Ws3SmemLayout ws3_smem_layout() {
  Ws3SmemLayout s{};
  s.q_offset = 0;
  s.k_offset = s.q_offset + kSlabTileBytes;
  s.vt_offset = s.k_offset + kWs3KStages * kSlabTileBytes;
  s.p_offset = s.vt_offset + kWs3VStages * kVtBytes;
  s.m_offset = s.p_offset + kWs3PSlots / 2 * kPBufBytes;     // [slot][64]: the running max after the slot's page
  s.rs_offset = s.m_offset + kWs3PSlots * kRowsPerCta * 4;   // [slot][64]: the page's row sums (unrounded P)
  s.l_offset = s.rs_offset + kWs3PSlots * kRowsPerCta * 4;   // [parity][warpgroup][64]: epilogue row sums
  s.bar_offset = s.l_offset + 2 * 2 * kRowsPerCta * 4;
  s.total = s.bar_offset + kWsBarrierBytes;
  return s;
}
static_assert(ws3_smem_layout().total <= 227 * 1024 && ws3_smem_layout().p_offset % 1024 == 0 &&
                  ws3_smem_layout().vt_offset % 1024 == 0,
              "fits the sm90 limit, wgmma operands on 1024-byte swizzle atoms");
static_assert(8 * (2 * kWs3KStages + 2 * kWs3VStages + 2 + 2 * kWs3PSlots) <= kWsBarrierBytes, "barrier area");

}  // namespace mla::sm90::decode_fp8

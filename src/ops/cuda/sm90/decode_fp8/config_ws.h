#pragma once
// Constants and shared-memory layout of the warp-specialized 64-row fp8 kernel (kernel_ws.cuh).
//
// Every wgmma operand is K-major in the canonical 128-byte-swizzle layout of ../decode/wgmma.h (rows 128
// bytes apart, 16-byte chunk c of row r at c ^ (r % 8), 1024-byte aligned 8-row groups):
//   Q tile, K page: five 64-row slabs (config.h slab_offset, 128 dims each; the fifth holds dims 512..575
//     in its first 64 bytes, the TMA zero-fills the rest: the box reaches past the 576-byte row);
//   V^T of a page: 256 rows, row n = [dim n: 64 keys | dim n + 256: 64 keys], so consumer warpgroup w
//     reads its 256 dims at byte offset 64 w of every row (keys permuted, see transpose_ws.cuh);
//   P: 64 rows, page j's 64 keys at byte offset 64 (j % 2) (two consecutive pages share one buffer).
// Page stages (K) and V^T stages are separate: a K stage is free once the owner's S and the transpose
// are done, long before both P.V products end, so the next page's TMA starts early.
#include "ops/cuda/sm90/decode_fp8/config.h"

namespace mla::sm90::decode_fp8 {

constexpr int kWsThreads = 384;           // warpgroups 0, 1: consumers; 2: producer (TMA thread + transposers)
constexpr int kWsConsumerThreads = 256;
constexpr int kWsTransposeThreads = 96;   // warps 1..3 of the producer warpgroup
constexpr int kVtBytes = kDimV * kBlockN;           // 32768
constexpr int kPBufBytes = kRowsPerCta * 128;        // 8192: P of two pages (64-byte halves of each row)
constexpr int kWsBarrierBytes = 256;

// Variant of the kernel (kernel_ws.cuh): consumer schedule, stage counts, transpose rounds.
//  kAhead (`ws_ahead`, the default since run W10: 6-10 % faster than ws_overlap_stsm on the b32/b128 rows):
//    the overlap schedule reordered inside a warpgroup: once S_j is done, O is rescaled to m_{j-1} and
//    P_{j-1} V_{j-1} issued before the softmax of page j (which then overlaps that product), and P_j V_j queues
//    behind it on the same accumulator when no row of the warpgroup moved its max (decided on the warpgroup
//    barrier, bar.red.or); rescales by exactly 1 are skipped per warp (exact). The other warpgroup's wgmma may
//    still read P_j after it signalled P_{j+1} (the read is only issued before); it has waited for that wgmma
//    before signalling P_{j+3}, so 4 halves are safe and 2 would race.
//  !kPvFirst && !kAhead ("overlap", `ws_overlap_stsm`, the default before W10): S_j first, then the softmax against
//    m_{j-1}, signal P_j, and only then P_{j-1} V_{j-1} and P_j V_j, so S_j overlaps the other warpgroup's softmax;
//    P_j is read up to page j + 2's softmax (4 halves = 2 buffers).
//  kPvFirst (`ws_stsm`, opt-in): a warpgroup adds the other's page j - 1 before its own S_j; P_j is dead before
//    its owner writes P_{j+2} (2 P halves).
//  kKStages / kVStages: K pages (40 KB) and V^T stages (32 KB) in flight; 227 KB hold 2 + 3 or 3 + 1 (run W3
//    in bench/decode/NOTES_fp8.md: 3 + 1 was 6 % slower, 2 + 2 (overlap) and 2 + 3 equal).
//  kLdsm: ldmatrix per transpose round (transpose_ws.cuh): 2 (masked tail copy of the loop), or 4 (unmasked loop on
//    every page, tail fixed up by zero_vt_tail; runs W8-W10: the transposer is on the critical path with both its
//    ldmatrix latency and its instruction count).
//  V^T is stored with stmatrix (transpose_ws.cuh; run W4: 20 % off every large row against 4-byte stores). The
//    variants that lost (plain-store transpose `ws` / `ws_overlap`, and `ws_vreg` / `ws_vreg_overlap`: no V^T, P.V
//    as O^T = V^T P^T with V from registers) are in NOTES_fp8.md runs W2-W5 and commit 0f959ba; lazy rescale and
//    4-load rounds alone, 8-load rounds (spill), the TMA producer folded into a fourth transpose warp (slower) in
//    runs W8-W10 and commit a6047af.
template <bool kPvFirst_, int kKStages_, int kVStages_, int kLdsm_ = 2, bool kAhead_ = false>
struct WsSchedule {
  static constexpr bool kPvFirst = kPvFirst_;
  static constexpr int kKStages = kKStages_;
  static constexpr int kVStages = kVStages_;
  static constexpr int kPHalves = kPvFirst ? 2 : 4;
  static constexpr int kLdsm = kLdsm_;
  static constexpr bool kAhead = kAhead_;
  static_assert(!kAhead || !kPvFirst, "the ahead schedule is the overlap schedule, reordered");
};
using WsAhead = WsSchedule<false, 2, 2, 4, true>;  // the default
using WsOverlapStsm = WsSchedule<false, 2, 2>;
using WsPvFirstStsm = WsSchedule<true, 2, 3>;

struct WsSmemLayout {
  int q_offset, k_offset, vt_offset, p_offset, m_offset, l_offset, bar_offset, total;
};
constexpr WsSmemLayout ws_smem_layout(int k_stages, int v_stages, int p_halves) {
  WsSmemLayout s{};
  s.q_offset = 0;
  s.k_offset = s.q_offset + kSlabTileBytes;
  s.vt_offset = s.k_offset + k_stages * kSlabTileBytes;
  s.p_offset = s.vt_offset + v_stages * kVtBytes;
  s.m_offset = s.p_offset + p_halves / 2 * kPBufBytes;  // [j % p_halves][64]: running max after page j
  s.l_offset = s.m_offset + p_halves * kRowsPerCta * 4;  // [parity][warpgroup][64]: epilogue row sums
  s.bar_offset = s.l_offset + 2 * 2 * kRowsPerCta * 4;
  s.total = s.bar_offset + kWsBarrierBytes;
  return s;
}
template <class S>
constexpr WsSmemLayout ws_smem_layout() {
  return ws_smem_layout(S::kKStages, S::kVStages, S::kPHalves);
}
// Byte offset of P half `h` (page j uses half j % kPHalves) in the P area: buffer h / 2, bytes 64 (h % 2) ..
// 64 (h % 2) + 63 of each row.
__host__ __device__ constexpr int p_half_offset(int h) { return h / 2 * kPBufBytes + 64 * (h % 2); }

template <class S>
constexpr bool ws_layout_ok() {
  constexpr WsSmemLayout L = ws_smem_layout<S>();
  return L.total <= 227 * 1024 && L.k_offset % 1024 == 0 && L.vt_offset % 1024 == 0 && L.p_offset % 1024 == 0 &&
         8 * (2 * S::kKStages + 2 * S::kVStages + 2) <= kWsBarrierBytes;
}
static_assert(ws_layout_ok<WsAhead>() && ws_layout_ok<WsOverlapStsm>() && ws_layout_ok<WsPvFirstStsm>(),
              "every variant fits the sm90 shared-memory limit, wgmma operands on 1024-byte swizzle atoms");
static_assert(kSlabTileBytes % 1024 == 0 && kVtBytes % 1024 == 0 && kPBufBytes % 1024 == 0, "1024-byte atoms");
static_assert(kDimV == 4 * 128 && kBlockN == 64, "V^T rows hold two dims of 64 keys each");

}  // namespace mla::sm90::decode_fp8

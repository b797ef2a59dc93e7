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
constexpr int kWsTransposeThreads = 96;   // warps 1..3 of the producer warpgroup (4 warps, 128: S::kFold)
constexpr int kVtBytes = kDimV * kBlockN;           // 32768
constexpr int kPBufBytes = kRowsPerCta * 128;        // 8192: P of two pages (64-byte halves of each row)
constexpr int kWsBarrierBytes = 256;

// Variant of the kernel (kernel_ws.cuh): consumer schedule and stage counts.
//  kPvFirst (`ws_stsm`, opt-in): a warpgroup adds the other's page j - 1 before its own S_j; P_j is dead before
//    its owner writes P_{j+2} (2 P halves).
//  !kPvFirst ("overlap", the default `ws_overlap_stsm`: 0-1.5 % faster on every h_q 128 row, run W5): S_j first, then the softmax against m_{j-1}, signal P_j, and only then P_{j-1} V_{j-1}
//    and P_j V_j, so S_j overlaps the other warpgroup's softmax; P_j is read up to page j + 2's softmax
//    (4 halves = 2 buffers).
//  kKStages / kVStages: K pages (40 KB) and V^T stages (32 KB) in flight; 227 KB hold 2 + 3 or 3 + 1 (run W3
//    in bench/decode/NOTES_fp8.md: 3 + 1 was 6 % slower, 2 + 2 (overlap) and 2 + 3 equal).
//  V^T is stored with stmatrix (transpose_ws.cuh; run W4: 20 % off every large row against 4-byte stores). The
//    variants that lost (plain-store transpose `ws` / `ws_overlap`, and `ws_vreg` / `ws_vreg_overlap`: no V^T, P.V
//    as O^T = V^T P^T with V from registers) are in NOTES_fp8.md runs W2-W5 and commit 0f959ba.
//  kLdsm: ldmatrix per transpose round (transpose_ws.cuh: 2, 4 or 8).
//  kFold: the TMA producer thread is lane 0 of transpose warp 0 (it issues page j + kKStages right after its share
//    of page j's transpose), so all four warps of the warpgroup transpose: 4 chunk pairs each instead of 6/5/5.
//  kAhead (with kLazy): overlap inside a warpgroup: P_{j-1} V_{j-1} is queued behind S_j before the softmax of
//    page j (which then overlaps it), and P_j V_j behind P_{j-1} V_{j-1} when no row's max moved; each wait_group
//    waits only for the oldest product (kernel_ws.cuh).
//    Registers: producer warpgroup 72, consumers 216 (the 168 x 384 allocation: 2 x 216 + 72 = 504), as the
//    producer's cursor next to the transposer's spills at 56.
//  kLazy (overlap only): skip the O rescale where it is a multiplication by exactly 1 (the running max did not
//    move): per warp when none of its 16 rows moved, and a warpgroup whose 64 rows all kept their max over pages
//    j - 2 .. j adds P_{j-1} V_{j-1} and P_j V_j with no rescale and no wait between them. Exact (alpha = 1;
//    the eager form may differ from it in the last bit where fma contraction leaves alpha an ulp below 1). (FA3's thresholded lazy rescale, a stale max kept until a page exceeds it by 2^8, would skip
//    nearly all of them, but P would then round to e4m3 at a different scale than the split reference's running
//    max, which the fp8 test holds the kernel to: tests/gpu/test_mla_decode_fp8.cu kFp8Tol.)
template <bool kPvFirst_, int kKStages_, int kVStages_, int kLdsm_ = 2, bool kLazy_ = false, bool kFold_ = false,
          bool kAhead_ = false>
struct WsSchedule {
  static constexpr bool kPvFirst = kPvFirst_;
  static constexpr int kKStages = kKStages_;
  static constexpr int kVStages = kVStages_;
  static constexpr int kPHalves = kPvFirst ? 2 : 4;
  static constexpr int kLdsm = kLdsm_;
  static constexpr bool kLazy = kLazy_;
  static constexpr bool kFold = kFold_;
  static constexpr bool kAhead = kAhead_;
  static_assert(!kAhead || (kLazy && !kPvFirst), "the ahead schedule is the lazy overlap schedule, reordered");
  static constexpr int kTransposeWarps = kFold ? 4 : 3;
  static constexpr int kProducerRegs = kFold ? 72 : 56;
  static constexpr int kConsumerRegs = kFold ? 216 : 224;
  static_assert(2 * kConsumerRegs + kProducerRegs <= 504, "168 registers x 384 threads at launch");
  static_assert(!kLazy || !kPvFirst, "lazy rescaling is written for the overlap schedule");
};
using WsOverlapStsm = WsSchedule<false, 2, 2>;  // the default
using WsPvFirstStsm = WsSchedule<true, 2, 3>;
using WsOverlapT4 = WsSchedule<false, 2, 2, 4>;            // run W8 candidate: 4 ldmatrix per transpose round
using WsOverlapT4Lazy = WsSchedule<false, 2, 2, 4, true>;  // run W8 candidate: + lazy rescale
using WsOverlapLazy = WsSchedule<false, 2, 2, 2, true>;    // run W8 candidate: lazy rescale alone
using WsOverlapT4Fold = WsSchedule<false, 2, 2, 4, true, true>;  // run W9 candidate: ws_t4_lazy + 4 transpose warps
using WsAheadT4 = WsSchedule<false, 2, 2, 4, true, false, true>;    // run W10 candidate: ws_t4_lazy, ahead schedule
using WsAheadT4Fold = WsSchedule<false, 2, 2, 4, true, true, true>;  // run W10 candidate: ws_t4_fold, ahead schedule

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
static_assert(ws_layout_ok<WsOverlapStsm>() && ws_layout_ok<WsPvFirstStsm>() && ws_layout_ok<WsOverlapT4Lazy>(),
              "every variant fits the sm90 shared-memory limit, wgmma operands on 1024-byte swizzle atoms");
static_assert(kSlabTileBytes % 1024 == 0 && kVtBytes % 1024 == 0 && kPBufBytes % 1024 == 0, "1024-byte atoms");
static_assert(kDimV == 4 * 128 && kBlockN == 64, "V^T rows hold two dims of 64 keys each");

}  // namespace mla::sm90::decode_fp8

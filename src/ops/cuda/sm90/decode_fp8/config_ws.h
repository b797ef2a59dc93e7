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

// Knock-out bits of the 64-row kernels, for measurements only (what each does: kernel_ws.cuh); 0 in every normal build.
#ifndef MLA_FP8_WS_KO
#define MLA_FP8_WS_KO 0
#endif
namespace mla::sm90::decode_fp8 {

// Transpose warps of the producer warpgroup (kernel_ws.cuh): warps 1..3, beside warp 0's TMA thread. (A fourth, with
// the copies issued by one of them between its rounds, lost: bench/decode/patches/fp8_ws_four_transpose_warps.patch.)
constexpr int kWsTrWarps = 3;
constexpr int kWsThreads = 384;           // warpgroups 0, 1: consumers; 2: producer (TMA thread + transposers)
constexpr int kWsConsumerThreads = 256;
constexpr int kWsTransposeThreads = 32 * kWsTrWarps;
constexpr int kVtBytes = kDimV * kBlockN;           // 32768
constexpr int kPBufBytes = kRowsPerCta * 128;        // 8192: P of two pages (64-byte halves of each row)
constexpr int kWsBarrierBytes = 256;

// Schedule of the kernel (kernel_ws.cuh, the "ahead" schedule, the default since run W10): once S_j is done, O is
// rescaled to m_{j-1} and P_{j-1} V_{j-1} issued before the softmax of page j (which then overlaps that product), and
// P_j V_j queues behind it on the same accumulator when no row of the warpgroup moved its max (decided on the
// warpgroup barrier, bar.red.or); rescales by exactly 1 are skipped per warp (exact). kLatePv (below) moves the
// P_{j-1} V_{j-1} issue after the P_j signal. The other warpgroup's wgmma may still read P_j after it signalled
// P_{j+1} (the read is issued before that signal, or right after it with kLatePv); it has waited for that wgmma before
// signalling P_{j+3}, so 4 P halves are safe and 2 would race.
//  kKStages / kVStages: K tiles (40 KB) and V^T stages (32 KB) in flight: 227 KB hold 2 + 2. Deeper rings on 36 KB
//    tiles (the rope dims as their own 64-byte-swizzled box: 3 + 2, 2 + 3) and K released right after S measured
//    the same (run W12/W13), as did 3 K + 1 V^T (slower, W3/W7).
//  V^T is built by 4-ldmatrix rounds and stored with stmatrix (transpose_ws.cuh; runs W4, W8-W10).
// Measured and removed (bench/decode/NOTES_fp8.md): the overlap schedule (`ws_overlap_stsm`, 6-10 % slower, W10-W11)
// and the pvfirst schedule (`ws_stsm`, slower still, W5-W6) with 2-load transpose rounds; plain-store transposes
// (W2-W4); P.V with V from registers (`ws_vreg`, W5); lazy rescale or 4-load rounds alone, the TMA thread folded into
// a fourth transpose warp (W8-W10); L2 prefetch from the TMA thread (W7).
// Measured and removed in session 52 (NOTES.md "Session 52", patches in bench/decode/patches): the TMA warp taking the
// last 1 / 2 / 4 chunk pairs of each page's transpose (its Q wait after its share, deadlock-free: rows 17 / 18 +1.3 /
// +3..+4.5 / +13..+15.5 %), a K stage's first slabs freed and refilled on barriers of their own (tie / +0.8..+2.1 %),
// and suspend-time hints on the mbarrier waits (+0.9..+1.3 %).
// The softmax (kernel_ws.cuh) takes exp2 as one ex2.approx.ftz and masks only pages some row of the warp does not
// see whole (run W14).
// Measured and removed in session 6 (NOTES_fp8.md W16-W18): the max-first hand-off (only m_j passed between the
// warpgroups before the exp2, so both softmaxes overlap: same time as the default), S of the next own page queued
// behind P_j V_j (6 % slower), and a probe with 32 KB more shared reads per page (+2 %).
//  kQRegSteps (run W17, the default since): the last kQRegSteps k32 steps of S take Q (the A operand) from
//    registers, 4 per step, loaded once per Q tile: 2 KB less shared-memory traffic per step and page (W17-W18: 6 steps
//    -2.5 % at h128 b128 s8192). Why they gain is not known: W17 read S at N = 64 as needing the whole shared port,
//    but bench_wgmma (session 19) finds S beside a shared-memory hog only 4 % slower, and A from registers makes S
//    alone 7-13 % slower. 8 since session 18 (NOTES_plan.md item 7: -0.4..-0.7 % on every h128 b32 / b128
//    row against 6, 3 passes); 8 is the most the consumers' 224 registers hold without spills (9 spill 68 bytes and
//    lose 2.4-3.8 %; in run W18, before later changes to the consumer, 8 spilled). Back to 6 in session 49 (below).
//    More registers for the consumers do not fit: the launch gives each of the 384 threads 168, so the setmaxnreg
//    split must keep 2 C + P <= 504 (232 + 232 + 48 hung in setmaxnreg.inc in run W18; 232 needs P = 40, which
//    spills the transposers).
//  kTmaOut (session 49): a direct segment's output (out, bf16) through shared memory and TMA stores (kernel_ws.cuh
//    out_stage): 0 plain 4-byte global stores (write_segment_ws, before), 1 only the part's last segment, 2 also a
//    segment that ends at a sequence switch. -DMLA_FP8_WS_TMA_OUT=N builds another default, for A/B runs.
//  kLatePv (session 51): the owner of page j issues P_{j-1} V_{j-1} only after its softmax of page j and the P_j
//    signal, not before the softmax, so the rescale, the V^T wait and the issue leave the chain that runs from one P
//    signal to the next through both warpgroups; both products then queue together on O (one vote decides for both:
//    a rescale to m_{j-1} first if any row's m_{j-1} moved, and the wait-rescale path for P_j). H200 (NOTES.md
//    "Session 51", medians of two calls): h128 b128 s4096 / s8192 -0.8..-1.1 %, b64 s8192 -0.7 %, h64 b128 s4096
//    -0.3 %; on steps whose sequences are all cut (WsSplit) +0.3..+0.5 %, so that schedule keeps the early issue. The
//    V^T stage of page j - 1 is then freed ~one softmax later, so the gain is far below the ~590 cycles that leave the
//    chain per page.
//    -DMLA_FP8_WS_LATE_PV=0 builds the default without it, for A/B runs.
#ifndef MLA_FP8_WS_TMA_OUT
#define MLA_FP8_WS_TMA_OUT 2
#endif
#ifndef MLA_FP8_WS_LATE_PV
#define MLA_FP8_WS_LATE_PV 1
#endif
template <int kKStages_, int kVStages_, int kQRegSteps_ = 0, int kTmaOut_ = MLA_FP8_WS_TMA_OUT, bool kLatePv_ = false>
struct WsSchedule {
  static constexpr int kKStages = kKStages_;
  static constexpr int kVStages = kVStages_;
  static constexpr int kPHalves = 4;
  static constexpr int kQRegSteps = kQRegSteps_;
  static constexpr int kTmaOut = kTmaOut_;
  static constexpr bool kLatePv = kLatePv_;
};
// 6 since session 49: with the TMA-store epilogue (kTmaOut above) ptxas kept the part cursor's
// blk and seqlen on the stack at 7 and 8 steps (8 bytes, reloaded every page: +3 % on the long rows); 6 keep them in
// registers (-DMLA_FP8_WS_QREG_STEPS=N builds another count, for A/B runs).
#ifndef MLA_FP8_WS_QREG_STEPS
#define MLA_FP8_WS_QREG_STEPS 6
#endif
using WsQReg = WsSchedule<2, 2, MLA_FP8_WS_QREG_STEPS, MLA_FP8_WS_TMA_OUT, MLA_FP8_WS_LATE_PV != 0>;  // the default
// Steps whose sequences are all cut into pieces (dispatch.cu auto_picks_ws_split): every segment writes a split
// partial, which takes plain stores in either form, so the TMA epilogue buys nothing there, and its code still cost the
// whole kernel's allocation 1.5-2 % on h_q 128 b32 (session 49 c5 / c8). This is the kernel as it was before: plain
// stores, 8 Q-register steps (no spill without the TMA epilogue's code).
using WsSplit = WsSchedule<2, 2, 8, 0>;
using WsAhead = WsSchedule<2, 2>;    // the default until run W17 (Q from shared memory in every step)

struct WsSmemLayout {
  int q_offset, k_offset, vt_offset, m_offset, l_offset, bar_offset, p_offset, out_offset, total;
};
// The P area and the spare out area end the layout and are contiguous: at a sequence switch the two consumer
// warpgroups stage their output boxes there (kernel_ws.cuh, out_stage), 8 KB each, 1024-byte aligned. out_offset
// takes what is left of the 227 KB (3 boxes); the part's last epilogue stages in the K stages instead.
constexpr int kWsOutSlots = 3;
constexpr WsSmemLayout ws_smem_layout(int k_stages, int v_stages, int p_halves) {
  WsSmemLayout s{};
  s.q_offset = 0;
  s.k_offset = s.q_offset + kSlabTileBytes;
  s.vt_offset = s.k_offset + k_stages * kSlabTileBytes;
  s.m_offset = s.vt_offset + v_stages * kVtBytes;          // [j % p_halves][64]: running max after page j
  s.l_offset = s.m_offset + p_halves * kRowsPerCta * 4;    // [parity][warpgroup][64]: epilogue row sums
  s.bar_offset = s.l_offset + 2 * 2 * kRowsPerCta * 4;
  s.p_offset = (s.bar_offset + kWsBarrierBytes + 1023) / 1024 * 1024;
  s.out_offset = s.p_offset + p_halves / 2 * kPBufBytes;
  s.total = s.out_offset + kWsOutSlots * kSlabBytes;
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
         L.out_offset % 1024 == 0 && 8 * (2 * S::kKStages + 2 * S::kVStages + 2) <= kWsBarrierBytes &&
         // the switch's two staging slots per warpgroup (P area, out area) and the last epilogue's 8 (K stages)
         S::kPHalves / 2 * kPBufBytes >= 2 * kSlabBytes && kWsOutSlots >= 2 &&
         S::kKStages * kSlabTileBytes >= 8 * kSlabBytes;
}
static_assert(ws_layout_ok<WsQReg>() && ws_layout_ok<WsSplit>() && ws_layout_ok<WsAhead>(),
              "every variant fits the sm90 shared-memory limit, wgmma operands on 1024-byte swizzle atoms");
static_assert(kSlabTileBytes % 1024 == 0 && kVtBytes % 1024 == 0 && kPBufBytes % 1024 == 0, "1024-byte atoms");
static_assert(kDimV == 4 * 128 && kBlockN == 64, "V^T rows hold two dims of 64 keys each");

}  // namespace mla::sm90::decode_fp8

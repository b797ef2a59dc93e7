#pragma once
// Constants of the 16- and 32-row fp8 decode kernel on 8-bit wgmma (kernel_h16.cuh): tiles of exactly 16 query rows
// (h_q 16, s_q 1: DeepSeek-V2-Lite's decode) or 32 (Tile<2>: h_q 32 s_q 1, h_q 16 s_q 2). Why a separate kernel: sm_90 has no native mma.sync for e4m3
// (ptxas lowers mma.sync.m16n8k32.e4m3 to e4m3 -> f16 conversions of both operands plus two HMMA.16816), so the
// mma.sync 16-row kernel spends its time converting; wgmma runs e4m3 natively. wgmma's M is 64, so both products
// put the 64-wide dimension (keys, V dims) in M and the 16 query rows in N:
//   S^T (64 keys x 16 rows) = K (64 x 576, shared) . Q^T (Q tile, shared)         wgmma m64n16k32, 18 per page
//   O^T (512 dims x 16 rows) += V^T (registers, ldmatrix.trans) . P^T (shared)    wgmma m64n16k32, 16 per page
// (32 rows: m64n32k32, 18 for S and 8 per accumulator warpgroup for its 256 dims.)
#include "ops/cuda/sm90/decode/smem_n16.h"
#include "ops/cuda/sm90/decode_fp8/config.h"

namespace mla::sm90::decode_fp8::h16 {

// Roles: warpgroup 0 = scorer (S^T, softmax, P; its thread 0 loads the Q tiles), warpgroup 1 = accumulator (V^T
// fragments, O^T; its thread 0 issues the pages). No separate producer warp: with 9 warps one SM sub-partition
// holds 3 of them and ptxas caps each thread at 168 registers (3 x 32 x 168 <= 16384), which spilled; with 8 warps
// the kernel takes 194 registers without spills (NOTES_fp8.md runs H4-H5).
constexpr int kScorerWarps = 4, kAccWarps = 4;  // per warpgroup

// The tile height: RG 16-row groups, RG = 1 (16 rows: h_q 16 s_q 1) or 2 (32 rows: h_q 32 s_q 1, h_q 16 s_q 2, the
// n32 form, session 23). N of both products is 16 RG; one scorer warpgroup computes S^T for all rows (m64n32k32 at
// RG 2, its softmax helpers run per 16-row group), and RG accumulator warpgroups each hold 512 / RG V dims of O^T for
// all rows (8 / RG M tiles of 64 dims x 16 RG rows: 64 registers of O at either height), so an accumulator's
// registers stay those of the 16-row form.
template <int RG>
struct Tile {
  static_assert(RG == 1 || RG == 2, "16- or 32-row tiles");
  static constexpr int kRows = 16 * RG;       // query rows per tile: the N of both products
  static constexpr int kAccWGs = RG;          // accumulator warpgroups
  static constexpr int kMTiles = 8 / RG;      // 64-dim M tiles of O^T per accumulator warpgroup
  static constexpr int kThreads = 128 * (1 + kAccWGs);
  static constexpr int kConsumerWarps = kScorerWarps + kAccWarps * kAccWGs;  // arrivals that release a stage
  static constexpr int kQSlabBytes = kRows * 128;           // 16 RG rows x 128 bytes, 128B swizzle (2048 at RG 1)
  static constexpr int kQTileBytes = kSlabs * kQSlabBytes;  // 10240 at RG 1
  // P (e4m3, 16 RG rows x 64 keys) as the K-major B operand of P.V: 128B-swizzled 128-byte rows (64 bytes used), so
  // the descriptor is the one S uses for Q. Two buffers: the scorer writes P_{j+1} while the accumulators read P_j.
  static constexpr int kPBufBytes = kRows * 128;
  static constexpr int kBarPair = kThreads;  // the P hand-off barriers: every thread of the CTA
};
using Tile16 = Tile<1>;
// Pages in the ring: two are being computed (scorer on j + 1, accumulator on j), the rest (two) in flight. Each stage
// is five 64 x 128-byte swizzled slabs (config.h slab layout, 40 KB; the fifth slab's upper half holds the next token's
// first 64 bytes or TMA zeros, never read: page_tma.cuh). Four, not five: with every CTA streaming at once, a deeper
// ring does not add bandwidth but lets the CTAs that run ahead keep more of the HBM queue, so the last CTA ends later
// (bench_stream --math-ns 500: 3 / 4 / 5 slots 151.4 / 155.2 / 157.0 us for h16 b128 s8192's bytes, CTA ends max -
// median 5.9 / 7.4 / 12.5 us). Measured here (session 13, one call, 3
// passes): 4 stages -1.1..-2.4 us on the b32 s4096 / s8192 and b128 rows (b128 s8192 160.3 -> 158.1), b1 -0.1..-0.3,
// b32 s512 +0.1; 3 stages gain more on b32 (-2.2 / -3.0) but only -0.7 at b128 s8192 (NOTES_plan.md "Session 13").
constexpr int kStages = 4;
// Parts of at most kShallowLeadMaxPages pages keep only kShallowLead pages ahead in the same 4 slots (kernel_h16.cuh
// producer_lead: the producer issues 3 pages up front instead of 4, then one per page as before). Session 13's 3-slot
// ring beat the 4-slot one on every row of <= 64 pages per CTA and lost at 128; as a lead (session 14, two calls of 3
// passes against HEAD's binary): b32 s4096 / s8192 -0.90..-0.93 / -1.23..-1.60 us, b128 s4096 -0.47..-0.90, b128 s512
// -0.10..-0.13, b128 s8192 (128 pages, lead 4) -0.17..-0.43, b1 / b32 s512 +-0.07. The ring depth as a loop
// variable instead (stage and phase j % 3 or j % 4) took the same gains but cost b128 s8192 +3.9 us.
constexpr int kShallowLead = 3, kShallowLeadMaxPages = 64;
// Q tiles: one per sequence the part visits, loaded by the scorer's thread 0 one sequence ahead (sequence n + 2
// into n's slot once every scorer warp is past n's last S), completing on the slot's q_full barrier. Loading them
// apart from the pages keeps the page producer (in the accumulator) from waiting on the scorer's progress.
constexpr int kQSlots = 2;

// Named barriers (0 is __syncthreads). P_full[b] / P_empty[b]: scorer <-> accumulator hand-off of P buffer b
// (arrive by one side, sync by the other, Tile::kBarPair threads); kBarScorer: the scorer's row-max exchange (128).
constexpr int kBarScorer = 1;
constexpr int kBarPFull = 2;   // + buffer
constexpr int kBarPEmpty = 4;  // + buffer

using SmemLayoutH16 = decode::SmemLayoutN16;
// The exchange buffers (decode/smem_n16.h) once per 16-row group.
template <int RG>
constexpr SmemLayoutH16 smem_layout_h16() {
  using T = Tile<RG>;
  return decode::smem_layout_n16(kSlabTileBytes, kStages, T::kQTileBytes, kQSlots, T::kPBufBytes, RG);
}
static_assert(smem_layout_h16<1>().total <= 227 * 1024 && smem_layout_h16<2>().total <= 227 * 1024,
              "16- and 32-row wgmma kernels fit the sm90 shared-memory limit");
static_assert(smem_layout_h16<1>().q_offset % 1024 == 0 && smem_layout_h16<1>().p_offset % 1024 == 0 &&
                  smem_layout_h16<2>().q_offset % 1024 == 0 && smem_layout_h16<2>().p_offset % 1024 == 0 &&
                  Tile<1>::kQSlabBytes % 1024 == 0 && Tile<2>::kQSlabBytes % 1024 == 0,
              "wgmma operands start on 1024-byte swizzle-atom boundaries");

}  // namespace mla::sm90::decode_fp8::h16

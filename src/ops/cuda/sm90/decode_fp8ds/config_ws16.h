#pragma once
// Constants and shared-memory layout of the warp-specialized exact-code fp8_ds kernel for 16-row tiles
// (kernel_ws16.cuh). Why this kernel: the mma.sync one it replaced (kernel_rg1.cuh, removed in fd0fcb3) ran every warp through
// S -> barrier -> softmax -> barrier -> P.V with 2 warps per scheduler and 248 registers, and is latency-bound
// (ncu: issue slots 44 %, 6462 warp-instructions per page). Here, as in the fp8 16-row kernel, wgmma puts the
// 64-wide dimension in M and the 16 query rows in N, and the two products run in different warpgroups on
// consecutive pages:
//   S^T_c (64 keys x 16 rows) = code_c (registers, f16) . Q'_c^T (shared)     wgmma m64n16k16 f16, 4 tiles x 8
//   O^T (512 dims x 16 rows) += code^T (registers, f16) . P'_c^T (shared)      wgmma m64n16k16 f16, 32 per page
// The codes reach the A operands straight from the raw page (exact e4m3 -> f16 cvt), never staged.
#include "mla/core/kv_format.h"
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/config.h"

namespace mla::sm90::decode_fp8ds::ws16 {

constexpr int kRows = 16;                       // query rows: the N of both products
constexpr int kBlockN = kDecodePageSize;        // 64 keys per page: the M of S^T
constexpr int kTokenBytes = Fp8DsLayout::kBytes;  // 656
constexpr int kPageBytes = kBlockN * kTokenBytes;  // 41984 = 41 KB: one bulk copy, 1024-byte multiple
constexpr int kScalesOffset = Fp8DsLayout::kScalesOffset;
constexpr int kRopeOffset = Fp8DsLayout::kRopeOffset;
constexpr int kTiles = Fp8DsLayout::kNumTiles;  // 4 scale tiles of 128 latent values
// Roles: warpgroup 0 = scorer (S^T, softmax, P'), warpgroup 1 = accumulator (V codes -> A fragments, O^T); its
// thread 0 also issues the page copies. 256 threads, 189 registers, no spill: a 9th (producer) warp put 3 warps on
// one scheduler and ptxas capped them at 168 registers with 20-24 B of spill (run F4: -1.5 % without it).
constexpr int kScorerWarps = 4, kAccWarps = 4;
constexpr int kThreads = 32 * (kScorerWarps + kAccWarps);
// Raw pages in the ring: the scorer works on page j + 1 while the accumulator converts page j, so one of the 3 is in
// flight. Three, not four: with every CTA streaming at once, deeper rings let the CTAs that run ahead hold more of
// the HBM queue and the last CTA ends later (as the fp8 16-row kernel's ring, decode_fp8/config_h16.h). Session 13,
// two calls of 3 passes each against 4 stages: h16 b32 s512 / s4096 / s8192 -0.2..-0.3 / -0.2..-0.3 / -0.4..-0.6 us,
// b128 s512 / s4096 / s8192 -0.4..-0.5 / -0.8..-0.9 / -0.5..-1.3; b1 s512 within 0.1, s4096 0..+0.2, s8192 +0.5..+0.6
// (14.4 -> 15.0: a lone sequence's 1-page pieces want the depth; still under bf16's 15.7).
constexpr int kStages = 3;
// Q' (the scorer's B operand): 16 rows x 128-byte rows, 128B swizzle, one 2 KB slab per 64 dims: slabs 0-7 the
// latent as f16 of q * 2^k_row, slab 8 the RoPE as bf16; dims permuted inside each slab (kernel_ws16.cuh).
// (With S on e4m3 tensor cores and q split into two e4m3 parts the same 18 KB would hold them; run F5: 1 % faster,
// but the FP8 MMA's accumulation missed the tight lse check by 3x, so S stays on f16.)
constexpr int kSlabBytes = kRows * 128;     // 2048
constexpr int kQBytes = 9 * kSlabBytes;     // 18432
// P'_c (the accumulator's B operand): per tile c one slab of 16 rows x 64 keys f16; two buffers (pages j, j + 1).
constexpr int kPBufBytes = kTiles * kSlabBytes;  // 8192

// Named barriers (0 is __syncthreads): the scorer's row-max exchange (128 threads), and P_full[b] / P_empty[b],
// the scorer <-> accumulator hand-off of P' buffer b (arrive by one side, sync by the other, 256 threads).
constexpr int kBarScorer = 1;
constexpr int kBarPFull = 2;   // + buffer
constexpr int kBarPEmpty = 4;  // + buffer
constexpr int kBarPair = 32 * (kScorerWarps + kAccWarps);

struct Layout {
  int raw, q, p, red, smax, alpha, unit, lsum, mfin, qdiv, bar, total;
};
constexpr Layout layout() {
  Layout l{};
  l.raw = 0;                                 // [kStages][64][656] raw pages
  l.q = l.raw + kStages * kPageBytes;        // Q' slabs
  l.p = l.q + kQBytes;                       // [2][4 tiles] P' slabs
  l.red = l.p + 2 * kPBufBytes;              // float [2][16 rows][4 warps]: row-max partials
  l.smax = l.red + 2 * kRows * 4 * 4;        // float4 [2][4 warps]: per-warp max tile scales
  l.alpha = l.smax + 2 * 4 * 16;             // float [2][16]: O rescale of page j
  l.unit = l.alpha + 2 * kRows * 4;          // float [2][4]: u_c of page j
  l.lsum = l.unit + 2 * kTiles * 4;          // float [2][16][4]: row-sum partials at a segment end
  l.mfin = l.lsum + 2 * kRows * 4 * 4;       // float [2][16]: the row max at a segment end
  l.qdiv = l.mfin + 2 * kRows * 4;           // float [16]: 2^-k_row
  l.bar = l.qdiv + kRows * 4;                // mbarriers full[kStages], empty[kStages]
  l.total = l.bar + 8 * 2 * kStages;
  return l;
}
static_assert(layout().total <= 227 * 1024, "fits the sm90 shared-memory limit");
static_assert(layout().q % 1024 == 0 && layout().p % 1024 == 0 && kPageBytes % 1024 == 0,
              "wgmma B operands start on 1024-byte swizzle-atom boundaries");
static_assert(layout().smax % 16 == 0 && layout().lsum % 16 == 0 && layout().bar % 8 == 0, "alignment");
static_assert(kTiles == 4 && Fp8DsLayout::kTileSize == 128, "tile c = latent slabs 2c, 2c + 1");

}  // namespace mla::sm90::decode_fp8ds::ws16

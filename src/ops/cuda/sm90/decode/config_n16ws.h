#pragma once
// Constants of the warp-specialized 16-bit decode kernel for 16-row tiles (kernel_n16ws.cuh): h_q 16, s_q 1, the
// shape of DeepSeek-V2-Lite's decode (and of any MLA model at 16 heads per GPU), bf16 or fp16 KV.
//
// Why a second 16-row kernel: the 256-thread mma.sync kernel (kernel.cuh) runs a page's S, softmax and P.V in series
// on all 8 warps and holds the page's stage until its P.V is done, so with two 72 KB stages (a third does not fit
// beside Q) the math sits between a stage's landing and its refill. Its no-math knock-out took 4 % off h16 b128 s8192
// (bench/decode/NOTES.md sessions 8 and 10). Here the stage is released as soon as S (scorer) and the V fragments'
// ldmatrix (accumulators) are done, and the scorer's page j + 1 overlaps the accumulators' page j:
//   S^T (64 keys x 16 rows) = K (64 x 576, shared) . Q^T (Q tile, shared)            wgmma m64n16k16, 36 per page
//   O^T (512 dims x 16 rows) += V^T (registers, ldmatrix.trans) . P^T (shared)       wgmma m64n16k16, 16 per page and
//                                                                                    accumulator warpgroup
// Both products put the 64-wide dimension (keys, V dims) in the wgmma M and the 16 query rows in N, as the fp8 16-row
// kernel does (decode_fp8/config_h16.h); 16-bit ldmatrix.trans gives V^T's A fragments directly.
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/smem_n16.h"

namespace mla::sm90::decode::n16ws {

constexpr int kRows = 16;  // query rows per tile: the N of both products
// Roles: warpgroup 0 = scorer (S^T, softmax, P; its thread 0 loads the Q tiles); warpgroups 1 and 2 = accumulators,
// V dims [0, 256) and [256, 512) (a whole page's V^T fragments are 64 KB: 128 registers per thread for one
// warpgroup, 64 for each of two); accumulator 1's thread 0 issues the pages. 12 warps: ptxas caps a thread at 168
// registers (65536 / 384); the accumulators need ~64 (V fragments) + 32 (O^T) + addressing.
constexpr int kScorerWarps = 4, kAccWarpgroups = 2, kAccWarps = 4 * kAccWarpgroups;
constexpr int kThreads = 32 * (kScorerWarps + kAccWarps);
constexpr int kDimsPerAcc = kDimV / kAccWarpgroups;  // 256
constexpr int kMTiles = kDimsPerAcc / 64;             // 4 m64 tiles of V dims per accumulator warpgroup
constexpr int kKSteps = kBlockN / 16;                 // 4 k16 steps of keys per page
// Pages in the ring: two 72 KB stages, each a page as nine 64 x 128-byte swizzled slabs in one 3D TMA box (the
// kv_slabs16 map of tensor_maps.cu); a part's first kStages pages come as kSlabGroups boxes of kN16WsGroupSlabs slabs,
// each on its own full barrier, so the scorer's S starts on a page's first group while the rest lands (kernel_n16ws.cuh
// PageProducer). A third stage does not fit beside the two Q slots.
constexpr int kStages = 2;
constexpr int kSlabs = kDimQK / 64;  // 9
constexpr int kSlabBytes = kBlockN * 128;
static_assert(kSlabs * kSlabBytes == kPageBytes, "a stage is a page");
constexpr int kSlabGroups = kSlabs / kN16WsGroupSlabs;  // 3
constexpr int kGroupBytes = kN16WsGroupSlabs * kSlabBytes;
static_assert(kSlabGroups * kN16WsGroupSlabs == kSlabs, "whole slab groups");
// Q tiles: one per sequence the part visits, loaded by the scorer's thread 0 one sequence ahead (as the fp8 16-row
// kernel's QLoader), nine 16 x 128-byte slabs (the q16 map of tensor_maps.cu).
constexpr int kQSlots = 2;
constexpr int kQSlabBytes = kRows * 128;           // 2048
constexpr int kQTileBytes = kSlabs * kQSlabBytes;  // 18432
// P^T (16 rows x 64 keys, 16-bit) as the K-major B operand of P.V: one 128B-swizzled slab of 16 rows. Two buffers:
// the scorer writes P_{j+1} while the accumulators read P_j.
constexpr int kPBufBytes = kRows * 128;  // 2048

// Named barriers (0 is __syncthreads). P_full[b] / P_empty[b]: scorer <-> accumulators hand-off of P buffer b
// (arrive by one side, sync by the other, all 384 threads); kBarScorer: the scorer's row-max exchange (128).
constexpr int kBarScorer = 1;
constexpr int kBarPFull = 2;   // + buffer
constexpr int kBarPEmpty = 4;  // + buffer
constexpr int kBarAll = kThreads;

constexpr SmemLayoutN16 smem_layout_n16ws() {
  return smem_layout_n16(kPageBytes, kStages, kQTileBytes, kQSlots, kPBufBytes, 1, kSlabGroups);
}
static_assert(smem_layout_n16ws().total <= 227 * 1024, "fits the sm90 shared-memory limit");
static_assert(smem_layout_n16ws().q_offset % 1024 == 0 && smem_layout_n16ws().p_offset % 1024 == 0 &&
                  kQSlabBytes % 1024 == 0 && kPBufBytes % 1024 == 0,
              "wgmma operands start on 1024-byte swizzle-atom boundaries");

}  // namespace mla::sm90::decode::n16ws

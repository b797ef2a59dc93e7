#pragma once
// Constants of the sm90 paged MLA decode kernel for the fp8 (e4m3) KV format. Same CTA shape and plan as
// the 16-bit kernel (64 query rows x one 64-token page per step, 8 warps, one CTA per SM); what differs
// is the byte size of a token (576 instead of 1152), the shared-memory row padding and the stage count.
#include "mla/core/mla_shapes.h"
#include "mla/ops/plan_decode.h"

namespace mla::sm90::decode_fp8 {

constexpr int kThreads = 256;                   // 8 warps
constexpr int kWarps = kThreads / 32;
constexpr int kBlockN = kDecodePageSize;        // keys per mainloop step = one KV page
constexpr int kRowsPerCta = kDecodeRowsPerCta;  // 64 query rows (s_q * h_q flattened) per CTA: the plan's tiles
constexpr int kRowGroup = 16;                   // rows of one mma.m16n8k32 A tile
constexpr int kTokenBytes = kDimQK;             // 576: one token (or query row) of e4m3 codes in global memory
constexpr int kChunksPerRow = kTokenBytes / 16;  // 36 sixteen-byte chunks
constexpr int kPageBytes = kBlockN * kTokenBytes;  // 36864: one KV page, contiguous in global memory
// Rows in shared memory are padded by one chunk: 592 bytes = 148 words, so 8 consecutive rows at the
// same chunk start at byte offsets {0, 80, 32, 112, 64, 16, 96, 48} mod 128, eight distinct 16-byte bank
// groups. That makes every ldmatrix (8 rows x 16 bytes per matrix, K, Q, V and P alike) conflict-free
// without an XOR swizzle (36 chunks are not a multiple of the 8-chunk swizzle group anyway).
constexpr int kSmemRowBytes = kTokenBytes + 16;        // 592
constexpr int kSmemPageBytes = kBlockN * kSmemRowBytes;  // 37888
// P (e4m3, 64 keys per row) rows padded the same way: 80 bytes = 20 words -> offsets {0, 80, 32, ...}.
constexpr int kPRowBytes = kBlockN + 16;  // 80
static_assert(kSmemRowBytes % 16 == 0 && kPRowBytes % 16 == 0, "16-byte aligned rows for cp.async / ldmatrix");

// KV stages in flight per CTA: 4 pages of 36 KB keep as many bytes in flight as the 16-bit kernel's 2
// pages of 72 KB. The 64-row variant keeps 3 (its 64-row Q tile takes the fourth stage's room).
constexpr int stages_for(int row_groups) { return row_groups == 4 ? 3 : 4; }
// Q: one tile, loaded at the segment boundary. (16-row tiles, h_q 16 s_q 1, run kernel_h16.cuh / config_h16.h.)

// Slab layout of the wgmma kernels (kernel_ws.cuh, kernel_h16.cuh): the canonical 128-byte-swizzle K-major layout of
// ../decode/wgmma.h, whose descriptors the bf16 kernel verified: slabs of 128 bytes (= 128 e4m3 values)
// per row, 64 rows per slab, chunk c of row r at slab c / 8, chunk (c % 8) ^ (r % 8). 576 bytes are 4.5
// slabs; the fifth is allocated whole and its first half used.
constexpr int kSlabs = 5;
constexpr int kSlabBytes = kBlockN * 128;                // 8192
constexpr int kSlabTileBytes = kSlabs * kSlabBytes;      // 40960: one page or one 64-row Q tile
constexpr int kRopeSlab = kSlabs - 1;                    // the slab of dims 512..575
__host__ __device__ constexpr int slab_offset(int row, int chunk) {
  return (chunk >> 3) * kSlabBytes + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}
static_assert(kBlockN == kRowsPerCta, "pages and Q tiles share the slab geometry");

// Shared-memory layout (bytes) for `row_groups` active 16-row groups and `slices` key/column slices.
struct SmemLayout {
  int k_offset, q_offset, p_offset, max_offset, sum_offset, total;
};
constexpr SmemLayout smem_layout(int row_groups, int slices) {
  SmemLayout s{};
  s.k_offset = 0;
  s.q_offset = s.k_offset + stages_for(row_groups) * kSmemPageBytes;
  s.p_offset = s.q_offset + row_groups * kRowGroup * kSmemRowBytes;
  s.max_offset = s.p_offset + row_groups * kRowGroup * kPRowBytes;
  s.sum_offset = s.max_offset + slices * kRowsPerCta * 4;
  s.total = s.sum_offset + slices * kRowsPerCta * 4;
  return s;
}
static_assert(smem_layout(4, 2).total <= 227 * 1024, "64-row variant fits the sm90 shared-memory limit");
static_assert(kSlabTileBytes % 1024 == 0, "wgmma tiles start on 1024-byte swizzle-atom boundaries");
static_assert(smem_layout(2, 4).total <= 227 * 1024, "32-row variant fits the sm90 shared-memory limit");

}  // namespace mla::sm90::decode_fp8

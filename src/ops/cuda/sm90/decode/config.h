#pragma once
// Constants of the sm90 paged MLA decode kernel. MLA shapes are fixed (mla_shapes.h); everything a
// variant may change is a template parameter of the kernel (element traits, row groups), not a switch.
#include "mla/core/kv_format.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/plan_decode.h"

namespace mla::sm90::decode {

constexpr int kThreads = 256;                 // 8 warps; one CTA per SM (shared memory bound)
constexpr int kWarps = kThreads / 32;
constexpr int kBlockN = kDecodePageSize;      // keys per mainloop step = one KV page
constexpr int kRowsPerCta = kDecodeRowsPerCta;  // 64 query rows (s_q * h_q flattened) per CTA
constexpr int kRowGroup = 16;                 // rows of one mma.m16n8k16 A tile
constexpr int kStages = 2;                    // KV pages in flight per CTA
constexpr int kElemBytes = 2;                 // bf16 / fp16 storage
constexpr int kRowBytes = kDimQK * kElemBytes;        // 1152: one token (or one query row) in shared memory
constexpr int kChunksPerRow = kRowBytes / 16;         // 72 sixteen-byte chunks, swizzled in groups of 8
constexpr int kPageBytes = kBlockN * kRowBytes;       // 73728: one KV page, contiguous in global memory
constexpr int kPRowBytes = kBlockN * kElemBytes;      // 128: one row of P
static_assert(kChunksPerRow % 8 == 0, "the XOR swizzle permutes chunks within aligned groups of 8");

// fp8_ds pages (kv_format.h Fp8DsLayout): 64 tokens of 656 bytes, contiguous in global memory. The kernels
// bring them raw and dequantize them into the 16-bit layouts below (pages.cuh, producer_ws_fp8ds.cuh).
constexpr int kFp8DsTokenBytes = Fp8DsLayout::kBytes;          // 656
constexpr int kFp8DsPageBytes = kBlockN * kFp8DsTokenBytes;    // 41984
static_assert(kFp8DsTokenBytes % 16 == 0, "16-byte copies of whole tokens");

// A part of at most this many KV bytes (32 fp8 pages) loads them with an L2 evict-first policy (ptx.h) in the fp8
// 16-row kernel (TMA boxes). When L2 holds dirty lines (another kernel's writes: the bench's memset flush, a layer's
// outputs in serving), evict-first KV lines are the ones replaced, so a short stream need not write those lines back
// first; on longer streams the hint costs 2-4 %, hence the bound: ~150 MB over 132 parts, where bench_stream's gain
// and loss cross. What is known of the loss (session 46): the dirty lines then stay resident and the stream slows the
// longer it runs (memset - read flush +8.9 / +14.5 / +17.8 us at 151 / 302 / 604 MB, plain copies +10..+12 at each).
// On a clean L2 the hint changes nothing. Measured in session 15 (NOTES_plan.md): h16 b32 s4096 / s8192 -3.2 / -1.6
// us, b128 s512 -2.1; longer parts take the plain copies (a hinted copy with an evict-normal policy is not the plain
// copy: b128 s8192 +35 us). fp8_ds pages (1D bulk copies) gain or break even at every length and are always
// evict-first (decode_fp8ds/kernel_ws16.cuh). The 16-bit 16-row tiles take it since their pages came by TMA (pages.cuh
// TmaPages, session 16): in the cp.async loader every form of the choice had cost the long rows 1.3-2.2 us.
constexpr int64_t kKvEvictFirstPartBytes = 1152 * 1024;

// Shared-memory layout (bytes), for a kernel with `row_groups` active 16-row groups, `stages` 16-bit page
// stages and (fp8_ds) `raw_slots` raw pages of `raw_bytes` with one mbarrier each.
struct SmemLayout {
  int k_offset, q_offset, p_offset, max_offset, sum_offset, raw_offset, bar_offset, total;
};
constexpr SmemLayout smem_layout(int row_groups, int slices, int stages = kStages, int raw_slots = 0,
                                 int raw_bytes = 0) {
  SmemLayout s{};
  s.k_offset = 0;
  s.q_offset = s.k_offset + stages * kPageBytes;
  s.p_offset = s.q_offset + row_groups * kRowGroup * kRowBytes;
  s.max_offset = s.p_offset + row_groups * kRowGroup * kPRowBytes;
  s.sum_offset = s.max_offset + slices * kRowsPerCta * 4;
  s.raw_offset = s.sum_offset + slices * kRowsPerCta * 4;
  s.bar_offset = s.raw_offset + raw_slots * raw_bytes;
  s.total = s.bar_offset + raw_slots * 8;
  return s;
}
static_assert(smem_layout(4, 2).total <= 227 * 1024, "largest variant fits the sm90 shared-memory limit");

// Warp-specialized 64-row variant (kernel_ws.cuh): warpgroups 0 and 1 consume (math), warpgroup 2
// produces (one thread issues TMA). Shared memory: the Q tile, two KV stages, the per-page row maxima
// [stage][64], the row sums of the epilogue [parity][warpgroup][64], the mbarriers. P has no buffer of
// its own: it lives in the RoPE slab of its page's stage (see mainloop_ws.cuh).
// The 16-bit 16-row ws kernel (kernel_n16ws.cuh) copies a page as boxes of this many slabs, one full barrier each.
constexpr int kN16WsGroupSlabs = 3;

constexpr int kWsThreads = 384;
constexpr int kWsConsumerThreads = 256;
constexpr int kWsStages = 2;
constexpr int kWsBarrierBytes = 256;  // full barriers (per stage, or per stage and slab), empty, Q full/empty
// fp8_ds (kDequant): + one "raw bytes landed" barrier per stage and latent slab, and a 4 KB area per stage
// for the TMA box holding the tokens' tile scales (64 tokens x 64 bytes from byte 512: scales + 48 unused).
constexpr int kWsDequantBarrierBytes = 384;
constexpr int kWsScaleBoxBytes = kBlockN * 64;
struct WsSmemLayout {
  int q_offset, kv_offset, m_offset, l_offset, scale_offset, bar_offset, total;
};
constexpr WsSmemLayout ws_smem_layout(bool dequant = false) {
  WsSmemLayout s{};
  s.q_offset = 0;
  s.kv_offset = kRowsPerCta * kRowBytes;
  s.m_offset = s.kv_offset + kWsStages * kPageBytes;
  s.l_offset = s.m_offset + kWsStages * kRowsPerCta * 4;
  s.scale_offset = s.l_offset + 2 * 2 * kRowsPerCta * 4;
  s.bar_offset = s.scale_offset + (dequant ? kWsStages * kWsScaleBoxBytes : 0);
  s.total = s.bar_offset + (dequant ? kWsDequantBarrierBytes : kWsBarrierBytes);
  return s;
}
static_assert(ws_smem_layout().total <= 227 * 1024 && ws_smem_layout(true).total <= 227 * 1024,
              "warp-specialized variant fits the sm90 shared-memory limit");
static_assert(ws_smem_layout(true).scale_offset % 128 == 0, "TMA destinations are 128-byte aligned");

// Swizzled byte offset of 16-byte chunk `chunk` of row `row` in a tile of rows `row_bytes` apart:
// ldmatrix reads 8 consecutive rows at one logical chunk, and the XOR spreads them over all 32 banks.
__host__ __device__ constexpr int swizzle(int row, int chunk, int row_bytes) {
  return row * row_bytes + ((chunk ^ (row & 7)) << 4);
}

// Slab-major variant for the wgmma kernel (the canonical 128B-swizzle layout, see wgmma.h): chunk c of
// row r lives in slab c / 8 (64 columns, tile_rows * 128 bytes), row r at r * 128, chunk (c % 8) ^ (r % 8).
__host__ __device__ constexpr int swizzle_slab(int row, int chunk, int tile_rows) {
  return (chunk >> 3) * tile_rows * 128 + row * 128 + (((chunk & 7) ^ (row & 7)) << 4);
}
// The TMA unit's 128-byte swizzle of a box landing at a 1024-byte-aligned shared address: the 16-byte chunk bits [4:6]
// XOR the address bits [7:9]. A slab-major page box (the 16-bit 16-row tiles' 3D copies, pages.cuh TmaPages) lands in
// exactly the layout swizzle_slab reads.
constexpr int tma_swizzle_128b(int offset) { return offset ^ (((offset >> 7) & 7) << 4); }
constexpr bool slab_layout_is_the_tma_swizzle() {
  for (int row = 0; row < kBlockN; ++row)
    for (int chunk = 0; chunk < kChunksPerRow; ++chunk)
      if (swizzle_slab(row, chunk, kBlockN) != tma_swizzle_128b((chunk >> 3) * kBlockN * 128 + row * 128 + (chunk & 7) * 16))
        return false;
  return true;
}
static_assert(slab_layout_is_the_tma_swizzle(), "a 3D TMA page box lands in the swizzle_slab layout");
static_assert(kPageBytes % 1024 == 0 && kRowsPerCta * kRowBytes % 1024 == 0 && smem_layout(4, 2).p_offset % 1024 == 0,
              "wgmma operands (K stages, Q tile, P) start on 1024-byte swizzle-atom boundaries");

}  // namespace mla::sm90::decode

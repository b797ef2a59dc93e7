#pragma once
// Constants and shared-memory layout of the exact-code fp8_ds decode kernel for 16-row tiles
// (kernel_rg1.cuh). MLA shapes are fixed (mla_shapes.h); the fp8_ds token layout is kv_format.h's.
#include "mla/core/kv_format.h"
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/config.h"

namespace mla::sm90::decode_fp8ds {

constexpr int kThreads = 256;  // 8 warps, one CTA per SM (shared memory bound)
constexpr int kWarps = kThreads / 32;
constexpr int kRows = 16;      // query rows of the tile: one mma.m16n8k16 row group
constexpr int kBlockN = kDecodePageSize;  // 64 keys per step = one page
constexpr int kTokenBytes = Fp8DsLayout::kBytes;        // 656
constexpr int kPageBytes = kBlockN * kTokenBytes;       // 41984, one bulk copy
constexpr int kScalesOffset = Fp8DsLayout::kScalesOffset;  // 512
constexpr int kRopeOffset = Fp8DsLayout::kRopeOffset;      // 528
constexpr int kTiles = Fp8DsLayout::kNumTiles;             // 4 scale tiles of 128 latent values
// Raw pages in flight: 4 x 41 KB. Nothing else of a page is staged (codes are converted at fragment-load
// time), so the ring gets nearly all of shared memory: 168 KB in flight vs the bf16 kernel's 2 x 72 KB.
constexpr int kSlots = 4;
constexpr int kQRowBytes = decode::kRowBytes;  // 1152: the Q tile keeps the bf16 kernels' swizzled rows
constexpr int kPRowBytes = kBlockN * 2;        // 128: one row of P' (f16, 64 keys)
constexpr int kPTileBytes = kRows * kPRowBytes; // 2048: P' of one scale tile
constexpr int kQFragLatentBytes = 32 * 32 * 16;        // 32 k16 steps x 32 lanes x 4 words (f16 latent)
constexpr int kQFragBytes = kQFragLatentBytes + 4 * 32 * 16;  // + 4 RoPE steps (bf16)
static_assert(kTokenBytes % 16 == 0 && kPageBytes % 16 == 0, "bulk copies and 16-byte loads of whole tokens");
static_assert(kTiles == 4 && Fp8DsLayout::kTileSize == 128, "warp w owns output columns [64w, 64w+64): tile w/2");

struct Layout {
  int raw, q, qfrag, p, max, smax, sum, qdiv, bar, total;
};
constexpr Layout layout() {
  Layout l{};
  l.raw = 0;                                   // [kSlots][64][656] raw pages
  l.q = l.raw + kSlots * kPageBytes;           // [16][1152] bf16 Q tile (swizzled, cp.async)
  l.qfrag = l.q + kRows * kQRowBytes;          // Q as mma fragments: [32 + 4 steps][32 lanes][4 words]
  l.p = l.qfrag + kQFragBytes;                 // [4 tiles][16][64] f16 P' (swizzled 16-byte chunks)
  l.max = l.p + kTiles * kPTileBytes;          // [8 warps][16] partial row maxima
  l.smax = l.max + kWarps * kRows * 4;         // [8 warps][4 tiles] max tile scale of the warp's 8 keys
  l.sum = l.smax + kWarps * kTiles * 4;        // [8 warps][16] row sums (epilogue)
  l.qdiv = l.sum + kWarps * kRows * 4;         // [16] 2^-k of each query row (f16 Q normalizer)
  l.bar = l.qdiv + kRows * 4;                  // [kSlots] mbarriers
  l.total = l.bar + kSlots * 8;
  return l;
}
static_assert(layout().total <= 227 * 1024, "fits the sm90 shared-memory limit");
static_assert(layout().q % 128 == 0 && layout().p % 128 == 0 && layout().bar % 8 == 0, "alignment");

}  // namespace mla::sm90::decode_fp8ds

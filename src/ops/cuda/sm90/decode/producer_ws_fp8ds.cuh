#pragma once
// The producer warpgroup of the warp-specialized kernel (kernel_ws.cuh) for fp8_ds pages. The consumers
// are the bf16 kernel's, unchanged: they wait for the same per-slab full barriers of 128B-swizzled bf16
// slabs. Who fills the slabs differs:
//   - warp 0, one thread (ws_issue_fp8ds): like the 16-bit producer, walks the part and issues TMA once a
//     stage is empty: the 8 raw latent slabs (64 tokens x 64 code bytes, 4 KB each) into the upper half
//     of the stage (slabs 4-7's space), the scale box into the stage's scale area, both on per-slab raw
//     barriers; the RoPE slab, already bf16, straight into slab 8 on its full barrier.
//   - warps 1-3 (ws_convert_fp8ds): per latent slab, wait for its raw bytes, dequantize 64 x 64 codes
//     into bf16 slab s, arrive on full(stage, s), so S starts on slab 0 while later slabs still convert.
// Why not a staging buffer: the Q tile and two bf16 stages leave 9 KB of shared memory. Writing slab s
// over raw slabs is safe in this order: slab 4 covers raw slabs 0-1, slab 5 raw 2-3, slab 6 raw 4-5,
// slab 7 raw 6-7, each already read by every converter thread once it passed the converter barrier ahead
// of the stores of slabs 4, 6 and 7 (raw 2-3 were read before slab 4's barrier).
#include <cstdint>

#include "ops/cuda/sm90/decode/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode/pages.cuh"

namespace mla::sm90::decode {

constexpr int kRawSlabBytes = kBlockN * 64;             // 64 tokens x 64 e4m3 codes
constexpr int kRawOffset = (kRopeSlab / 2) * kSlabBytes;  // raw latent slabs in slabs 4-7's space
constexpr int kConverterThreads = 96;                   // warps 1-3 of the producer warpgroup
constexpr int kBarConvert = 6;                          // named barrier of the converters (kernel_ws ids 1-5)
static_assert(kRopeSlab * kRawSlabBytes == kPageBytes - kRawOffset - kSlabBytes, "raw slabs fill slabs 4-7 exactly");

__device__ __forceinline__ void ws_issue_fp8ds(const DecodeKernelParams& p, PartCursor c, const WsBarriers& bars,
                                               uint32_t s_q_tile, uint32_t s_kv0, uint32_t s_scale0, int tile_row0) {
  int j = 0, seg = -1;
  bool new_seg = true;
  c.fetch_page(p);
  while (c.valid()) {
    if (new_seg) {
      ++seg;
      if (seg > 0) mbar_wait(bars.q_empty(), (seg - 1) & 1);
      issue_q_tma(p, c.b, tile_row0, s_q_tile, bars.q_full());
    }
    const int stage = j & 1;
    if (j >= kWsStages) mbar_wait(bars.empty(stage), ((j >> 1) - 1) & 1);
    const uint32_t dst = s_kv0 + stage * kPageBytes;
    const int row = c.page * kBlockN;
#pragma unroll 1
    for (int s = 0; s < kRopeSlab; ++s) {
      const uint32_t bar = bars.raw(stage, s);
      mbar_expect_tx(bar, kRawSlabBytes + (s == 0 ? kWsScaleBoxBytes : 0));
      if (s == 0) tma_load_2d(s_scale0 + stage * kWsScaleBoxBytes, &p.tmap_kv, bar, Fp8DsLayout::kScalesOffset, row);
      tma_load_2d(dst + kRawOffset + s * kRawSlabBytes, &p.tmap_kv, bar, 64 * s, row);
    }
    mbar_expect_tx(bars.full(stage, kRopeSlab), kSlabBytes);
    tma_load_2d(dst + kRopeSlab * kSlabBytes, &p.tmap_kv_rope, bars.full(stage, kRopeSlab), Fp8DsLayout::kRopeOffset / 2,
                row);
    new_seg = c.last_of_sequence();
    c.advance(p);
    c.fetch_page(p);  // the next page's block-table entry loads while this thread waits
    ++j;
  }
}

// ct = 0..95. Item i < 256 of a slab = (token i / 4, 16 codes i % 4): raw bytes at 16 i, bf16 chunks
// 2 (i % 4) and 2 (i % 4) + 1 of the token's slab row. Tokens at or past the sequence end become zeros
// (their cache slots are garbage; 0 * NaN would poison P.V), which also spares the consumers the tail
// zeroing the 16-bit pages need.
__device__ __forceinline__ void ws_convert_fp8ds(const DecodeKernelParams& p, PartCursor c, const WsBarriers& bars,
                                                 uint8_t* kv0, const uint8_t* scale0, int ct) {
  constexpr int kItems = kBlockN * 4;
  constexpr int kPerThread = (kItems + kConverterThreads - 1) / kConverterThreads;  // 3
  int j = 0;
  while (c.valid()) {
    const int stage = j & 1;
    const uint32_t parity = (j >> 1) & 1;
    uint8_t* st = kv0 + stage * kPageBytes;
    const uint8_t* sc = scale0 + stage * kWsScaleBoxBytes;
    const int valid = c.seqlen - c.blk * kBlockN;
#pragma unroll 1
    for (int s = 0; s < kRopeSlab; ++s) {
      mbar_wait(bars.raw(stage, s), parity);
      uint4 codes[kPerThread];
      float scale[kPerThread];
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int i = ct + kConverterThreads * k;
        codes[k] = make_uint4(0, 0, 0, 0);
        scale[k] = 0.f;
        if (i < kItems && (i >> 2) < valid) {
          codes[k] = *reinterpret_cast<const uint4*>(st + kRawOffset + s * kRawSlabBytes + 16 * i);
          scale[k] = *reinterpret_cast<const float*>(sc + (i >> 2) * 64 + 4 * (s / 2));  // tile = 128 dims = 2 slabs
        }
      }
      if (s >= kRopeSlab / 2 && s != kRopeSlab / 2 + 1) named_sync(kBarConvert, kConverterThreads);
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int i = ct + kConverterThreads * k;
        if (i >= kItems) continue;
        uint4 lo, hi;
        dequant16(codes[k], scale[k], lo, hi);
        const int row = i >> 2, q = i & 3;
        uint8_t* dst = st + s * kSlabBytes + row * 128;
        *reinterpret_cast<uint4*>(dst + (((2 * q) ^ (row & 7)) << 4)) = lo;
        *reinterpret_cast<uint4*>(dst + (((2 * q + 1) ^ (row & 7)) << 4)) = hi;
      }
      fence_proxy_async();  // generic stores, read by wgmma (async proxy) once the barrier completes
      mbar_arrive(bars.full(stage, s));
    }
    c.advance(p);
    ++j;
  }
}

}  // namespace mla::sm90::decode

#pragma once
// The producer warpgroup of the warp-specialized kernel (kernel_ws.cuh) for fp8_ds pages. The consumers
// are the bf16 kernel's, unchanged: they wait for the same per-slab full barriers of 128B-swizzled bf16
// slabs. Who fills the slabs differs:
//   - warp 0, one thread (ws_issue_fp8ds): like the 16-bit producer, walks the part and issues TMA once a
//     stage is empty: the 8 raw latent slabs (64 tokens x 64 code bytes, 4 KB each) into the upper half
//     of the stage (slabs 4-7's space), the scale box into the stage's scale area, both on per-slab raw
//     barriers; the RoPE slab, already bf16, straight into slab 8 on its full barrier.
//   - warps 1-3 (ws_convert_fp8ds): per scale tile (2 latent slabs), wait for its raw bytes, dequantize
//     64 x 128 codes into bf16 slabs 2t and 2t + 1, arrive on their full barriers, so S starts on slabs 0-1
//     while later slabs still convert.
// Why not a staging buffer: the Q tile and two bf16 stages leave 9 KB of shared memory. Writing slab s
// over raw slabs is safe in this order: slab 4 covers raw slabs 0-1, slab 5 raw 2-3, slab 6 raw 4-5,
// slab 7 raw 6-7, each already read by every converter thread once it passed the converter barrier ahead
// of the stores of steps 2 (slabs 4-5) and 3 (slabs 6-7).
// Why not all four warps (run G1: 20-50 % slower): warp 0's TMA issue made it the slowest converter, whom the
// converter barrier makes everyone wait for, and 2 items per thread left too little independent work.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// Four e4m3 codes (low byte first) times `scale` -> two bf16x2 words: e4m3 -> f16 -> f32 are exact, the
// product is the reference's fp32 product (ref::mla_decode's load_token), rounded once to bf16 (as dequant16
// in pages.cuh). The word is split by mov.b32 {l, h} inside the asm, so ptxas reads its high half with an
// operand selector instead of shifting it first (one SHF per word less; fp8_ds run F1's SASS). NaN stays NaN.
__device__ __forceinline__ void dequant4(uint32_t w, float scale, uint32_t& lo, uint32_t& hi) {
  uint32_t h01, h23;
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(h01), "=r"(h23)
      : "r"(w));
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&h01));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&h23));
  const __nv_bfloat162 ba = __floats2bfloat162_rn(a.x * scale, a.y * scale);
  const __nv_bfloat162 bb = __floats2bfloat162_rn(b.x * scale, b.y * scale);
  lo = *reinterpret_cast<const uint32_t*>(&ba);
  hi = *reinterpret_cast<const uint32_t*>(&bb);
}

// Latent slabs converted per step: one scale tile (2 slabs). Why (run G2, b128 s8192 893 -> 756 µs): the
// converters' page time is dependency stalls, not issue slots (run G1 ncu: ~0.15 IPC per converter warp), so a
// step carries 6 independent 16-code items per thread instead of 3, and its waits, converter barriers (steps 2 and
// 3 instead of slabs 4, 6 and 7), fences and arrivals come half as often. It needs 72 producer registers (ptxas:
// 52 B of spills at 56, none at 72; the consumers fit 208: kernel_ws.cuh).
constexpr int kConvSlabsPerStep = 2;
static_assert(kRopeSlab % kConvSlabsPerStep == 0 && kConvSlabsPerStep == 2, "steps are whole scale tiles");

// ct = 0..95. Item i < 256 of a step = (token t = i / 4, 16 codes q = i % 4) in each of the step's slabs: raw
// bytes at 16 i of the raw slab, bf16 chunks 2 q and 2 q + 1 of the token's slab row; the step's slabs share
// the token's tile scale (a tile is 128 dims = 2 slabs) and the addresses, 4 KB / 8 KB apart. Tokens at or past
// the sequence end become zeros (their cache slots are garbage; 0 * NaN would poison P.V), which also spares
// the consumers the tail zeroing the 16-bit pages need.
// Raw slabs are overwritten by bf16 slabs 4-7 (slab 4 + r / 2 covers raw r): the stores of steps 2 (slabs 4-5 over
// raw 0-3, read in steps 0-1) and 3 (slabs 6-7 over raw 4-7, read in steps 2-3) wait on the converter barrier,
// placed after the step's own loads, for every converter's loads of the raw slabs they cover.
__device__ __forceinline__ void ws_convert_fp8ds(const DecodeKernelParams& p, PartCursor c, const WsBarriers& bars,
                                                 uint8_t* kv0, const uint8_t* scale0, int ct) {
  constexpr int kItems = kBlockN * 4;
  constexpr int kPerThread = (kItems + kConverterThreads - 1) / kConverterThreads;  // 3 (2 for ct >= 64)
  constexpr int kSteps = kRopeSlab / kConvSlabsPerStep;                            // 4
  int j = 0;
  while (c.valid()) {
    const int stage = j & 1;
    const uint32_t parity = (j >> 1) & 1;
    uint8_t* st = kv0 + stage * kPageBytes;
    const uint8_t* sc = scale0 + stage * kWsScaleBoxBytes;
    const int valid = c.seqlen - c.blk * kBlockN;
#pragma unroll 1
    for (int step = 0; step < kSteps; ++step) {
      const int s0 = step * kConvSlabsPerStep;
#pragma unroll
      for (int u = 0; u < kConvSlabsPerStep; ++u) mbar_wait(bars.raw(stage, s0 + u), parity);
      uint4 codes[kPerThread][kConvSlabsPerStep];
      float scale[kPerThread];
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int i = ct + kConverterThreads * k;
        const bool live = i < kItems && (i >> 2) < valid;
        const uint8_t* src = st + kRawOffset + s0 * kRawSlabBytes + 16 * i;
        // The stage's last use ended with the consumers' staging writes and release_stage (fp8_ds: lane 0 after
        // __syncwarp), which racecheck does not take as ordering the other lanes (per-thread arrivals clear the
        // report: bench/decode/NOTES.md "Session 66" 2, "Session 67" 1). racecheck: hand-off
#pragma unroll
        for (int u = 0; u < kConvSlabsPerStep; ++u)
          codes[k][u] = live ? *reinterpret_cast<const uint4*>(src + u * kRawSlabBytes) : make_uint4(0, 0, 0, 0);
        scale[k] = live ? *reinterpret_cast<const float*>(sc + (i >> 2) * 64 + 4 * (s0 / 2)) : 0.f;
      }
      if (step >= kSteps / 2) named_sync(kBarConvert, kConverterThreads);
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const int i = ct + kConverterThreads * k;
        if (i >= kItems) continue;
        const int row = i >> 2, q = i & 3;
        uint8_t* dst = st + s0 * kSlabBytes + row * 128;
        const int c0 = ((2 * q) ^ (row & 7)) << 4, c1 = ((2 * q + 1) ^ (row & 7)) << 4;
#pragma unroll
        for (int u = 0; u < kConvSlabsPerStep; ++u) {
          uint4 lo, hi;
          dequant4(codes[k][u].x, scale[k], lo.x, lo.y);
          dequant4(codes[k][u].y, scale[k], lo.z, lo.w);
          dequant4(codes[k][u].z, scale[k], hi.x, hi.y);
          dequant4(codes[k][u].w, scale[k], hi.z, hi.w);
          // The other consumer warpgroup stages its output over these V slabs after the owner's full-barrier waits and
          // the P-ready bar.arrive -> bar.sync (epilogue_tma_ws.cuh). racecheck: hand-off
          *reinterpret_cast<uint4*>(dst + u * kSlabBytes + c0) = lo;
          *reinterpret_cast<uint4*>(dst + u * kSlabBytes + c1) = hi;
        }
      }
      fence_proxy_async();  // generic stores, read by wgmma (async proxy) once the barrier completes
#pragma unroll
      for (int u = 0; u < kConvSlabsPerStep; ++u) mbar_arrive(bars.full(stage, s0 + u));
    }
    c.advance(p);
    ++j;
  }
}

}  // namespace mla::sm90::decode

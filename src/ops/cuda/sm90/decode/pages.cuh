#pragma once
// Page loaders of the 256-thread decode kernel (kernel.cuh): how a KV page gets from global memory into
// a 16-bit stage that S and P.V read. The loader is a policy of the kernel, picked by the format's traits
// (PageLoaderOf); the math after it is the same for every format.
//  - CpAsyncPages (bf16, fp16): cp.async straight into kStages stages, one commit group per page.
//  - Fp8DsPages (fp8_ds): the raw 41 KB page lands through one bulk copy in a ring of raw slots (three
//    pages in flight for 16-row tiles, where two 72 KB stages held two), and at its step all threads
//    dequantize it into a single bf16 stage with the 16-bit layout (e4m3 x tile scale in fp32, rounded
//    once to bf16; RoPE copied), so scores, softmax, P.V and the epilogue are the bf16 kernel's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"

// Session 10 experiment knob (bench/decode/NOTES.md "Session 10, bf16h16"); compile-time so that A/B binaries
// differ only in it (16-bit mma.sync tiles of kernel.cuh). 0: HEAD's chain, four block barriers per page (B1 after
// the wait, B2 after the row maxima, B3 after P, B4 before the whole-page refill).
// 1: split refill: the RoPE group of the freed stage is issued right after B2 (S is done with it), and each warp
//    refills its own V column group right after its P.V; B4 goes.
// 2: 1 + lazy max: each warp writes its P against its own reference r_w (the running max, unless its keys exceed
//    that by more than 2^8 in p) before B2, so B2 covers max and P and B3 goes; after B2 a warp whose row group saw
//    r_w != the new max rescales the P fragments it reads (a segment's first page, rare later jumps).
// 3: 2 + mbarrier pages: each thread's copies of a page arrive on the slot's mbarrier (cp.async.mbarrier.arrive),
//    a step waits on that instead of wait_group + B1 (B1 stays at a segment's first step, for the Q tile); P and
//    the row maxima are double-buffered by step parity, so one block barrier per page remains.
// 4: 1 + mbarrier pages (B2 and B3 remain; single buffers suffice since B3 separates the max reads from the next
//    step's writes).
// 5: HEAD's chain with three stages for one-row-group tiles: the Q tile leaves shared memory (kernel.cuh loads its
//    mma fragments straight from global memory), which makes room for a third 72 KB stage, so two pages are in
//    flight while one is computed instead of one. The prologue fills two slots; the third is issued at the first
//    step, once the first page has landed.
#ifndef MLA_DECODE_N16_VAR
#define MLA_DECODE_N16_VAR 0
#endif

namespace mla::sm90::decode {

// Arrives on mbarrier `bar` once every cp.async this thread issued so far has landed (the arrival counts toward
// the count the barrier was initialized with).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

// Two e4m3 codes (low byte first) times `scale` -> bf16x2: e4m3 -> f16 -> f32 are exact, the product is
// the reference's fp32 product (ref::mla_decode's load_token), rounded once to bf16. NaN codes stay NaN.
__device__ __forceinline__ uint32_t dequant_pair(uint16_t codes, float scale) {
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(codes));
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h2));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const uint32_t*>(&b);
}

// 16 consecutive codes -> lo (values 0-7) and hi (8-15): two 16-byte chunks of 16-bit values.
__device__ __forceinline__ void dequant16(const uint4& codes, float scale, uint4& lo, uint4& hi) {
  lo.x = dequant_pair(static_cast<uint16_t>(codes.x), scale);
  lo.y = dequant_pair(static_cast<uint16_t>(codes.x >> 16), scale);
  lo.z = dequant_pair(static_cast<uint16_t>(codes.y), scale);
  lo.w = dequant_pair(static_cast<uint16_t>(codes.y >> 16), scale);
  hi.x = dequant_pair(static_cast<uint16_t>(codes.z), scale);
  hi.y = dequant_pair(static_cast<uint16_t>(codes.z >> 16), scale);
  hi.z = dequant_pair(static_cast<uint16_t>(codes.w), scale);
  hi.w = dequant_pair(static_cast<uint16_t>(codes.w >> 16), scale);
}

// 16-bit formats: the stages are the load slots.
template <bool kSlab, int RG>
struct CpAsyncPages {
  // MLA_DECODE_N16_VAR 5: three stages, no Q tile (16 rows: 3 x 72 KB + P, maxima and sums = 222 KB).
  static constexpr bool kQGlobal = !kSlab && RG == 1 && MLA_DECODE_N16_VAR == 5;
  static constexpr int kSlots = kQGlobal ? 3 : kStages;  // pages in flight
  static constexpr bool kEarlyRefill = false;  // a slot frees only after the step's P.V
  // MLA_DECODE_N16_VAR 3 / 4: one mbarrier per slot (kThreads arrivals per fill); 3 also double-buffers P and the
  // row maxima (second buffers in the raw area, which 16-bit pages leave empty).
  // (64-row mma.sync tiles: no room for the second buffers; they keep VAR 1's schedule there.)
  static constexpr bool kMbar = !kSlab && RG <= 2 && (MLA_DECODE_N16_VAR == 3 || MLA_DECODE_N16_VAR == 4);
  static constexpr bool kDoubleBuf = kMbar && MLA_DECODE_N16_VAR == 3;
  static constexpr SmemLayout layout(int row_groups, int slices) {
    SmemLayout s = smem_layout(row_groups, slices);
    if (kQGlobal) {
      SmemLayout t = smem_layout(row_groups, slices, kSlots);
      const int q_bytes = t.p_offset - t.q_offset;  // the Q tile's region goes
      t.p_offset -= q_bytes;
      t.max_offset -= q_bytes;
      t.sum_offset -= q_bytes;
      t.raw_offset -= q_bytes;
      t.bar_offset -= q_bytes;
      t.total -= q_bytes;
      return t;
    }
    if (kMbar) {
      s.raw_offset = s.total;
      s.bar_offset = s.raw_offset + (kDoubleBuf ? row_groups * kRowGroup * kPRowBytes + slices * kRowsPerCta * 4 : 0);
      s.total = s.bar_offset + kSlots * 8;
    }
    return s;
  }

  uint32_t s_kv0, bar0;
  __device__ __forceinline__ void init(uint8_t* smem, const SmemLayout& L) {
    s_kv0 = smem_u32(smem + L.k_offset);
    bar0 = smem_u32(smem + L.bar_offset);
    if constexpr (kMbar) {
      if (threadIdx.x == 0) {
        for (int s = 0; s < kSlots; ++s) mbar_init(bar0 + 8 * s, kThreads);
        mbar_init_fence();
      }
      __syncthreads();
    }
  }
  // kMbar: after this thread issued its share of a fill of `slot`.
  __device__ __forceinline__ void arrive(int slot) const {
    if constexpr (kMbar) cp_async_mbar_arrive(bar0 + 8 * slot);
  }
  // kMbar: every thread's copies of the slot's current fill have landed (and are visible to this warp).
  __device__ __forceinline__ void wait_mbar(int slot, uint32_t phase) const { mbar_wait_warp(bar0 + 8 * slot, phase); }
  __device__ __forceinline__ void issue(const DecodeKernelParams& p, const PartCursor& c, int slot) const {
    load_kv_page<kSlab>(p, c.page, c.blk, c.seqlen, s_kv0 + slot * kPageBytes);
  }
  // Split refill (row layout only): one column group of the page by the calling warp, or by the whole CTA.
  __device__ __forceinline__ void issue_group_warp(const DecodeKernelParams& p, const PartCursor& c, int slot, int grp,
                                                   int lane) const {
    static_assert(!kSlab, "column groups of the row layout");
    copy_page_group_warp(static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(c.page) * kPageBytes,
                         s_kv0 + slot * kPageBytes, c.seqlen - c.blk * kBlockN, grp, lane);
  }
  __device__ __forceinline__ void issue_group_cta(const DecodeKernelParams& p, const PartCursor& c, int slot,
                                                  int grp) const {
    static_assert(!kSlab, "column groups of the row layout");
    copy_page_group_cta(static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(c.page) * kPageBytes,
                        s_kv0 + slot * kPageBytes, c.seqlen - c.blk * kBlockN, grp);
  }
  // Before the step's first barrier: this thread's copies of the step's page (and of a Q tile issued
  // before it) have landed. The Q tile of a new segment is its own commit group ahead of the next page.
  __device__ __forceinline__ void wait(int, uint32_t) const { cp_async_wait<kSlots - 1>(); }
  // After that barrier: the page as a 16-bit stage.
  __device__ __forceinline__ uint32_t stage(const DecodeKernelParams&, const PartCursor&, int slot) const {
    return s_kv0 + slot * kPageBytes;
  }
};

// Dequantizes a raw fp8_ds page (token-major, 656 bytes per token) into a 16-bit stage (1152-byte rows,
// config.h swizzle). Tokens at or past `valid` become zeros: their cache slots are garbage (NaN in the
// tests) and 0 * NaN would poison P.V. Thread t converts latent chunk f = t % 32 (16 codes, scale tile
// f / 8) of tokens t / 32 + 8 i, so a warp reads one token's 512 latent bytes per load.
__device__ __forceinline__ void dequant_page_rows(const uint8_t* raw, uint8_t* stage, int valid) {
  static_assert(kThreads == 256, "thread mapping");
  const int f = threadIdx.x & 31, r0 = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kBlockN / 8; ++i) {
    const int r = r0 + 8 * i;
    uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
    if (r < valid) {
      const uint8_t* tok = raw + r * kFp8DsTokenBytes;
      const float scale = reinterpret_cast<const float*>(tok + Fp8DsLayout::kScalesOffset)[f / 8];
      dequant16(*reinterpret_cast<const uint4*>(tok + 16 * f), scale, lo, hi);
    }
    *reinterpret_cast<uint4*>(stage + swizzle(r, 2 * f, kRowBytes)) = lo;
    *reinterpret_cast<uint4*>(stage + swizzle(r, 2 * f + 1, kRowBytes)) = hi;
  }
  // RoPE: already bf16, 8 chunks per token; thread t copies chunk t % 8 of tokens t / 8 and t / 8 + 32.
  const int c = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = (threadIdx.x >> 3) + 32 * i;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < valid) v = *reinterpret_cast<const uint4*>(raw + r * kFp8DsTokenBytes + Fp8DsLayout::kRopeOffset + 16 * c);
    *reinterpret_cast<uint4*>(stage + swizzle(r, kDimLatent / 8 + c, kRowBytes)) = v;
  }
}

// fp8_ds: a ring of raw slots (one mbarrier each) feeding one bf16 stage.
template <int RG>
struct Fp8DsPages {
  // Raw slots: 3 for one row group (224 KB with the bf16 stage), 2 for two (the Q tile doubles).
  static constexpr int kSlots = RG == 1 ? 3 : 2;
  // The raw slot is free once dequantized (before S): its next page is issued then, a whole step earlier.
  static constexpr bool kEarlyRefill = true;
  static constexpr bool kMbar = false, kDoubleBuf = false, kQGlobal = false;  // (MLA_DECODE_N16_VAR: 16-bit pages only)
  __device__ __forceinline__ void arrive(int) const {}
  __device__ __forceinline__ void wait_mbar(int, uint32_t) const {}
  static constexpr SmemLayout layout(int row_groups, int slices) {
    return smem_layout(row_groups, slices, 1, kSlots, kFp8DsPageBytes);
  }

  uint8_t* stage_ptr;
  const uint8_t* raw0;
  uint32_t s_stage, s_raw0, bar0;
  __device__ __forceinline__ void init(uint8_t* smem, const SmemLayout& L) {
    stage_ptr = smem + L.k_offset;
    raw0 = smem + L.raw_offset;
    s_stage = smem_u32(stage_ptr);
    s_raw0 = smem_u32(raw0);
    bar0 = smem_u32(smem + L.bar_offset);
    if (threadIdx.x == 0) {
      for (int s = 0; s < kSlots; ++s) mbar_init(bar0 + 8 * s, 1);
      mbar_init_fence();
    }
    __syncthreads();
  }
  __device__ __forceinline__ void issue(const DecodeKernelParams& p, const PartCursor& c, int slot) const {
    if (threadIdx.x != 0) return;
    const uint32_t bar = bar0 + 8 * slot;
    mbar_expect_tx(bar, kFp8DsPageBytes);
    bulk_load(s_raw0 + slot * kFp8DsPageBytes,
              static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(c.page) * kFp8DsPageBytes, kFp8DsPageBytes,
              bar);
  }
  // Pages are not in cp.async groups: wait<0> covers exactly a pending Q tile.
  __device__ __forceinline__ void wait(int slot, uint32_t phase) const {
    cp_async_wait<0>();
    mbar_wait(bar0 + 8 * slot, phase);
  }
  // After the step's first barrier (the previous step's P.V is done with the stage): dequantize.
  __device__ __forceinline__ uint32_t stage(const DecodeKernelParams&, const PartCursor& c, int slot) const {
    dequant_page_rows(raw0 + slot * kFp8DsPageBytes, stage_ptr, c.seqlen - c.blk * kBlockN);
    __syncthreads();
    return s_stage;
  }
};

template <class Traits, int RG, bool kWg>
struct PageLoaderOf {
  using type = CpAsyncPages<kWg, RG>;
};
template <int RG, bool kWg>
struct PageLoaderOf<Fp8DsTraits, RG, kWg> {
  static_assert(!kWg, "fp8_ds 64-row tiles run the warp-specialized kernel");
  using type = Fp8DsPages<RG>;
};

}  // namespace mla::sm90::decode

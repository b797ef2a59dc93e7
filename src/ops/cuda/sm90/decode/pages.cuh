#pragma once
// Page loaders of the 256-thread decode kernel (kernel.cuh): how a KV page gets from global memory into
// a 16-bit stage that S and P.V read. The loader is a policy of the kernel, picked by the format's traits
// (PageLoaderOf); the math after it is the same for every format.
//  - TmaPages (bf16, fp16, 16-row tiles): one 3D TMA copy per page into kStages slab-major stages (mbarriers);
//    short parts load evict-first (config.h kKvEvictFirstPartBytes).
//  - CpAsyncPages (bf16, fp16, 32 / 64-row tiles): cp.async straight into kStages stages, one commit group per page.
//  - Fp8DsPages (fp8_ds): the raw 41 KB page lands through one bulk copy in a ring of raw slots (three
//    pages in flight for 16-row tiles, where two 72 KB stages held two), and at its step all threads
//    dequantize it into a single bf16 stage with the 16-bit layout (e4m3 x tile scale in fp32, rounded
//    once to bf16; RoPE copied), so scores, softmax, P.V and the epilogue are the bf16 kernel's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"

namespace mla::sm90::decode {

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
template <bool kSlab>
struct CpAsyncPages {
  static constexpr int kSlots = kStages;     // pages in flight
  static constexpr bool kEarlyRefill = false;  // a slot frees only after the step's P.V
  static constexpr bool kStageSlab = kSlab;    // the stage's layout: swizzle_slab, else 1152-byte rows (swizzle)
  static constexpr SmemLayout layout(int row_groups, int slices) { return smem_layout(row_groups, slices); }

  uint32_t s_kv0;
  __device__ __forceinline__ void init(const DecodeKernelParams&, uint8_t* smem, const SmemLayout& L) {
    s_kv0 = smem_u32(smem + L.k_offset);
  }
  __device__ __forceinline__ void issue(const DecodeKernelParams& p, const PartCursor& c, int slot) const {
    load_kv_page<kSlab>(p, c.page, c.blk, c.seqlen, s_kv0 + slot * kPageBytes);
  }
  // Before the step's first barrier: this thread's copies of the step's page (and of a Q tile issued
  // before it) have landed. The Q tile of a new segment is its own commit group ahead of the next page.
  __device__ __forceinline__ void wait(int, uint32_t) const { cp_async_wait<kStages - 1>(); }
  // After that barrier: the page as a 16-bit stage.
  __device__ __forceinline__ uint32_t stage(const DecodeKernelParams&, const PartCursor&, int slot) const {
    return s_kv0 + slot * kPageBytes;
  }
};

// 16-bit formats, 16-row tiles: each page as ONE 3D TMA copy (tmap_kv from encode_tensor_map_kv_slabs16) into a
// slab-major stage (swizzle_slab), completing on the stage's mbarrier; a short part's pages with an L2 evict-first
// policy (config.h kKvEvictFirstPartBytes: one thread issues, so the choice costs a branch there, not in every thread
// as it did for the cp.async loader, session 15). Fewer copies per page stream faster (bench_stream, and the fp8
// 16-row kernel's one-copy pages). The copy brings whole pages: keys past the sequence end hold the cache's garbage
// (NaN in the tests), so stage() zeroes their V columns (0 * NaN would poison P.V; their scores are masked to -inf).
// Against the cp.async loader (NOTES_plan.md session 16, runs tb / tv / tv2 / hy): h16 b128 s512 / b32 s4096 -2.2 /
// -1.5 us (evict-first), b128 s4096 / s8192 -0.2..-0.6 / -1.3..-2.6, but parts of 1-2 pages +0.5 (b1 rows; one TMA
// copy of a page lands later than 256 threads' cp.async) and b32 s8192's 32-page parts +0.7..+0.9. Measured and
// dropped: a tensor-map prefetch, three 3-slab boxes per page, evict-first up to 32 pages (+3 us there), and cp.async
// for the 1-2-page and 17-63-page parts (into this slab layout it lost more: b32 s8192 +2.7).
struct TmaPages {
  static constexpr int kSlots = kStages;
  static constexpr bool kEarlyRefill = false;
  static constexpr bool kStageSlab = true;
  static constexpr SmemLayout layout(int row_groups, int slices) {
    return smem_layout(row_groups, slices, kStages, kStages, 0);  // no raw bytes, one mbarrier per stage
  }
  // The mbarriers' offset from the first stage (16-row tiles only: one layout), so only the stage base stays live.
  static constexpr int kBarFromStage = smem_layout(1, WarpShape<1>::kSlices, kStages, kStages, 0).bar_offset -
                                       smem_layout(1, WarpShape<1>::kSlices, kStages, kStages, 0).k_offset;

  uint32_t s_kv0;
  bool evict_first;  // thread 0's: the part's L2 policy
  __device__ __forceinline__ void init(const DecodeKernelParams& p, uint8_t* smem, const SmemLayout& L) {
    s_kv0 = smem_u32(smem + L.k_offset);
    evict_first = false;
    if (threadIdx.x == 0) {
      evict_first = kv_evict_first(p, kPageBytes);
      for (int s = 0; s < kSlots; ++s) mbar_init(s_kv0 + kBarFromStage + 8 * s, 1);
      mbar_init_fence();
    }
    __syncthreads();
  }
  __device__ __forceinline__ void issue(const DecodeKernelParams& p, const PartCursor& c, int slot) const {
    if (threadIdx.x != 0) return;
    const uint32_t bar = s_kv0 + kBarFromStage + 8 * slot, dst = s_kv0 + slot * kPageBytes;
    mbar_expect_tx(bar, kPageBytes);
    if (evict_first)
      tma_load_3d_hint(dst, &p.tmap_kv, bar, 0, c.page * kBlockN, 0, l2_evict_first_fraction(1.f));
    else
      tma_load_3d(dst, &p.tmap_kv, bar, 0, c.page * kBlockN, 0);
  }
  // Pages are not in cp.async groups: wait<0> covers exactly a pending Q tile.
  __device__ __forceinline__ void wait(int slot, uint32_t phase) const {
    cp_async_wait<0>();
    mbar_wait(s_kv0 + kBarFromStage + 8 * slot, phase);
  }
  // After the step's first barrier: zero the V columns (slabs 0-7) of the tokens past the sequence end, then a proxy
  // fence (the next copy into this stage is an async-proxy write after these generic ones) and a barrier.
  __device__ __forceinline__ uint32_t stage(const DecodeKernelParams&, const PartCursor& c, int slot) const {
    const uint32_t st = s_kv0 + slot * kPageBytes;
    const int valid = c.seqlen - c.blk * kBlockN;
    if (valid < kBlockN) {  // CTA-uniform
      constexpr int kVSlabs = kDimV / 64;
      const int n = (kBlockN - valid) * kVSlabs * 8;  // 16-byte chunks: rows x slabs x 8
      for (int i = threadIdx.x; i < n; i += kThreads) {
        const int chunk = i & 7, slab = (i >> 3) % kVSlabs, row = valid + (i >> 3) / kVSlabs;
        st_shared_zero16(st + slab * kBlockN * 128 + row * 128 + chunk * 16);
      }
      fence_proxy_async();
      __syncthreads();
    }
    return st;
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
  static constexpr SmemLayout layout(int row_groups, int slices) {
    return smem_layout(row_groups, slices, 1, kSlots, kFp8DsPageBytes);
  }

  static constexpr bool kStageSlab = false;
  uint8_t* stage_ptr;
  const uint8_t* raw0;
  uint32_t s_stage, s_raw0, bar0;
  __device__ __forceinline__ void init(const DecodeKernelParams&, uint8_t* smem, const SmemLayout& L) {
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
  using type = std::conditional_t<RG == 1 && !kWg, TmaPages, CpAsyncPages<kWg>>;
};
template <int RG, bool kWg>
struct PageLoaderOf<Fp8DsTraits, RG, kWg> {
  static_assert(!kWg, "fp8_ds 64-row tiles run the warp-specialized kernel");
  using type = Fp8DsPages<RG>;
};

}  // namespace mla::sm90::decode

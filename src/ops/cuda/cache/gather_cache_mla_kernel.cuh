#pragma once
// gather_and_maybe_dequant_cache_mla kernel: one warp per tile of 32 consecutive dst rows.
//
// Lane r resolves row r of the tile (binary search over cu_seq_lens, block table, page check) once, in
// parallel with the other lanes. The warp then walks the tile's output as a flat run of 16-byte chunks:
// at step s, lane l writes output chunk 32 s + l, so every store instruction of the warp writes 512
// contiguous bytes (whole sectors and lines) whatever the output dtype, and the lane loads exactly the
// input bytes behind its chunk (16, 8 or 4 B), from the token whose offset it takes by one shuffle from the
// lane that resolved it. The old mapping (lane = 16 input bytes) wrote 32 or 64 B per lane as 16-byte
// pieces at a 32/64-byte stride: half- or quarter-sector writes, 2-4x the write requests (NOTES.md in
// bench/cache_ops). Each lane issues kUnroll loads (~128 B) before it converts the first, so a warp keeps
// ~4 KB of reads in flight. fp8_ds walks its latent (e4m3 + tile scale) and rope (bf16) columns as two
// segments, so no step mixes the two codecs.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "mla/core/kv_format.h"
#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/gather_codec.cuh"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

constexpr int kGatherRowsPerWarp = 32;  // one row per lane for the index lookups
constexpr int kGatherLoadBytesPerLane = 128;  // default target of read bytes each lane has in flight

struct GatherKernelParams {
  const uint8_t* cache;        // [num_pages][page_size][token_bytes of the format]
  void* dst;                   // [n_rows, 576] Out
  const int32_t* block_table;  // [batch, max_pages]
  const int32_t* cu_seq_lens;  // [batch + 1]
  const int32_t* seq_starts;   // [batch] or null
  int64_t n_rows;
  int batch;
  int max_pages;
  int page_size;
  int num_pages;
  float k_scale;               // fp8 only
};

// ---------------------------------------------------------------------------------------------------
// Segments: a column range [kBegin, kEnd) of every row with one codec. A step moves kV columns (one
// 16-byte output store) of one row.

template <class Out>
constexpr int kValsPerStore = 16 / static_cast<int>(sizeof(typename Out::raw));

template <class Out, int V>
__device__ __forceinline__ uint4 pack16(const typename Out::raw (&y)[V]) {
  static_assert(V * sizeof(typename Out::raw) == 16);
  uint4 t;
  memcpy(&t, y, 16);
  return t;
}

// 16-bit stored values (bf16 / fp16 type In) of columns [B, E), the first at byte kSrc of the token.
template <class In, class Out, int B, int E, int kSrc>
struct Seg16 {
  static constexpr int kBegin = B, kCols = E - B, kV = kValsPerStore<Out>, kLoadBytes = 2 * kV;
  Words<kLoadBytes> raw;
  __device__ __forceinline__ void load(const uint8_t* tok, int col, float) {
    raw = ldg_words<kLoadBytes>(tok + kSrc + 2 * (col - B));
  }
  __device__ __forceinline__ uint4 decode() const {
    typename Out::raw y[kV];
#pragma unroll
    for (int i = 0; i < kV / 2; ++i) convert_x2<In, Out>(raw.w[i], y + 2 * i);
    return pack16<Out, kV>(y);
  }
};

// e4m3 codes of columns [B, E), code c at byte c of the token, scaled by k_scale (fp8) or by the fp32 tile
// scale stored at kScales + 4 (c / 128) (fp8_ds).
template <class Out, int B, int E, int kScales>
struct SegE4m3 {
  static constexpr bool kTileScales = kScales >= 0;
  static constexpr int kBegin = B, kCols = E - B, kV = kValsPerStore<Out>, kLoadBytes = kV + (kTileScales ? 4 : 0);
  Words<kV> raw;
  float scale;
  __device__ __forceinline__ void load(const uint8_t* tok, int col, float k_scale) {
    raw = ldg_words<kV>(tok + col);
    if constexpr (kTileScales)
      scale = __ldg(reinterpret_cast<const float*>(tok + kScales) + col / Fp8DsLayout::kTileSize);
    else
      scale = k_scale;
  }
  __device__ __forceinline__ uint4 decode() const {
    typename Out::raw y[kV];
#pragma unroll
    for (int i = 0; i < kV / 4; ++i) dequant_e4m3x4<Out>(raw.w[i], scale, y + 4 * i);
    return pack16<Out, kV>(y);
  }
};

// The segments of each format, as a list walked in order.
template <class... S>
struct SegList {};

template <KvFormat F, class Out>
struct GatherSegments;
template <class Out>
struct GatherSegments<KvFormat::kBf16, Out> { using type = SegList<Seg16<Bf16, Out, 0, kDimQK, 0>>; };
template <class Out>
struct GatherSegments<KvFormat::kFp16, Out> { using type = SegList<Seg16<Fp16, Out, 0, kDimQK, 0>>; };
template <class Out>
struct GatherSegments<KvFormat::kFp8, Out> { using type = SegList<SegE4m3<Out, 0, kDimQK, -1>>; };
template <class Out>
struct GatherSegments<KvFormat::kFp8Ds, Out> {
  using L = Fp8DsLayout;
  static_assert(L::kTileSize % kValsPerStore<Out> == 0, "a step never straddles two tiles' scales");
  using type =
      SegList<SegE4m3<Out, 0, kDimLatent, L::kScalesOffset>, Seg16<Bf16, Out, kDimLatent, kDimQK, L::kRopeOffset>>;
};

// Steps per lane of one segment over a tile, and the loads each lane issues before its first store: the
// largest divisor of the step count that keeps about kTargetBytes of reads per lane in flight.
template <class Seg>
constexpr int kSegSteps = kGatherRowsPerWarp * Seg::kCols / (32 * Seg::kV);
template <class Seg, int kTargetBytes>
constexpr int seg_unroll() {
  int u = kTargetBytes / Seg::kLoadBytes;
  if (u < 1) u = 1;
  while (kSegSteps<Seg> % u != 0) --u;
  return u;
}

template <bool kStream>
__device__ __forceinline__ void store16(void* p, uint4 v) {
  if constexpr (kStream)
    __stcs(static_cast<uint4*>(p), v);  // st.global.cs: written once, never read back by this kernel
  else
    *static_cast<uint4*>(p) = v;
}

// Cache slot (page * page_size + offset) of the token behind dst row `row`, or -1 when the row is outside
// every sequence, past n_rows, or its page is out of range (the reference reports those; the kernel must
// not read them). Slots fit in int32: the launcher rejects caches of 2^31 or more slots.
__device__ __forceinline__ int32_t resolve_row(const GatherKernelParams& p, int64_t row) {
  const int32_t* cu = p.cu_seq_lens;
  if (row >= p.n_rows || row < __ldg(cu) || row >= __ldg(cu + p.batch)) return -1;
  int seq = 0, hi = p.batch;  // invariant cu[seq] <= row < cu[hi]: ends on the last such seq (skips empty ones)
  while (hi - seq > 1) {
    const int mid = (seq + hi) / 2;
    if (__ldg(cu + mid) <= row) seq = mid; else hi = mid;
  }
  const int64_t t = (p.seq_starts ? __ldg(p.seq_starts + seq) : 0) + (row - __ldg(cu + seq));
  const int64_t blk = t / p.page_size;
  if (t < 0 || blk >= p.max_pages) return -1;
  const int32_t page = __ldg(p.block_table + static_cast<int64_t>(seq) * p.max_pages + blk);
  if (page < 0 || page >= p.num_pages) return -1;
  return page * p.page_size + static_cast<int32_t>(t % p.page_size);
}

// Walks one segment over the tile: kUnroll loads per lane, then their conversions and stores. `valid` has
// bit r set when row r of the tile has a token (my_slot of lane r >= 0). Everything that the stores need is
// recomputed from the step index rather than kept live across the loads (registers are occupancy here).
template <class Seg, class Out, int kTokenBytes, int kUnroll, bool kStream>
__device__ __forceinline__ void gather_segment(const uint8_t* __restrict__ cache, int32_t my_slot, unsigned valid,
                                               uint8_t* tile_dst, int lane, float k_scale) {
  constexpr int kSteps = kSegSteps<Seg>;
  static_assert(kSteps % kUnroll == 0 && Seg::kCols % Seg::kV == 0);
  constexpr int kOutBytes = sizeof(typename Out::raw);
  // Element e of the segment's flat run (32 rows x kCols) is row e / kCols, column kBegin + e % kCols; its
  // dst value index within the tile is e itself when the segment spans the whole row.
  auto dst_index = [](int e) {
    if constexpr (Seg::kCols == kDimQK) return e;
    else return (e / Seg::kCols) * kDimQK + Seg::kBegin + e % Seg::kCols;
  };
#pragma unroll 1
  for (int g = 0; g < kSteps; g += kUnroll) {
    Seg s[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = ((g + u) * 32 + lane) * Seg::kV;
      const int r = e / Seg::kCols;
      const int32_t slot = __shfl_sync(kFullMask, my_slot, r);
      if ((valid >> r) & 1u)
        s[u].load(cache + static_cast<int64_t>(slot) * kTokenBytes, Seg::kBegin + e % Seg::kCols, k_scale);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int e = ((g + u) * 32 + lane) * Seg::kV;
      if ((valid >> (e / Seg::kCols)) & 1u) store16<kStream>(tile_dst + dst_index(e) * kOutBytes, s[u].decode());
    }
  }
}

template <class Out, int kTokenBytes, int kTargetBytes, bool kStream, class... Segs>
__device__ __forceinline__ void gather_segments(SegList<Segs...>, const uint8_t* cache, int32_t my_slot, unsigned valid,
                                                uint8_t* tile_dst, int lane, float k_scale) {
  (gather_segment<Segs, Out, kTokenBytes, seg_unroll<Segs, kTargetBytes>(), kStream>(cache, my_slot, valid, tile_dst,
                                                                                     lane, k_scale),
   ...);
}

// kTargetBytes: read bytes each lane keeps in flight; kStream: streaming (evict-first) stores. The
// launcher uses the defaults; bench_cache_ops sweeps both.
template <KvFormat F, class Out, int kTargetBytes = kGatherLoadBytesPerLane, bool kStream = false>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gather_cache_mla_kernel(const __grid_constant__ GatherKernelParams p) {
  static_assert(kGatherRowsPerWarp == 32, "one row per lane");
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * kGatherRowsPerWarp;
  const int lane = threadIdx.x % 32;
  if (row0 >= p.n_rows || row0 >= __ldg(p.cu_seq_lens + p.batch)) return;  // warp-uniform: no row to write
  const int32_t my_slot = resolve_row(p, row0 + lane);
  const unsigned valid = __ballot_sync(kFullMask, my_slot >= 0);
  if (valid == 0) return;
  uint8_t* tile_dst = static_cast<uint8_t*>(p.dst) + row0 * kDimQK * static_cast<int64_t>(sizeof(typename Out::raw));
  gather_segments<Out, kv_bytes_per_token(F), kTargetBytes, kStream>(typename GatherSegments<F, Out>::type{}, p.cache,
                                                                     my_slot, valid, tile_dst, lane, p.k_scale);
}

// Grid of the kernel for n_rows dst rows (one warp per kGatherRowsPerWarp rows).
inline unsigned gather_blocks(int64_t n_rows) {
  constexpr int64_t kRowsPerBlock = int64_t(kWarpsPerBlock) * kGatherRowsPerWarp;
  return static_cast<unsigned>((n_rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace mla::cache

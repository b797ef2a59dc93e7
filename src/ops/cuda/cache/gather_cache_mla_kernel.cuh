#pragma once
// gather_and_maybe_dequant_cache_mla kernel: one warp per kRowsPerWarp consecutive dst rows. The warp finds
// the sequence of its first row by binary search over cu_seq_lens (warp-uniform, cached loads) and walks
// forward for the others, looks up all their pages, then issues every 16-byte load of all its rows before
// the first store: the dependent index loads are paid once per 4 rows and each warp keeps 2-4.5 KB of
// cache reads in flight. Within a row each lane moves whole 16-byte chunks of the cached token
// (TokenChunks below).
#include <cstdint>
#include <type_traits>

#include "mla/core/kv_format.h"
#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

constexpr int kGatherRowsPerWarp = 4;

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

// Converts n values of In to Out and stores them (n * sizeof(Out::raw) bytes, 16-byte aligned).
template <class In, class Out, int N>
__device__ __forceinline__ void convert_store(void* dst, const typename In::raw* x) {
  typename Out::raw y[N];
#pragma unroll
  for (int j = 0; j < N; ++j) y[j] = convert<In, Out>(x[j]);
  store_bytes<N * sizeof(typename Out::raw)>(dst, y);
}

template <class Out, int N>
__device__ __forceinline__ void dequant_store(void* dst, const uint8_t* codes, float scale) {
  typename Out::raw y[N];
#pragma unroll
  for (int j = 0; j < N; ++j) y[j] = from_float(Out{}, decode_e4m3(codes[j], scale));
  store_bytes<N * sizeof(typename Out::raw)>(dst, y);
}

// One lane's share of one cached token: load() reads it, store<Out>() writes the decoded values.
template <KvFormat F>
struct TokenChunks;

// bf16 / fp16: 72 chunks of 8 values; lane l owns chunks l, l + 32 and (l < 8) l + 64.
template <KvFormat F>
  requires(F == KvFormat::kBf16 || F == KvFormat::kFp16)
struct TokenChunks<F> {
  using In = std::conditional_t<F == KvFormat::kBf16, Bf16, Fp16>;
  static constexpr int kChunks = kDimQK / 8;
  uint16_t x[3][8];
  __device__ __forceinline__ void load(const uint8_t* src, int lane, float) {
#pragma unroll
    for (int k = 0; k < 3; ++k)
      if (lane + 32 * k < kChunks) load_bytes<16>(x[k], src + (lane + 32 * k) * 16);
  }
  template <class Out>
  __device__ __forceinline__ void store(typename Out::raw* dst, int lane, float) const {
#pragma unroll
    for (int k = 0; k < 3; ++k)
      if (lane + 32 * k < kChunks) convert_store<In, Out, 8>(dst + (lane + 32 * k) * 8, x[k]);
  }
};

// fp8: 36 chunks of 16 codes; lane l owns chunk l and (l < 4) l + 32.
template <>
struct TokenChunks<KvFormat::kFp8> {
  static constexpr int kChunks = kDimQK / 16;
  uint8_t x[2][16];
  __device__ __forceinline__ void load(const uint8_t* src, int lane, float) {
    load_bytes<16>(x[0], src + lane * 16);
    if (lane + 32 < kChunks) load_bytes<16>(x[1], src + (lane + 32) * 16);
  }
  template <class Out>
  __device__ __forceinline__ void store(typename Out::raw* dst, int lane, float k_scale) const {
    dequant_store<Out, 16>(dst + lane * 16, x[0], k_scale);
    if (lane + 32 < kChunks) dequant_store<Out, 16>(dst + (lane + 32) * 16, x[1], k_scale);
  }
};

// fp8_ds: 32 chunks of 16 codes, exactly one per lane (chunk l lies in tile l / 8), its tile's scale, and
// (l < 8) one chunk of 8 bf16 k_pe values.
template <>
struct TokenChunks<KvFormat::kFp8Ds> {
  using L = Fp8DsLayout;
  static_assert(L::kTileSize == 8 * 16, "a tile is 8 chunks of 16 codes");
  uint8_t x[16];
  uint16_t r[8];
  float scale;
  __device__ __forceinline__ void load(const uint8_t* src, int lane, float) {
    load_bytes<16>(x, src + lane * 16);
    scale = __ldg(reinterpret_cast<const float*>(src + L::kScalesOffset) + lane / 8);
    if (lane < 8) load_bytes<16>(r, src + L::kRopeOffset + lane * 16);
  }
  template <class Out>
  __device__ __forceinline__ void store(typename Out::raw* dst, int lane, float) const {
    dequant_store<Out, 16>(dst + lane * 16, x, scale);
    if (lane < 8) convert_store<Bf16, Out, 8>(dst + kDimLatent + lane * 8, r);
  }
};

template <KvFormat F, class Out>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gather_cache_mla_kernel(const __grid_constant__ GatherKernelParams p) {
  constexpr int kRows = kGatherRowsPerWarp;
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32) * kRows;
  const int lane = threadIdx.x % 32;
  const int32_t* cu = p.cu_seq_lens;
  const int32_t cu_begin = cu[0], cu_end = cu[p.batch];
  if (row0 >= p.n_rows || row0 >= cu_end) return;  // warp-uniform: no row of this warp is in a sequence

  // Sequence of the first row: the last b with cu[b] <= row0 (invariant cu[lo] <= row0 < cu[hi]).
  int seq = 0;
  if (row0 >= cu_begin) {
    int hi = p.batch;
    while (hi - seq > 1) {
      const int mid = (seq + hi) / 2;
      if (cu[mid] <= row0) seq = mid; else hi = mid;
    }
  }
  // Source token of each row, or null for rows outside every sequence or with an out-of-range page (the
  // reference reports those; the kernel must not read them). Everything here is warp-uniform.
  const uint8_t* src[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = row0 + r;
    src[r] = nullptr;
    if (row >= p.n_rows || row < cu_begin || row >= cu_end) continue;
    while (seq + 1 < p.batch && cu[seq + 1] <= row) ++seq;  // skips empty sequences too
    const int64_t t = (p.seq_starts ? p.seq_starts[seq] : 0) + (row - cu[seq]);
    const int64_t blk = t / p.page_size;
    if (t < 0 || blk >= p.max_pages) continue;
    const int32_t page = p.block_table[static_cast<int64_t>(seq) * p.max_pages + blk];
    if (page < 0 || page >= p.num_pages) continue;
    constexpr int kTokenBytes = kv_bytes_per_token(F);
    src[r] = p.cache + (static_cast<int64_t>(page) * p.page_size + t % p.page_size) * kTokenBytes;
  }

  TokenChunks<F> chunks[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (src[r]) chunks[r].load(src[r], lane, p.k_scale);
  using O = typename Out::raw;
#pragma unroll
  for (int r = 0; r < kRows; ++r)
    if (src[r]) chunks[r].template store<Out>(static_cast<O*>(p.dst) + (row0 + r) * kDimQK, lane, p.k_scale);
}

}  // namespace mla::cache

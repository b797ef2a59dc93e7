#pragma once
// gather_and_maybe_dequant_cache_mla kernel: one warp per dst row. The warp finds its sequence by binary
// search over cu_seq_lens (warp-uniform, cached loads), then each lane moves whole 16-byte chunks of the
// cached token: bf16/fp16 = 72 chunks of 8 values, fp8 = 36 chunks of 16 codes, fp8_ds = 32 chunks of
// 16 codes (exactly one per lane; chunk l lies in tile l / 8) plus 8 chunks of 8 bf16 k_pe. All loads of a
// lane are issued before its stores.
#include <cstdint>
#include <type_traits>

#include "mla/core/kv_format.h"
#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

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

template <KvFormat F, class Out>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    gather_cache_mla_kernel(const __grid_constant__ GatherKernelParams p) {
  using O = typename Out::raw;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.n_rows) return;  // everything below is warp-uniform until the chunk loops
  const int32_t* cu = p.cu_seq_lens;
  if (row < cu[0] || row >= cu[p.batch]) return;  // not part of any sequence: left untouched
  int lo = 0, hi = p.batch;  // invariant: cu[lo] <= row < cu[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (cu[mid] <= row) lo = mid; else hi = mid;
  }
  const int64_t t = (p.seq_starts ? p.seq_starts[lo] : 0) + (row - cu[lo]);
  const int64_t blk = t / p.page_size;
  if (t < 0 || blk >= p.max_pages) return;
  const int32_t page = p.block_table[static_cast<int64_t>(lo) * p.max_pages + blk];
  if (page < 0 || page >= p.num_pages) return;  // the reference reports this; the kernel must not read it

  constexpr int kTokenBytes = kv_bytes_per_token(F);
  const uint8_t* src = p.cache + (static_cast<int64_t>(page) * p.page_size + t % p.page_size) * kTokenBytes;
  O* dst = static_cast<O*>(p.dst) + row * kDimQK;

  if constexpr (F == KvFormat::kBf16 || F == KvFormat::kFp16) {
    using In = std::conditional_t<F == KvFormat::kBf16, Bf16, Fp16>;
    constexpr int kChunks = kDimQK / 8;  // 72
    uint16_t x[3][8];
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int c = lane + 32 * k;
      if (c < kChunks) load_bytes<16>(x[k], src + c * 16);
    }
#pragma unroll
    for (int k = 0; k < 3; ++k) {
      const int c = lane + 32 * k;
      if (c < kChunks) convert_store<In, Out, 8>(dst + c * 8, x[k]);
    }
  } else if constexpr (F == KvFormat::kFp8) {
    constexpr int kChunks = kDimQK / 16;  // 36
    uint8_t x[2][16];
    load_bytes<16>(x[0], src + lane * 16);
    if (lane + 32 < kChunks) load_bytes<16>(x[1], src + (lane + 32) * 16);
    dequant_store<Out, 16>(dst + lane * 16, x[0], p.k_scale);
    if (lane + 32 < kChunks) dequant_store<Out, 16>(dst + (lane + 32) * 16, x[1], p.k_scale);
  } else {
    using L = Fp8DsLayout;
    static_assert(L::kTileSize == 8 * 16, "a tile is 8 chunks of 16 codes");
    uint8_t x[16];
    uint16_t r[8];
    load_bytes<16>(x, src + lane * 16);
    const float scale = __ldg(reinterpret_cast<const float*>(src + L::kScalesOffset) + lane / 8);
    if (lane < 8) load_bytes<16>(r, src + L::kRopeOffset + lane * 16);
    dequant_store<Out, 16>(dst + lane * 16, x, scale);
    if (lane < 8) convert_store<Bf16, Out, 8>(dst + kDimLatent + lane * 8, r);
  }
}

}  // namespace mla::cache

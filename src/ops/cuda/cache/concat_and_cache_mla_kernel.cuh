#pragma once
// concat_and_cache_mla kernel: one warp per token. The token's 576 inputs are 72 chunks of 8 values:
// lane l owns kv_c chunks l and l + 32 and (l < 8) k_pe chunk l, all loaded with 16-byte vector loads
// before any store so each warp keeps 1.1 KB in flight. For fp8_ds, chunk l lies in tile l / 16 and chunk
// l + 32 in tile 2 + l / 16, so a tile's amax is a max-reduction over one half-warp (xor 8, 4, 2, 1).
#include <cstdint>
#include <type_traits>

#include "mla/core/kv_format.h"
#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/e4m3_pack.cuh"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

struct ConcatKernelParams {
  const void* kv_c;             // [t, kv_c_stride] In (first 512 used)
  const void* k_pe;             // [t, k_pe_stride] In (first 64 used)
  const int64_t* slot_mapping;  // [t]
  uint8_t* cache;               // [capacity][token_bytes of the format]
  int64_t kv_c_stride;          // elements between rows
  int64_t k_pe_stride;
  int64_t capacity;             // num_pages * page_size: slots at or past it are skipped
  int64_t num_tokens;
  float k_scale;                // fp8 only
};

template <class In, class Out>
__device__ __forceinline__ Pack8<typename Out::raw> convert8(const Pack8<typename In::raw>& x) {
  Pack8<typename Out::raw> y;
#pragma unroll
  for (int j = 0; j < 8; ++j) y.v[j] = convert<In, Out>(x.v[j]);
  return y;
}

// satfinite_rne(x / scale) of eight values, packed (the division is encode_e4m3's, the conversion paired).
template <class In>
__device__ __forceinline__ uint64_t encode8(const Pack8<typename In::raw>& x, float scale) {
  float q[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) q[j] = div_rn(to_float(In{}, x.v[j]), scale);
  return pack_e4m3x8(q);
}

template <class In>
__device__ __forceinline__ float amax8(const Pack8<typename In::raw>& x) {
  float m = 0.f;
#pragma unroll
  for (int j = 0; j < 8; ++j) m = fmaxf(m, finite_abs(to_float(In{}, x.v[j])));
  return m;
}

template <class In, KvFormat F>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    concat_and_cache_mla_kernel(const __grid_constant__ ConcatKernelParams p) {
  using R = typename In::raw;
  const int64_t token = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (token >= p.num_tokens) return;  // warp-uniform
  // The slot and the inputs are loaded together (the inputs exist for every token, padding included), so
  // the slot's latency is not paid before the data loads are issued.
  const int64_t slot = p.slot_mapping[token];
  const R* kv_c = static_cast<const R*>(p.kv_c) + token * p.kv_c_stride;
  const R* k_pe = static_cast<const R*>(p.k_pe) + token * p.k_pe_stride;
  const Pack8<R> x0 = load8(kv_c + lane * 8);
  const Pack8<R> x1 = load8(kv_c + (lane + 32) * 8);
  Pack8<R> r{};
  if (lane < 8) r = load8(k_pe + lane * 8);
  if (slot < 0 || slot >= p.capacity) return;  // padding (or a bad slot: never write out of bounds)

  constexpr int kTokenBytes = kv_bytes_per_token(F);
  uint8_t* dst = p.cache + slot * kTokenBytes;
  if constexpr (F == KvFormat::kBf16 || F == KvFormat::kFp16) {
    using Out = std::conditional_t<F == KvFormat::kBf16, Bf16, Fp16>;
    const auto y0 = convert8<In, Out>(x0), y1 = convert8<In, Out>(x1);
    store_bytes<16>(dst + lane * 16, &y0);
    store_bytes<16>(dst + (lane + 32) * 16, &y1);
    if (lane < 8) {
      const auto yr = convert8<In, Out>(r);
      store_bytes<16>(dst + 2 * kDimLatent + lane * 16, &yr);
    }
  } else if constexpr (F == KvFormat::kFp8) {
    const uint64_t c0 = encode8<In>(x0, p.k_scale), c1 = encode8<In>(x1, p.k_scale);
    store_bytes<8>(dst + lane * 8, &c0);
    store_bytes<8>(dst + (lane + 32) * 8, &c1);
    if (lane < 8) {
      const uint64_t cr = encode8<In>(r, p.k_scale);
      store_bytes<8>(dst + kDimLatent + lane * 8, &cr);
    }
  } else {
    using L = Fp8DsLayout;
    static_assert(L::kTileSize == 16 * 8 && L::kNumTiles == 4, "a tile is 16 chunks: half a warp per tile");
    float m0 = amax8<In>(x0), m1 = amax8<In>(x1);
#pragma unroll
    for (int off = 8; off >= 1; off /= 2) {
      m0 = fmaxf(m0, __shfl_xor_sync(kFullMask, m0, off));
      m1 = fmaxf(m1, __shfl_xor_sync(kFullMask, m1, off));
    }
    const float s0 = fp8_ds_tile_scale(m0), s1 = fp8_ds_tile_scale(m1);
    const uint64_t c0 = encode8<In>(x0, s0), c1 = encode8<In>(x1, s1);
    store_bytes<8>(dst + lane * 8, &c0);
    store_bytes<8>(dst + (lane + 32) * 8, &c1);
    if (lane % 16 == 0) {
      // Lane 0 holds tiles 0 and 2, lane 16 tiles 1 and 3.
      float* scales = reinterpret_cast<float*>(dst + L::kScalesOffset);
      scales[lane / 16] = s0;
      scales[2 + lane / 16] = s1;
    }
    if (lane < 8) {
      const auto yr = convert8<In, Bf16>(r);
      store_bytes<16>(dst + L::kRopeOffset + lane * 16, &yr);
    }
  }
}

}  // namespace mla::cache

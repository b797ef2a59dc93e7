#pragma once
// 16-byte vector memory helpers for the memory-bound cache kernels: every global access is a full 16-byte
// (or 8-byte) transaction so a warp moves 512 B per instruction.
#include <cstdint>
#include <cstring>

namespace mla::cache {

// Eight consecutive elements of raw storage type R (16 B for bf16/fp16, 32 B for fp32).
template <class R>
struct Pack8 {
  R v[8];
};

// Loads N bytes (a multiple of 16) from 16-byte-aligned global memory through the read-only path.
template <int N>
__device__ __forceinline__ void load_bytes(void* dst, const void* src) {
  static_assert(N % 16 == 0);
  uint4 t[N / 16];
#pragma unroll
  for (int i = 0; i < N / 16; ++i) t[i] = __ldg(static_cast<const uint4*>(src) + i);
  memcpy(dst, t, N);
}

// Stores N bytes (8 or a multiple of 16) to global memory aligned to min(N, 16).
template <int N>
__device__ __forceinline__ void store_bytes(void* dst, const void* src) {
  if constexpr (N == 8) {
    uint2 t;
    memcpy(&t, src, 8);
    *static_cast<uint2*>(dst) = t;
  } else {
    static_assert(N % 16 == 0);
    uint4 t[N / 16];
    memcpy(t, src, N);
#pragma unroll
    for (int i = 0; i < N / 16; ++i) static_cast<uint4*>(dst)[i] = t[i];
  }
}

// N bytes (4, 8 or 16) as N / 4 little-endian words, loaded from N-aligned global memory by one read-only
// vector load (the gather loads exactly the input behind one 16-byte output store: 16, 8 or 4 bytes).
template <int N>
struct Words {
  uint32_t w[N / 4];
};

template <int N>
__device__ __forceinline__ Words<N> ldg_words(const void* src) {
  Words<N> r;
  if constexpr (N == 16) {
    const uint4 t = __ldg(static_cast<const uint4*>(src));
    r.w[0] = t.x, r.w[1] = t.y, r.w[2] = t.z, r.w[3] = t.w;
  } else if constexpr (N == 8) {
    const uint2 t = __ldg(static_cast<const uint2*>(src));
    r.w[0] = t.x, r.w[1] = t.y;
  } else {
    static_assert(N == 4, "4, 8 or 16 bytes");
    r.w[0] = __ldg(static_cast<const unsigned*>(src));
  }
  return r;
}

template <class R>
__device__ __forceinline__ Pack8<R> load8(const R* src) {
  Pack8<R> p;
  load_bytes<sizeof(Pack8<R>)>(&p, src);
  return p;
}

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kWarpsPerBlock = 8;  // 256-thread blocks: one warp per token (concat) or row (gather)

}  // namespace mla::cache

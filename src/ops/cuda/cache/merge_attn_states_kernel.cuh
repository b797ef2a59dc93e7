#pragma once
// merge_attn_states kernel: one thread per 8 consecutive outputs of one (token, head), so every access is a
// 16-byte (bf16/fp16) or 2 x 16-byte (fp32) vector; the lse pair is re-read by the head_dim / 8 threads of
// a row, which hit the same L1 line. An empty side's out is never loaded.
#include <cstdint>

#include "ops/common/cache_codec.h"
#include "ops/common/merge_weights.h"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

struct MergeKernelParams {
  void* out;          // [n, h, d] T
  float* lse;         // [h, n] or null
  const void* out_a;  // [n, h, d] T
  const float* lse_a; // [h, n]
  const void* out_b;  // [n, h, d] T
  const float* lse_b; // [h, n]
  int64_t n_tokens;
  int64_t n_heads;
  int64_t packs_per_row;  // d / 8
  int64_t total_packs;    // n * h * d / 8
};

template <class T>
__global__ void __launch_bounds__(256) merge_attn_states_kernel(const __grid_constant__ MergeKernelParams p) {
  using R = typename T::raw;
  using P = Pack8<R>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total_packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.packs_per_row;  // token * n_heads + head
    const int64_t token = row / p.n_heads, head = row % p.n_heads;
    const int64_t l = head * p.n_tokens + token;
    const merge::Weights w = merge::weights(p.lse_a[l], p.lse_b[l]);
    P a{}, b{}, o;
    if (w.use_a) a = load8(static_cast<const R*>(p.out_a) + i * 8);
    if (w.use_b) b = load8(static_cast<const R*>(p.out_b) + i * 8);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float va = w.use_a ? to_float(T{}, a.v[j]) : 0.f;
      const float vb = w.use_b ? to_float(T{}, b.v[j]) : 0.f;
      o.v[j] = from_float(T{}, merge::combine(w, va, vb));
    }
    store_bytes<sizeof(P)>(static_cast<R*>(p.out) + i * 8, &o);
    if (p.lse && i % p.packs_per_row == 0) p.lse[l] = w.lse;
  }
}

}  // namespace mla::cache

#pragma once
// quantize_fp8_per_tensor and fp8_absmax kernels. Quantization moves 8 elements per thread (one 16-byte
// load, one 8-byte store) over the first n_vec packs; the remainder goes element by element.
#include <cstdint>

#include "ops/common/cache_codec.h"
#include "ops/cuda/cache/e4m3_pack.cuh"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cache {

struct QuantKernelParams {
  const void* x;   // [n] T
  uint8_t* out;    // [n] e4m3
  int64_t n;
  int64_t n_vec;   // packs of 8 handled vectorized (0 when unaligned)
  float scale;
};

template <class T>
__global__ void __launch_bounds__(256) quantize_fp8_kernel(const __grid_constant__ QuantKernelParams p) {
  using R = typename T::raw;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const R* x = static_cast<const R*>(p.x);
  for (int64_t i = tid; i < p.n_vec; i += stride) {
    const Pack8<R> v = load8(x + i * 8);
    float q[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) q[j] = div_rn(to_float(T{}, v.v[j]), p.scale);
    const uint64_t c = pack_e4m3x8(q);
    store_bytes<8>(p.out + i * 8, &c);
  }
  for (int64_t i = p.n_vec * 8 + tid; i < p.n; i += stride)
    p.out[i] = encode_e4m3(to_float(T{}, x[i]), p.scale);
}

// Max of finite |x| into *amax (zeroed by the launcher): non-negative floats order like their bit
// patterns, so an integer atomicMax is an exact float max.
template <class T>
__global__ void __launch_bounds__(256) absmax_kernel(const typename T::raw* __restrict__ x, int64_t n,
                                                     float* __restrict__ amax) {
  float m = 0.f;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    m = fmaxf(m, finite_abs(to_float(T{}, x[i])));
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, off));
  if (threadIdx.x % 32 == 0 && m > 0.f) atomicMax(reinterpret_cast<unsigned int*>(amax), __float_as_uint(m));
}

}  // namespace mla::cache

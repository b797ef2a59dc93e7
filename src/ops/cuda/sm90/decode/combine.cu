// Combine: one CTA per (query row, sequence). Sequences with one split were written by the decode
// kernel and are skipped; sequences with no keys (seqlen 0, no splits) get out = 0, lse = -inf; the
// rest merge their normalized partials weighted by exp(lse_k - lse_max). Reads are float4 per lane,
// coalesced along the 512 columns.
#include <cstdint>

#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/traits.h"

namespace mla::sm90::decode {
namespace {

constexpr int kCombineThreads = 256;
constexpr int kCombineWarps = kCombineThreads / 32;
constexpr int kColsPerLane = kDimV / 32;  // 16: four float4 at lane * 4 + 128 * j

template <class Traits>
__device__ __forceinline__ void store_cols(const DecodeKernelParams& p, int b, int row, int col, float4 v) {
  uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + col;
  uint2 u;
  u.x = Traits::pack(v.x, v.y);
  u.y = Traits::pack(v.z, v.w);
  *reinterpret_cast<uint2*>(out) = u;
}

__device__ __forceinline__ void store_lse(const DecodeKernelParams& p, int b, int row, float lse) {
  const int i = row / p.h_q, h = row % p.h_q;
  p.lse[(static_cast<int64_t>(b) * p.h_q + h) * p.s_q + i] = lse;
}

// Block-wide max or sum of one float per thread (all threads get the result).
template <bool kMax>
__device__ __forceinline__ float block_reduce(float v, float* s_tmp) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, d);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  if ((threadIdx.x & 31) == 0) s_tmp[threadIdx.x >> 5] = v;
  __syncthreads();
  v = s_tmp[0];
#pragma unroll
  for (int w = 1; w < kCombineWarps; ++w) v = kMax ? fmaxf(v, s_tmp[w]) : v + s_tmp[w];
  __syncthreads();
  return v;
}

// One CTA per (query row, sequence): the warps split the sequence's partials among them (so a batch-1
// call with 100+ splits is not one warp's serial chain of loads), then reduce through shared memory.
template <class Traits>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const __grid_constant__ DecodeKernelParams p) {
  // Programmatic dependent launch: this grid may start while the decode kernel drains; wait for its
  // results before reading anything it writes.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  __shared__ float s_acc[kCombineWarps][kDimV];
  __shared__ float s_tmp[kCombineWarps];
  const int row = blockIdx.x, b = blockIdx.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int first = p.split_offsets[b], n = p.split_offsets[b + 1] - first;
  if (n == 1) return;  // written by the decode kernel
  const float* lse_k = p.lse_accum + static_cast<int64_t>(first) * p.rows + row;
  float mx = -INFINITY;
  for (int k = threadIdx.x; k < n; k += kCombineThreads) mx = fmaxf(mx, lse_k[static_cast<int64_t>(k) * p.rows]);
  mx = block_reduce<true>(mx, s_tmp);
  const bool empty = mx == -INFINITY;  // no split (seqlen 0) or no visible key in any split
  float sum = 0.f;
  if (!empty)
    for (int k = threadIdx.x; k < n; k += kCombineThreads) sum += expf(lse_k[static_cast<int64_t>(k) * p.rows] - mx);
  sum = block_reduce<false>(sum, s_tmp);
  float acc[kColsPerLane];
#pragma unroll
  for (int c = 0; c < kColsPerLane; ++c) acc[c] = 0.f;
  if (!empty) {
    const float inv = 1.f / sum;
#pragma unroll 2
    for (int k = warp; k < n; k += kCombineWarps) {
      const float w = expf(lse_k[static_cast<int64_t>(k) * p.rows] - mx) * inv;
      const float4* src =
          reinterpret_cast<const float4*>(p.o_accum + (static_cast<int64_t>(first + k) * p.rows + row) * kDimV);
#pragma unroll
      for (int j = 0; j < kColsPerLane / 4; ++j) {
        const float4 v = src[lane + 32 * j];
        acc[4 * j] += w * v.x;
        acc[4 * j + 1] += w * v.y;
        acc[4 * j + 2] += w * v.z;
        acc[4 * j + 3] += w * v.w;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kColsPerLane / 4; ++j)
    *reinterpret_cast<float4*>(&s_acc[warp][lane * 4 + 128 * j]) =
        make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]);
  __syncthreads();
  if (threadIdx.x < kDimV / 4) {
    const int col = threadIdx.x * 4;
    float4 o = *reinterpret_cast<const float4*>(&s_acc[0][col]);
#pragma unroll
    for (int w = 1; w < kCombineWarps; ++w) {
      const float4 v = *reinterpret_cast<const float4*>(&s_acc[w][col]);
      o.x += v.x;
      o.y += v.y;
      o.z += v.z;
      o.w += v.w;
    }
    store_cols<Traits>(p, b, row, col, o);
  }
  if (threadIdx.x == 0) store_lse(p, b, row, empty ? -INFINITY : mx + logf(sum));
}

}  // namespace

template <class Traits>
Status launch_combine(const DecodeKernelParams& p, cudaStream_t stream) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(p.rows, p.batch);
  cfg.blockDim = dim3(kCombineThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  MLA_CUDA_TRY("mla_decode (combine)", cudaLaunchKernelEx(&cfg, combine_kernel<Traits>, p));
  MLA_CUDA_TRY_LAUNCH("mla_decode (combine)");
  return Status::ok();
}

template Status launch_combine<Bf16Traits>(const DecodeKernelParams&, cudaStream_t);
template Status launch_combine<Fp16Traits>(const DecodeKernelParams&, cudaStream_t);

}  // namespace mla::sm90::decode

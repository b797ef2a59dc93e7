// Combine: one warp per (sequence, query row). Sequences with one split were written by the decode
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

constexpr int kCombineWarps = 4;
constexpr int kColsPerLane = kDimV / 32;  // 16: four float4 at lane * 4 + 128 * j

template <class Traits>
__device__ __forceinline__ void store_row(const DecodeKernelParams& p, int b, int row, const float (&o)[kColsPerLane],
                                          float lse, int lane) {
  uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV;
#pragma unroll
  for (int j = 0; j < kColsPerLane / 4; ++j) {
    uint2 v;
    v.x = Traits::pack(o[4 * j], o[4 * j + 1]);
    v.y = Traits::pack(o[4 * j + 2], o[4 * j + 3]);
    *reinterpret_cast<uint2*>(out + lane * 4 + 128 * j) = v;
  }
  if (lane == 0) {
    const int i = row / p.h_q, h = row % p.h_q;
    p.lse[(static_cast<int64_t>(b) * p.h_q + h) * p.s_q + i] = lse;
  }
}

template <class Traits>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(const __grid_constant__ DecodeKernelParams p) {
  const int lane = threadIdx.x & 31;
  const int row = blockIdx.x * kCombineWarps + (threadIdx.x >> 5);
  const int b = blockIdx.y;
  if (row >= p.rows) return;
  const int first = p.split_offsets[b], n = p.split_offsets[b + 1] - first;
  if (n == 1) return;
  float o[kColsPerLane];
#pragma unroll
  for (int c = 0; c < kColsPerLane; ++c) o[c] = 0.f;
  const float* lse_k = p.lse_accum + static_cast<int64_t>(first) * p.rows + row;
  float mx = -INFINITY;
  for (int k = lane; k < n; k += 32) mx = fmaxf(mx, lse_k[static_cast<int64_t>(k) * p.rows]);
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, d));
  if (mx == -INFINITY) {  // no split (seqlen 0) or no visible key in any split
    store_row<Traits>(p, b, row, o, -INFINITY, lane);
    return;
  }
  float sum = 0.f;
  for (int k = lane; k < n; k += 32) sum += expf(lse_k[static_cast<int64_t>(k) * p.rows] - mx);
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  const float inv = 1.f / sum;
  for (int k = 0; k < n; ++k) {
    const float w = expf(lse_k[static_cast<int64_t>(k) * p.rows] - mx) * inv;
    if (w == 0.f) continue;  // an empty split (lse -inf): its partial is zeros anyway
    const float4* src = reinterpret_cast<const float4*>(p.o_accum + (static_cast<int64_t>(first + k) * p.rows + row) * kDimV);
#pragma unroll
    for (int j = 0; j < kColsPerLane / 4; ++j) {
      const float4 v = src[lane + 32 * j];
      o[4 * j] += w * v.x;
      o[4 * j + 1] += w * v.y;
      o[4 * j + 2] += w * v.z;
      o[4 * j + 3] += w * v.w;
    }
  }
  store_row<Traits>(p, b, row, o, mx + logf(sum), lane);
}

}  // namespace

template <class Traits>
Status launch_combine(const DecodeKernelParams& p, cudaStream_t stream) {
  const dim3 grid((p.rows + kCombineWarps - 1) / kCombineWarps, p.batch);
  combine_kernel<Traits><<<grid, kCombineWarps * 32, 0, stream>>>(p);
  MLA_CUDA_TRY_LAUNCH("mla_decode (combine)");
  return Status::ok();
}

template Status launch_combine<Bf16Traits>(const DecodeKernelParams&, cudaStream_t);
template Status launch_combine<Fp16Traits>(const DecodeKernelParams&, cudaStream_t);

}  // namespace mla::sm90::decode

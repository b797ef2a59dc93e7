#pragma once
// Shared by the grouped_gemm kernels (mma.sync in grouped_gemm.cu, wgmma in grouped_gemm_wgmma.cu): the
// kernel parameters, the PTX wrappers they use, the 128-byte-row XOR swizzle (which is
// also wgmma's canonical 128B-swizzle K-major layout when a tile starts on a 1024-byte boundary), and the
// loader's row mapping.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "mla/core/status.h"
#include "ptx.cuh"

namespace mla::cuda::grouped {

constexpr int kBK = 64;  // k per stage: one 128-byte row of bf16
constexpr int kRowBytes = 128;

struct GroupedKernelParams {
  const __nv_bfloat16* a;  // [m_a, lda]
  const int32_t* a_rows;   // [n_rows] or null
  const __nv_bfloat16* w;  // [E, N, K]
  const int32_t* offsets;  // [E + 1]
  const int32_t* tiles;    // [max_tiles, 2]
  __nv_bfloat16* out;      // [n_rows, ldo]
  int64_t lda, ldo, m_a;
  int N, K;
  bool silu;
};

// Byte offset of 16-byte chunk `ch` of row `r` in a swizzled tile.
__device__ __forceinline__ uint32_t swz(int r, int ch) { return r * kRowBytes + ((ch ^ (r & 7)) << 4); }

__device__ __forceinline__ float bf16_round(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }


// Weight row of B-tile row r (tile n_tile of width bn) and whether it exists. kSiluMul interleaves
// 8-row groups of gate (even groups) and up (odd groups) rows of the same output columns.
__device__ __forceinline__ int b_tile_row(const GroupedKernelParams& p, int n_tile, int bn, int r, bool* ok) {
  if (p.silu) {
    const int half = p.N / 2, col = n_tile * (bn / 2) + (r / 16) * 8 + r % 8;
    *ok = col < half;
    return ((r / 8) & 1) * half + col;
  }
  const int row = n_tile * bn + r;
  *ok = row < p.N;
  return row;
}

// Stores accumulator tile pair / tile of one 16-row slab half: `acc` is an n8 fragment array in the mma.sync
// C layout (fragment t: columns 8 t + 2 (lane % 4) + {0, 1}, rows lane / 4 and + 8 in elements {0, 1}, {2, 3}).
template <int NT>
__device__ __forceinline__ void store_rows(const GroupedKernelParams& p, const float (&acc)[NT][4], int gr, int h,
                                           int n_tile, int bn, int lane) {
  __nv_bfloat16* o = p.out + int64_t(gr) * p.ldo;
  if (!p.silu) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const int col = n_tile * bn + t * 8 + (lane & 3) * 2;
      if (col < p.N)
        *reinterpret_cast<__nv_bfloat162*>(o + col) = __floats2bfloat162_rn(acc[t][2 * h], acc[t][2 * h + 1]);
    }
    return;
  }
#pragma unroll
  for (int q = 0; q < NT / 2; ++q) {
    const int col = n_tile * (bn / 2) + q * 8 + (lane & 3) * 2;
    if (col >= p.N / 2) continue;
    float v[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      // g and u rounded to bf16 first, as separate GEMMs with bf16 outputs followed by silu_mul would.
      const float g = bf16_round(acc[2 * q][2 * h + j]), u = bf16_round(acc[2 * q + 1][2 * h + j]);
      v[j] = g / (1.0f + expf(-g)) * u;
    }
    *reinterpret_cast<__nv_bfloat162*>(o + col) = __floats2bfloat162_rn(v[0], v[1]);
  }
}

// The wgmma (sm_90a) prefill kernel for block_m 128: 128 x 256 tiles, two consumer warpgroups.
Status launch_wgmma_128x256(const GroupedKernelParams& kp, int64_t max_tiles, cudaStream_t stream);

}  // namespace mla::cuda::grouped

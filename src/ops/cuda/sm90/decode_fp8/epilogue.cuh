#pragma once
// Epilogue of one (part, sequence) segment of the fp8 kernel: finish the row sums across slices, then
// write either the final bf16 result (the sequence has a single split) or a normalized fp32 partial and
// its lse into the split slot, in the partials layout of decode/partials.h, so its combine kernel merges them.
// Both already carry the k_scale factor (O / l * k_scale): the combine is linear in O and needs no scale.
#include <cuda_bf16.h>

#include <cstdint>

#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/row_end.cuh"
#include "ops/cuda/sm90/decode_fp8/mainloop.cuh"

namespace mla::sm90::decode_fp8 {

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Called by every thread of the CTA (contains a barrier). s_sum: [kSlices][64] floats.
template <int RG>
__device__ __forceinline__ void write_segment(const Fp8DecodeParams& fp, const RowState<RG>& st, float* s_sum, int b,
                                              int slot, bool direct, int tile_row0, bool active, int rg, int ws,
                                              int lane) {
  using WS = WarpShape<RG>;
  const decode::DecodeKernelParams& p = fp.d;
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = st.l[h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (active && t4 == 0) s_sum[ws * kRowsPerCta + rg * kRowGroup + g + 8 * h] = l;
  }
  __syncthreads();
  if (!active) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row_local = rg * kRowGroup + g + 8 * h;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < WS::kSlices; ++w) total += s_sum[w * kRowsPerCta + row_local];
    const bool seen = total > 0.f;
    const float inv = decode::row_inv(seen, total, fp.out_scale);
    const float lse = decode::row_lse(seen, total, st.m[h] * p.softmax_scale);
    const int row = tile_row0 + row_local;
    const int col0 = ws * WS::kCols + 4 * t4;  // + 16 c: dims col0 .. col0 + 3 of chunk c
    if (direct) {
      uint16_t* out = static_cast<uint16_t*>(p.out) + (static_cast<int64_t>(b) * p.rows + row) * kDimV + col0;
#pragma unroll
      for (int c = 0; c < WS::kVChunks; ++c) {
        uint2 u;
        u.x = pack_bf16x2(st.o[2 * c][2 * h] * inv, st.o[2 * c + 1][2 * h] * inv);
        u.y = pack_bf16x2(st.o[2 * c][2 * h + 1] * inv, st.o[2 * c + 1][2 * h + 1] * inv);
        *reinterpret_cast<uint2*>(out + 16 * c) = u;
      }
      if (ws == 0 && t4 == 0) decode::store_lse(p, b, row, lse);
    } else {
      // Partials layout (decode/partials.h): quad lane s stores the float4 of logical dims {2s, 2s + 1, 8 + 2s,
      // 9 + 2s} of each 16-dim chunk. This thread holds dims 4 t4 .. 4 t4 + 3 in column order, so lanes t4 and
      // t4 ^ 2 trade one pair (one shuffle per float): lane t4 < 2 keeps dims {4 t4, +1}, takes {8 + 4 t4, +1}
      // and so stores float4 2 t4; lane t4 >= 2 keeps {4 t4 + 2, +3}, takes {4 t4 - 6, -5}: float4 2 (t4 - 2) + 1.
      // Every warp store stays 8 rows x 64 B (full sectors), as in the column order.
      float* o = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV;
      const bool lo = t4 < 2;
      const int dst = decode::partial_pair_offset(ws * WS::kCols + (lo ? 4 * t4 : 4 * t4 - 6));  // first pair's
#pragma unroll
      for (int c = 0; c < WS::kVChunks; ++c) {
        const float x0 = st.o[2 * c][2 * h] * inv, x1 = st.o[2 * c + 1][2 * h] * inv;  // dims 4 t4, 4 t4 + 1
        const float x2 = st.o[2 * c][2 * h + 1] * inv, x3 = st.o[2 * c + 1][2 * h + 1] * inv;  // 4 t4 + 2, + 3
        const float y0 = __shfl_xor_sync(0xffffffffu, lo ? x2 : x0, 2);
        const float y1 = __shfl_xor_sync(0xffffffffu, lo ? x3 : x1, 2);
        // selects, not a branch: one store instruction for the whole warp
        *reinterpret_cast<float4*>(o + dst + 16 * c) =
            make_float4(lo ? x0 : y0, lo ? x1 : y1, lo ? y0 : x2, lo ? y1 : x3);
      }
      if (ws == 0 && t4 == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

}  // namespace mla::sm90::decode_fp8

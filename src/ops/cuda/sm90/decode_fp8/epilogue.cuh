#pragma once
// Epilogue of one (part, sequence) segment of the fp8 kernel: finish the row sums across slices, then
// write either the final bf16 result (the sequence has a single split) or a normalized fp32 partial and
// its lse into the split slot, in the 16-bit kernel's partials layout, so its combine kernel merges them.
// Both already carry the k_scale factor (O / l * k_scale): the combine is linear in O and needs no scale.
#include <cuda_bf16.h>

#include <cstdint>

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
    const float inv = total > 0.f ? fp.out_scale / total : 0.f;
    const float lse = total > 0.f ? st.m[h] * p.softmax_scale + logf(total) : -INFINITY;
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
      if (ws == 0 && t4 == 0) {
        const int i = row / p.h_q, hh = row % p.h_q;
        p.lse[(static_cast<int64_t>(b) * p.h_q + hh) * p.s_q + i] = lse;
      }
    } else {
      float* o = p.o_accum + (static_cast<int64_t>(slot) * p.rows + row) * kDimV + col0;
#pragma unroll
      for (int c = 0; c < WS::kVChunks; ++c)
        *reinterpret_cast<float4*>(o + 16 * c) =
            make_float4(st.o[2 * c][2 * h] * inv, st.o[2 * c + 1][2 * h] * inv, st.o[2 * c][2 * h + 1] * inv,
                        st.o[2 * c + 1][2 * h + 1] * inv);
      if (ws == 0 && t4 == 0) p.lse_accum[static_cast<int64_t>(slot) * p.rows + row] = lse;
    }
  }
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// The split partials' column order: private to the decode kernels that write o_accum and the combine that
// reads it (every format's kernels share one combine, so every writer uses this one permutation).
//
// o_accum is [max_splits, rows, 512] fp32 (bf16 from the fp8 64-row kernel: the same element offsets, PartialValue
// below), and within each group of 16 columns the 16 values follow the
// 16x8 accumulator fragment of mma / wgmma instead of the column order: float4 number s (s = 0..3) of a
// group holds logical columns {2s, 2s + 1, 8 + 2s, 9 + 2s}, the pair that quad lane s holds of the group's
// even 8-column tile followed by the pair it holds of the odd one. So a 64-row epilogue thread writes both
// of its pairs of a group as one float4, a warp store being 8 rows x 64 B (full sectors), half the store
// instructions of the column order's float2 pairs, the same bytes. (Session 8 b1ko: half the column-order
// store instructions and bytes saved 1.05-1.35 us on every h_q 128 batch-1 row; half-sector stores lost.)
// A pair of adjacent logical columns (2k, 2k + 1) always stays adjacent, so the 16-row writers (one pair
// per thread) and the few-split combine (float2 per thread) only permute their addresses.
#include <cuda_bf16.h>

#include <cstdint>

namespace mla::sm90::decode {

// Float offset, within a row of o_accum, of the logical column pair (col, col + 1); col even. A permutation inside
// each 16-column group, so partial_pair_offset(col + 16 k) = partial_pair_offset(col) + 16 k: writers compute a
// thread's offset once and step it by whole groups (asserted below; nvcc does not fold the per-store form, whose
// 8 integer instructions per store would cost more issue slots than the halved stores save).
__host__ __device__ constexpr int partial_pair_offset(int col) {
  return (col & ~15) + 4 * ((col >> 1) & 3) + 2 * ((col >> 3) & 1);
}

// Inverse: the first logical column of the pair stored at float offset off (off even).
__host__ __device__ constexpr int partial_pair_col(int off) {
  return (off & ~15) + 2 * ((off >> 2) & 3) + 8 * ((off >> 1) & 1);
}

namespace partials_detail {
constexpr bool layout_is_consistent() {
  for (int col = 0; col < 512; col += 2) {
    const int off = partial_pair_offset(col);
    if (off < 0 || off >= 512 || (off & 1) != 0 || partial_pair_col(off) != col) return false;
    if ((off & ~15) != (col & ~15)) return false;  // a permutation inside each 16-column group
    if (col >= 16 && off != partial_pair_offset(col - 16) + 16) return false;  // the same in every group
  }
  // The writers' float4: quad lane s's pair of the even tile, then its pair of the odd tile, 16-B aligned.
  for (int g = 0; g < 512; g += 16)
    for (int s = 0; s < 4; ++s)
      if (partial_pair_offset(g + 2 * s) != g + 4 * s || partial_pair_offset(g + 8 + 2 * s) != g + 4 * s + 2)
        return false;
  return true;
}
}  // namespace partials_detail
static_assert(partials_detail::layout_is_consistent(), "partials layout: a bijection, float4 per quad lane");

// The partial values' storage type PT, widened to / narrowed from fp32 at the same element offsets: fp32 (every
// 16-bit-format kernel), or bf16 (the fp8 64-row kernel: a partial is O / l x k_scale, a convex combination of e4m3
// values, so bf16 cannot overflow and its rounding is far below the format's error; launch_combine's partials_bf16).
// st4 stores the 4 values one writer thread holds for a 16-column group (a float4 of the fp32 form).
template <class PT>
struct PartialValue;
template <>
struct PartialValue<float> {
  __device__ __forceinline__ static float2 ld2(const float* p) { return *reinterpret_cast<const float2*>(p); }
  __device__ __forceinline__ static float4 ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
  __device__ __forceinline__ static void st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
};
template <>
struct PartialValue<__nv_bfloat16> {
  __device__ __forceinline__ static float2 ld2(const __nv_bfloat16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
  }
  __device__ __forceinline__ static float4 ld4(const __nv_bfloat16* p) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
    return make_float4(a.x, a.y, b.x, b.y);
  }
  __device__ __forceinline__ static void st4(__nv_bfloat16* p, float4 v) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
    *reinterpret_cast<uint2*>(p) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
};

}  // namespace mla::sm90::decode

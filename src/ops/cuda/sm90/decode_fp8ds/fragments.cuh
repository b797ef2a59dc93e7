#pragma once
// Register-level pieces of the exact-code fp8_ds kernel (kernel_ws16.cuh): e4m3 pairs -> f16x2 MMA operands
// (exact), and the per-row power-of-two normalizer that makes a bf16 query row exact in f16.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mla::sm90::decode_fp8ds {

// e4m3 -> f16 is exact (every e4m3 value, subnormals included, is an f16 value), so the MMA sees the stored codes
// themselves and the tile scales are applied outside it. Four codes of a word (low byte -> low half of `lo`) ->
// two f16x2. Both halves of a word: split by mov.b32 {lo, hi} inside one asm, so ptxas reads the high half with an operand
// selector (F2FP ... R.H1; H200 SASS, run F1) instead of a shift before the cvt (cvt of `w >> 16` costs a SHF).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t w, uint32_t& lo, uint32_t& hi) {
  asm("{\n.reg .b16 l, h;\nmov.b32 {l, h}, %2;\ncvt.rn.f16x2.e4m3x2 %0, l;\ncvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(w));
}

__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// A bf16 pair times a power of two -> f16x2. Exact while the scaled value is >= 2^-14 (f16's smallest
// normal): bf16 has 8 significant bits, f16 11.
__device__ __forceinline__ uint32_t bf16x2_to_f16x2(uint32_t w, float mul) {
  const __half2 h = __floats2half2_rn(bf16_lo(w) * mul, bf16_hi(w) * mul);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Power-of-two exponent k for a row of |q| <= amax: amax * 2^k lands in [2^14, 2^15), inside f16's range
// (max 65504) with 2^29 of headroom below (values under amax * 2^-28 become f16 subnormals and keep
// fewer bits; their share of a score is < 2^-28). amax 0, Inf or NaN: k = 0 (NaN/Inf propagate as usual).
__device__ __forceinline__ int row_exponent(float amax) {
  const uint32_t e = (__float_as_uint(amax) >> 23) & 0xffu;
  if (amax == 0.f || e == 0xffu) return 0;
  const int k = 14 - (static_cast<int>(e) - 127);
  return k < -126 ? -126 : (k > 126 ? 126 : k);
}
__device__ __forceinline__ float pow2(int k) { return __uint_as_float(static_cast<uint32_t>(k + 127) << 23); }

// Largest power of two <= s for a page's largest tile scale (P' = P * scale / u stays in [0, 2)); 1 for
// s = 0 or subnormal (such a tile contributes ~0), capped at 2^126 so 1/u is a normal float.
__device__ __forceinline__ float scale_unit(float s) {
  uint32_t e = __float_as_uint(s) & 0x7f800000u;
  if (e == 0u) e = 0x3f800000u;
  if (e > (253u << 23)) e = 253u << 23;
  return __uint_as_float(e);
}
__device__ __forceinline__ float inv_pow2(float u) { return __uint_as_float(0x7f000000u - __float_as_uint(u)); }

}  // namespace mla::sm90::decode_fp8ds

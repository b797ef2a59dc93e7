#pragma once
// bf16 / fp16 <-> float on raw 16-bit storage, round to nearest even. One definition for host and device:
// on the device the conversions are the hardware instructions (same rounding), with NaN handled explicitly
// so both sides produce the same NaN bits (tests/gpu/test_fp8_convert.cu checks them bit for bit).
#include <cstdint>

#include "mla/core/fp8.h"  // float_bits / bits_float
#include "mla/core/macros.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace mla {

struct bf16_t { uint16_t bits; };
struct fp16_t { uint16_t bits; };

MLA_HD_INLINE float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

MLA_HD_INLINE uint16_t float_to_bf16(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
#else
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7FFFu + lsb) >> 16);
#endif
}

MLA_HD_INLINE float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13));  // inf / NaN keeping its payload
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  if (e == 0) {
    const float f = static_cast<float>(m) * (1.0f / 16777216.0f);  // m * 2^-24
    return sign ? -f : f;
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
#endif
}

MLA_HD_INLINE uint16_t float_to_fp16(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t mag = u & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | 0x7E00u;                 // NaN
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(x));
#else
  if (mag >= 0x477FF000u) return sign | 0x7C00u;                // rounds to >= 65520: inf
  const int exp = static_cast<int>(mag >> 23) - 127;
  const uint32_t mant = mag & 0x7FFFFFu;
  if (exp >= -14) {
    uint32_t v = (static_cast<uint32_t>(exp + 15) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) ++v;
    return sign | static_cast<uint16_t>(v);
  }
  if (exp < -26) return sign;  // below half the smallest subnormal (2^-25)
  const uint32_t m = mant | 0x800000u;  // |x| * 2^24 = m >> (-1 - exp)
  const int shift = -1 - exp;           // 14..25
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | static_cast<uint16_t>(q);
#endif
}

// Round a float through a storage type (what a kernel does when it casts P to the MMA operand type).
MLA_HD_INLINE float round_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }
MLA_HD_INLINE float round_fp16(float x) { return fp16_to_float(float_to_fp16(x)); }
MLA_HD_INLINE float round_e4m3(float x) { return e4m3_to_float(float_to_e4m3(x)); }

}  // namespace mla

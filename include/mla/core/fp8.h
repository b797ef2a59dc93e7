#pragma once
// FP8 E4M3 ("fn" variant: no infinities, 0x7F/0xFF are NaN, largest finite ±448) conversions that agree
// bit for bit with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) (the cvt.rn.satfinite
// instruction on sm_89+) and with the e4m3 -> float widening. Shared by host references and kernels.
#include <cstdint>
#include <cstring>

#include "mla/core/macros.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#endif

namespace mla {

constexpr float kE4m3Max = 448.0f;
constexpr uint8_t kE4m3NaN = 0x7F;  // canonical NaN that cvt.rn.satfinite produces for any NaN input

MLA_HD_INLINE uint32_t float_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

MLA_HD_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

// float -> e4m3: round to nearest even, saturate finite and infinite values to ±448, NaN -> 0x7F.
MLA_HD_INLINE uint8_t float_to_e4m3(float x) {
#if defined(__CUDA_ARCH__)
  // The hardware conversion: bit-identical to the code below (tests/gpu/test_fp8_convert.cu), one instruction.
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#else
  const uint32_t bits = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return kE4m3NaN;
  if (mag >= 0x43E00000u) return sign | 0x7Eu;  // |x| >= 448 (incl. inf): saturate
  const int exp = static_cast<int>(mag >> 23) - 127;
  const uint32_t mant = mag & 0x7FFFFFu;
  if (exp >= -6) {
    // Normal e4m3: keep 3 of 23 mantissa bits, round the other 20 to nearest even. A carry out of the
    // mantissa bumps the exponent, which is the right encoding; it cannot pass 0x7E since |x| < 448.
    uint32_t v = (static_cast<uint32_t>(exp + 7) << 3) | (mant >> 20);
    const uint32_t rem = mant & 0xFFFFFu;
    if (rem > 0x80000u || (rem == 0x80000u && (v & 1u))) ++v;
    return sign | static_cast<uint8_t>(v);
  }
  // Subnormal e4m3 (step 2^-9): |x| * 2^9 rounded to an integer in 0..8 (8 is the smallest normal, 0x08).
  // Float subnormals are far below 2^-10 and round to zero.
  if (exp < -30) return sign;
  const uint32_t m = mant | 0x800000u;          // |x| = m * 2^(exp-23)
  const int shift = 14 - exp;                   // |x| * 2^9 = m >> shift, shift in 21..44
  if (shift >= 32) return sign;                 // m < 2^24 <= half ulp: rounds to zero
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | static_cast<uint8_t>(q);
#endif
}

// e4m3 -> float (exact: every e4m3 value is a float).
MLA_HD_INLINE float e4m3_to_float(uint8_t v) {
#if defined(__CUDA_ARCH__)
  // cvt.rn.f16x2.e4m3x2 then f16 -> f32, both exact; NaN codes take the host's NaN bits (the hardware
  // would give a canonical NaN, and byte-exact cache round trips compare NaN payloads too).
  if ((v & 0x7Fu) == 0x7Fu) return __uint_as_float((static_cast<uint32_t>(v & 0x80u) << 24) | 0x7FC00000u);
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(v, __NV_E4M3)));
#else
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t e = (v >> 3) & 0xFu;
  const uint32_t m = v & 0x7u;
  if (e == 0xFu && m == 0x7u) return bits_float(sign | 0x7FC00000u);
  if (e == 0) {
    // m * 2^-9, exact in float.
    const float f = static_cast<float>(m) * (1.0f / 512.0f);
    return (v & 0x80u) ? -f : f;
  }
  return bits_float(sign | ((e + 120u) << 23) | (m << 20));
#endif
}

// e4m3_to_float of all 256 codes (host only), for loops over many codes (the CPU references, the tests' noise model),
// where e4m3_to_float's branches cost more than the arithmetic around them.
inline const float* e4m3_decode_table() {
  static const struct Table {
    float v[256];
    Table() {
      for (int c = 0; c < 256; ++c) v[c] = e4m3_to_float(static_cast<uint8_t>(c));
    }
  } table;
  return table.v;
}

}  // namespace mla

#pragma once
// Element and token codecs of the KV-cache formats, shared by the CPU references and the CUDA kernels so
// the two cannot round differently (docs/kv_cache_formats.md is the prose version of this file).
#include <cstdint>
#include <cstring>

#include "mla/core/fp8.h"
#include "mla/core/half.h"
#include "mla/core/kv_format.h"
#include "mla/core/macros.h"

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

// decode_e4m3 multiplies float subnormals (exactly) and encode_e4m3 must round subnormal quotients: both
// need denormal support, i.e. nvcc's default -ftz=false, which --use_fast_math would turn off.
#if defined(__CUDA_ARCH__) && defined(__USE_FAST_MATH__)
#error "cache codecs need IEEE denormals and division: do not build them with --use_fast_math"
#endif

namespace mla::cache {

// Storage tags: the raw type that holds one element, and how it widens to / narrows from float.
struct Bf16 { using raw = uint16_t; };
struct Fp16 { using raw = uint16_t; };
struct Fp32 { using raw = float; };

MLA_HD_INLINE float to_float(Bf16, uint16_t v) { return bf16_to_float(v); }
MLA_HD_INLINE float to_float(Fp16, uint16_t v) { return fp16_to_float(v); }
MLA_HD_INLINE float to_float(Fp32, float v) { return v; }
MLA_HD_INLINE uint16_t from_float(Bf16, float x) { return float_to_bf16(x); }
MLA_HD_INLINE uint16_t from_float(Fp16, float x) { return float_to_fp16(x); }
MLA_HD_INLINE float from_float(Fp32, float x) { return x; }

template <class A, class B> struct same_tag { static constexpr bool value = false; };
template <class A> struct same_tag<A, A> { static constexpr bool value = true; };

// One element from storage type In to storage type Out. Equal types copy the bits (NaN payloads included),
// so a bf16 model writing a bf16 cache is a pure copy; otherwise widen to float (exact) and round RNE.
template <class In, class Out>
MLA_HD_INLINE typename Out::raw convert(typename In::raw v) {
  if constexpr (same_tag<In, Out>::value) {
    return v;
  } else {
    return from_float(Out{}, to_float(In{}, v));
  }
}

// IEEE float division rounded to nearest even on both sides: nvcc's default is IEEE division too, but the
// intrinsic keeps it so under --use_fast_math.
MLA_HD_INLINE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// satfinite_rne(x / scale) as an e4m3 code. The device instruction (cvt.rn.satfinite.e4m3x2.f32) and the
// host codec agree bit for bit (tests/gpu/test_fp8_convert.cu proves it on the H200).
MLA_HD_INLINE uint8_t encode_e4m3(float x, float scale) {
  const float q = div_rn(x, scale);
#if defined(__CUDA_ARCH__)
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
#else
  return float_to_e4m3(q);
#endif
}

// |x| when finite, else 0: the amax of a tile or tensor ignores NaN and ±inf, so one bad value cannot
// flatten (inf) or poison (NaN) the scale of its neighbours. NaN still encodes as NaN, ±inf as ±448.
MLA_HD_INLINE float finite_abs(float x) {
  const uint32_t mag = float_bits(x) & 0x7FFFFFFFu;
  return mag < 0x7F800000u ? bits_float(mag) : 0.f;
}

// fp8_ds tile scale from the tile's amax: amax / 448 (IEEE division), or 1.0 when that is 0 (an all-zero
// tile, or amax so small the quotient underflows), so that x / scale never divides by zero and zeros
// stay zeros. Readers dequantize as e4m3_to_float(code) * scale.
MLA_HD_INLINE float fp8_ds_tile_scale(float amax) {
  const float s = div_rn(amax, kE4m3Max);
  return s > 0.f ? s : 1.f;
}

// Dequantize one e4m3 code with a scale (fp8: k_scale, fp8_ds: the tile scale).
// The code's 7 magnitude bits placed at float bit 20 read as a float of exponent e - 127 (e = the code's
// exponent field; e = 0 gives a float subnormal), so multiplying by 2^120 rebiases it exactly to the e4m3
// value, subnormals included: one shift and one multiply instead of a branchy decode (this runs 576 times
// per gathered token). Then one rounded product with the scale, as the format specifies.
// A NaN code skips the arithmetic: GPU arithmetic returns the canonical NaN 0x7FFFFFFF while x86 keeps the
// operand's payload and sign, so the bytes would differ; both return 0x7FC00000 with the code's sign, the
// NaN e4m3_to_float gives.
MLA_HD_INLINE float decode_e4m3(uint8_t code, float scale) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t mag = code & 0x7Fu;
  if (mag == 0x7Fu) return bits_float(sign | 0x7FC00000u);
  const float v = bits_float(sign | (mag << 20)) * 0x1p120f;  // exact
  return v * scale;
}

// fp8_ds token readers (Fp8DsLayout), for code that reads a token value by value: the CPU references of decode and
// gather, and the tests' own references. The kernels read whole tiles through their own vectorized paths. A token's
// bytes need no alignment (memcpy).
// The scale of latent tile `tile` (0..3).
MLA_HD_INLINE float fp8_ds_stored_scale(const uint8_t* tok, int tile) {
  float s;
  memcpy(&s, tok + Fp8DsLayout::kScalesOffset + 4 * tile, sizeof s);
  return s;
}
// Latent dim d (0..511) dequantized as the format specifies: the e4m3 code times its tile's scale, one fp32 product.
MLA_HD_INLINE float fp8_ds_latent(const uint8_t* tok, int d) {
  return decode_e4m3(tok[d], fp8_ds_stored_scale(tok, d / Fp8DsLayout::kTileSize));
}
// RoPE dim r (0..63) as its stored bf16 bits.
MLA_HD_INLINE uint16_t fp8_ds_rope_bits(const uint8_t* tok, int r) {
  uint16_t v;
  memcpy(&v, tok + Fp8DsLayout::kRopeOffset + 2 * r, sizeof v);
  return v;
}

}  // namespace mla::cache

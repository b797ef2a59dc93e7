#pragma once
// Word-at-a-time decoders of the gather: 4 e4m3 codes or 2 bf16/fp16 values of one 32-bit word to the
// output dtype, bit for bit what the shared codecs (ops/common/cache_codec.h) give value by value, in about
// a quarter of the instructions (the gather converts 576 values per token: the codec's ~15 instructions a
// value were half the SM's issue slots at the copy ceiling).
//
// Fast path: the paired hardware conversions. e4m3 -> f16 (cvt.rn.f16x2.e4m3x2) is exact for every
// non-NaN code, f16 -> f32 is exact, so e4m3 -> f32 equals decode_e4m3's exact value and the product with
// the scale is the same single rounding; f32 -> bf16 pairs (cvt.rn.bf16x2.f32) round like
// __float2bfloat16_rn. NaN inputs are the only values where hardware and codec differ (the hardware
// returns a canonical NaN, the codecs a defined sign and payload): a word holding one takes the shared
// codec value by value. Real caches hold no NaN codes; the tests' random bytes hold them in ~3 % of words,
// so both paths are compared with the CPU reference.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "ops/common/cache_codec.h"

namespace mla::cache {

// Two floats to the output dtype: y[0] = a, y[1] = b.
template <class Out>
__device__ __forceinline__ void store_pair(float a, float b, typename Out::raw* y) {
  if constexpr (same_tag<Out, Fp32>::value) {
    y[0] = a;
    y[1] = b;
  } else {
    static_assert(same_tag<Out, Bf16>::value, "gather outputs bf16 or fp32");
    const __nv_bfloat162 r = __floats2bfloat162_rn(a, b);  // .x = a in the low half
    y[0] = __bfloat16_as_ushort(r.x);
    y[1] = __bfloat16_as_ushort(r.y);
  }
}

// The 4 e4m3 codes of w (code j in byte j), each as decode_e4m3(code, scale) rounded to Out: y[0..3].
template <class Out>
__device__ __forceinline__ void dequant_e4m3x4(uint32_t w, float scale, typename Out::raw* y) {
  // A NaN code has magnitude 0x7F: adding 1 to each 7-bit magnitude sets bit 7 of exactly those bytes.
  const uint32_t nan_bytes = ((w & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u;
  if (nan_bytes == 0) {
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * p)), __NV_E4M3);
      const float2 f = __half22float2(__half2(h));
      store_pair<Out>(f.x * scale, f.y * scale, y + 2 * p);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) y[j] = from_float(Out{}, decode_e4m3(static_cast<uint8_t>(w >> (8 * j)), scale));
  }
}

// The 2 16-bit values of w (value j in half j) of storage type In, converted like convert<In, Out>: y[0..1].
template <class In, class Out>
__device__ __forceinline__ void convert_x2(uint32_t w, typename Out::raw* y) {
  if constexpr (same_tag<In, Fp16>::value) {
    // fp16 NaN: magnitude above 0x7C00; adding 0x3FF carries into bit 15 of exactly those halves.
    const uint32_t nan_halves = ((w & 0x7FFF7FFFu) + 0x03FF03FFu) & 0x80008000u;
    if (nan_halves == 0) {
      __half2_raw h;
      h.x = static_cast<unsigned short>(w);
      h.y = static_cast<unsigned short>(w >> 16);
      const float2 f = __half22float2(__half2(h));  // exact, infinities included
      store_pair<Out>(f.x, f.y, y);
      return;
    }
  }
  // bf16 -> bf16 is a bit copy, bf16 -> fp32 a shift: the shared codec is already minimal there.
  y[0] = convert<In, Out>(static_cast<uint16_t>(w));
  y[1] = convert<In, Out>(static_cast<uint16_t>(w >> 16));
}

}  // namespace mla::cache

#pragma once
// Eight floats -> eight e4m3 codes packed little-endian in a uint64 (element j in byte j), with the paired
// conversion instruction cvt.rn.satfinite.e4m3x2.f32: half the conversions of eight scalar calls, and the
// same instruction (hence the same bits) that __nv_cvt_float_to_fp8 issues with a zero partner.
#include <cuda_fp8.h>

#include <cstdint>

namespace mla::cache {

__device__ __forceinline__ uint64_t pack_e4m3x8(const float (&q)[8]) {
  uint64_t u = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    // __nv_cvt_float2_to_fp8x2 puts .x in the low byte and .y in the high byte.
    const __nv_fp8x2_storage_t two =
        __nv_cvt_float2_to_fp8x2(make_float2(q[2 * j], q[2 * j + 1]), __NV_SATFINITE, __NV_E4M3);
    u |= static_cast<uint64_t>(two) << (16 * j);
  }
  return u;
}

}  // namespace mla::cache

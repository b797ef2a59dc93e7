#pragma once
// The N = 16 wgmma atoms of the warp-specialized fp8_ds kernel (config_ws16.h): A from registers, B (16 x 16, K-major,
// 128B swizzle) from a shared-memory descriptor, in the layouts decode/wgmma_n16.h describes.
#include <cstdint>

#include "ops/cuda/sm90/decode/wgmma_n16.h"

namespace mla::sm90::decode_fp8ds::ws16 {

// (decode/wgmma_n16.h, shared with the 16-bit 16-row kernel.)
using decode::wgmma_m64n16k16_bf16_rs;
using decode::wgmma_m64n16k16_f16_rs;

// Pins register values (A fragments) before this point, so the compiler does not sink their computation past the
// wgmma_fence (ptxas would then serialize the wgmmas).
template <int N>
__device__ __forceinline__ void pin(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

}  // namespace mla::sm90::decode_fp8ds::ws16

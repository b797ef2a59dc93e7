#pragma once
// The N = 16 wgmma atoms of the warp-specialized fp8_ds kernel (config_ws16.h): A from registers, B (16 x 16, K-major,
// 128B swizzle) from a shared-memory descriptor, in the layouts decode/wgmma_n16.h describes.
#include <cstdint>

#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode/wgmma_n16.h"

namespace mla::sm90::decode_fp8ds::ws16 {

// (decode/wgmma_n16.h, shared with the 16-bit 16-row kernel.)
using decode::wgmma_m64n16k16_bf16_rs;
using decode::wgmma_m64n16k16_f16_rs;
using decode::fence_operands;  // also pins A fragments (uint32_t) before a wgmma fence

}  // namespace mla::sm90::decode_fp8ds::ws16

#pragma once
// Device side of the decode timeline (include/mla/ops/decode_timeline.h): globaltimer stamps per CTA.
#include <cstdint>

#include "mla/ops/decode_timeline.h"

namespace mla::sm90::decode {

__device__ __forceinline__ unsigned long long timeline_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned timeline_smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return s;
}
// Slot base of this decode CTA, or nullptr past the buffer's decode CTAs.
__device__ __forceinline__ unsigned long long* timeline_decode_cta(unsigned long long* tl) {
  const unsigned i = blockIdx.y * gridDim.x + blockIdx.x;
  return i < static_cast<unsigned>(cuda::kTimelineDecodeCtas) ? tl + 4 * i : nullptr;
}
__device__ __forceinline__ unsigned long long* timeline_combine_cta(unsigned long long* tl) {
  return blockIdx.x < static_cast<unsigned>(cuda::kTimelineCombineCtas)
             ? tl + 4 * (cuda::kTimelineDecodeCtas + blockIdx.x)
             : nullptr;
}

}  // namespace mla::sm90::decode

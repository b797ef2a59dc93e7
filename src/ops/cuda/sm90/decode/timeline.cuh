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
  return i < static_cast<unsigned>(cuda::kTimelineDecodeCtas) ? tl + cuda::kTimelineDecodeStride * i : nullptr;
}
__device__ __forceinline__ unsigned long long* timeline_combine_cta(unsigned long long* tl) {
  return blockIdx.x < static_cast<unsigned>(cuda::kTimelineCombineCtas)
             ? tl + cuda::kTimelineDecodeStride * cuda::kTimelineDecodeCtas + 4 * blockIdx.x
             : nullptr;
}

// Free marks k in [kTimelineFirstMark, kTimelineDecodeStride) of this decode CTA: the first (atomicCAS from 0) or
// the latest (atomicMax) time a calling thread passed. Not inlined, so a diagnostics build keeps the kernel's
// register allocation close to the normal one; the caller chooses which threads call.
inline __device__ __noinline__ void timeline_mark_first(unsigned long long* tl, int k) {
  unsigned long long* t = timeline_decode_cta(tl);
  if (t != nullptr) atomicCAS(t + k, 0ull, timeline_now());
}
inline __device__ __noinline__ void timeline_mark_last(unsigned long long* tl, int k) {
  unsigned long long* t = timeline_decode_cta(tl);
  if (t != nullptr) atomicMax(t + k, timeline_now());
}

}  // namespace mla::sm90::decode

// Kernel code marks without #ifdef: `MLA_TL_MARK_FIRST(p.timeline, 5);` is nothing in a normal build.
#ifdef MLA_DECODE_TIMELINE
#define MLA_TL_MARK_FIRST(tl, k) \
  do {                           \
    if ((tl) != nullptr) ::mla::sm90::decode::timeline_mark_first((tl), (k)); \
  } while (0)
#define MLA_TL_MARK_LAST(tl, k) \
  do {                          \
    if ((tl) != nullptr) ::mla::sm90::decode::timeline_mark_last((tl), (k)); \
  } while (0)
#else
#define MLA_TL_MARK_FIRST(tl, k) \
  do {                           \
  } while (0)
#define MLA_TL_MARK_LAST(tl, k) \
  do {                          \
  } while (0)
#endif

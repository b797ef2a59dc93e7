#pragma once
// Device side of the decode timeline (include/mla/ops/decode_timeline.h): globaltimer stamps per CTA.
#include <cstdint>

#include "mla/ops/decode_timeline.h"
#include "ops/cuda/sm90/decode/params.h"

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
// A k outside the free marks would overwrite this CTA's fixed slots or the next CTA's start stamp: trap instead
// (timeline builds only; some callers pick k at run time, so it cannot be a static_assert).
__device__ __forceinline__ void timeline_check_mark(int k) {
  if (k < cuda::kTimelineFirstMark || k >= cuda::kTimelineDecodeStride) asm volatile("trap;");
}
inline __device__ __noinline__ void timeline_mark_first(unsigned long long* tl, int k) {
  timeline_check_mark(k);
  unsigned long long* t = timeline_decode_cta(tl);
  if (t != nullptr) atomicCAS(t + k, 0ull, timeline_now());
}
inline __device__ __noinline__ void timeline_mark_last(unsigned long long* tl, int k) {
  timeline_check_mark(k);
  unsigned long long* t = timeline_decode_cta(tl);
  if (t != nullptr) atomicMax(t + k, timeline_now());
}

// Per-CTA sums of a kernel's timeline (the 64-row warp-specialized kernels' marks 12..15: timeline_ws64.cuh,
// ../decode_fp8/timeline_ws.cuh; each kernel names its three sums): a leader thread per consumer warpgroup adds the
// ns of up to three kinds of wait / phase and counts its segments, and flush() writes them once at its end as
// (the CTA's start stamp [0]) + value, atomicMax over the leaders, so `m_k - start` on a stderr line of
// bench_decode --timeline is the value (m12 - start: segments, in µs units). Every member is empty in a normal
// build, so a kernel keeps its calls without #ifdef (init takes the params: their timeline member exists only in
// a timeline build) and its code is the same as without them.
#ifdef MLA_DECODE_TIMELINE
struct TimelineSums {
  unsigned long long* tl = nullptr;  // nullptr: this thread does not stamp
  unsigned long long acc[3] = {0, 0, 0};
  int segs = 0;
  __device__ void init(const DecodeKernelParams& p, bool leader) { tl = leader ? p.timeline : nullptr; }
  __device__ unsigned long long now() const { return tl != nullptr ? timeline_now() : 0ull; }
  __device__ void add(int i, unsigned long long t0) {
    if (tl != nullptr) acc[i] += timeline_now() - t0;
  }
  __device__ void seg() { ++segs; }
  __device__ void first(int k) const {
    if (tl != nullptr) timeline_mark_first(tl, k);
  }
  __device__ void last(int k) const {
    if (tl != nullptr) timeline_mark_last(tl, k);
  }
  __device__ __noinline__ void flush() const {
    if (tl == nullptr) return;
    unsigned long long* t = timeline_decode_cta(tl);
    if (t == nullptr) return;
    const unsigned long long s = *reinterpret_cast<volatile unsigned long long*>(t);  // [0], by thread 0 long ago
    atomicMax(t + 12, s + 1000ull * segs);
    for (int i = 0; i < 3; ++i) atomicMax(t + 13 + i, s + acc[i]);
  }
};
#else
struct TimelineSums {
  __device__ void init(const DecodeKernelParams&, bool) {}  // p.timeline exists only in a timeline build
  __device__ unsigned long long now() const { return 0ull; }
  __device__ void add(int, unsigned long long) {}
  __device__ void seg() {}
  __device__ void first(int) const {}
  __device__ void last(int) const {}
  __device__ void flush() const {}
};
#endif

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

#pragma once
// Diagnostics of the 16-bit 64-row kernel (kernel_ws.cuh) for bench_decode --timeline (mla/ops/decode_timeline.h):
// what its free marks 4..15 mean. Compiled in only with -DMLA_DECODE_TIMELINE; in a normal build every member is
// empty and the kernel is the same as without them. Marks 4..8 and 12..14 mean what they mean in the fp8 64-row
// kernel (decode_fp8/timeline_ws.cuh), so the two logs compare.
//
// Stamps (µs after the first decode CTA's start in bench's summary; every CTA's on stderr):
//   4 FIRST  consumer: slab 0 of its first own page landed (after its Q: first KV page landed, consumer side)
//   5 FIRST  consumer: the first S done (its wgmma wait returned)
//   6 LAST   consumer: a sequence switch (the owner of a segment's first page starts writing the previous one)
//   7 LAST   consumer: an epilogue started (the latest: the part's last segment's)
//   8 LAST   consumer: CTA done (the last epilogue's stores issued)
//   9 FIRST  consumer: Q of segment 0 landed (acquire_q returned)
//  10 LAST   producer: the part's last TMA issued
//  11 LAST   producer: Q of a later segment issued (its q_empty wait returned)
// Per-CTA sums, written once at the end as (CTA start stamp [0]) + value, so `m_k - start` on a stderr line is the
// value; the max over the two consumer warpgroups' thread 0:
//  12 segments written by the CTA, in µs units (m12 - start = count)
//  13 ns in epilogues (including the P.V wait right before a switch's epilogue)
//  14 ns from the top of a segment's first own page to its S done (the other's P.V, epilogue, Q wait, page, S)
//  15 ns in P-ready waits (wait_other: the other warpgroup's S -> softmax -> P chain)
#include <cstdint>

#ifdef MLA_DECODE_TIMELINE
#include "ops/cuda/sm90/decode/timeline.cuh"
#endif

namespace mla::sm90::decode {

enum Ws64TlSum { kTl64Epilogue = 0, kTl64SegStart = 1, kTl64PReady = 2 };

#ifdef MLA_DECODE_TIMELINE
struct Ws64Timeline {
  unsigned long long* tl = nullptr;  // nullptr: this thread does not stamp
  unsigned long long acc[3] = {0, 0, 0};
  int segs = 0;
  __device__ void init(unsigned long long* t, bool leader) { tl = leader ? t : nullptr; }
  __device__ unsigned long long now() const { return tl != nullptr ? timeline_now() : 0ull; }
  __device__ void add(Ws64TlSum i, unsigned long long t0) {
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
struct Ws64Timeline {
  __device__ void init(unsigned long long*, bool) {}
  __device__ unsigned long long now() const { return 0ull; }
  __device__ void add(Ws64TlSum, unsigned long long) {}
  __device__ void seg() {}
  __device__ void first(int) const {}
  __device__ void last(int) const {}
  __device__ void flush() const {}
};
#endif

}  // namespace mla::sm90::decode

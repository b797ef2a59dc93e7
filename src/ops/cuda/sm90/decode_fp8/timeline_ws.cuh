#pragma once
// Diagnostics of the 64-row fp8 kernel (kernel_ws.cuh) for bench_decode --timeline (mla/ops/decode_timeline.h):
// what its free marks 4..15 mean. Compiled in only with -DMLA_DECODE_TIMELINE; in a normal build every member is
// empty and the kernel is the same as without them.
//
// Stamps (µs after the first decode CTA's start in bench's summary; every CTA's on stderr):
//   4 FIRST  consumer: the k_full wait of its first own page returned (first K page landed, consumer side)
//   5 FIRST  consumer: the first S done (its wgmma wait returned)
//   6 LAST   consumer: a sequence switch (the owner of a segment's first page starts writing the previous one)
//   7 LAST   consumer: an epilogue started (the latest: the part's last segment's)
//   8 LAST   consumer: CTA done (the last epilogue's stores issued)
//   9 FIRST  transposer: first K page landed (its k_full wait returned)
//  10 LAST   producer: the part's last TMA issued
//  11 LAST   transposer: the last V^T stage written
// Per-CTA sums, written once at the end as (CTA start stamp [0]) + value, so `m_k - start` on a stderr line is the
// value; the max over the two consumer warpgroups' thread 0:
//  12 segments written by the CTA, in µs units (m12 - start = count)
//  13 ns in epilogues (including the P.V wait right before a switch's epilogue)
//  14 ns from the top of a segment's first own page to its S done (Q wait, first-page wait, S)
//  15 ns in k_full waits of own pages (every page)
#include <cstdint>

#include "ops/cuda/sm90/decode/params.h"
#ifdef MLA_DECODE_TIMELINE
#include "ops/cuda/sm90/decode/timeline.cuh"
#endif

namespace mla::sm90::decode_fp8 {

enum WsTlSum { kTlEpilogue = 0, kTlSegStart = 1, kTlKWait = 2 };

#ifdef MLA_DECODE_TIMELINE
struct WsTimeline {
  unsigned long long* tl = nullptr;  // nullptr: this thread does not stamp
  unsigned long long acc[3] = {0, 0, 0};
  int segs = 0;
  __device__ void init(const decode::DecodeKernelParams& p, bool leader) { tl = leader ? p.timeline : nullptr; }
  __device__ unsigned long long now() const { return tl != nullptr ? decode::timeline_now() : 0ull; }
  __device__ void add(WsTlSum i, unsigned long long t0) {
    if (tl != nullptr) acc[i] += decode::timeline_now() - t0;
  }
  __device__ void seg() { ++segs; }
  __device__ void first(int k) const {
    if (tl != nullptr) decode::timeline_mark_first(tl, k);
  }
  __device__ void last(int k) const {
    if (tl != nullptr) decode::timeline_mark_last(tl, k);
  }
  __device__ __noinline__ void flush() const {
    if (tl == nullptr) return;
    unsigned long long* t = decode::timeline_decode_cta(tl);
    if (t == nullptr) return;
    const unsigned long long s = *reinterpret_cast<volatile unsigned long long*>(t);  // [0], by thread 0 long ago
    atomicMax(t + 12, s + 1000ull * segs);
    for (int i = 0; i < 3; ++i) atomicMax(t + 13 + i, s + acc[i]);
  }
};
#else
struct WsTimeline {
  __device__ void init(const decode::DecodeKernelParams&, bool) {}
  __device__ unsigned long long now() const { return 0ull; }
  __device__ void add(WsTlSum, unsigned long long) {}
  __device__ void seg() {}
  __device__ void first(int) const {}
  __device__ void last(int) const {}
  __device__ void flush() const {}
};
#endif

}  // namespace mla::sm90::decode_fp8

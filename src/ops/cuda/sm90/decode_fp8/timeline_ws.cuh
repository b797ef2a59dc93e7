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
#include "ops/cuda/sm90/decode/timeline.cuh"  // TimelineSums (empty in a normal build)

namespace mla::sm90::decode_fp8 {

// The three sums of marks 13..15 (TimelineSums::add).
enum WsTlSum { kTlEpilogue = 0, kTlSegStart = 1, kTlKWait = 2 };

using WsTimeline = decode::TimelineSums;

}  // namespace mla::sm90::decode_fp8

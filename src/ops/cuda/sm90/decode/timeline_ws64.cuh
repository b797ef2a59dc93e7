#pragma once
// Diagnostics of the 16-bit 64-row kernel (kernel_ws.cuh) for bench_decode --timeline (mla/ops/decode_timeline.h):
// what its free marks 4..15 mean. Compiled in only with -DMLA_DECODE_TIMELINE; in a normal build every member is
// empty and the kernel is the same as without them. Marks 4..8, 12 and 13 mean what they mean in the fp8 64-row
// kernel (decode_fp8/timeline_ws.cuh), so the two logs compare; 14 does not quite: here a segment's start clock
// runs from the top of its first own page, so it includes the switch's P.V and epilogue, which the fp8 kernel
// (since a621b07) finishes before its clock starts.
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
#include "ops/cuda/sm90/decode/timeline.cuh"  // TimelineSums (empty in a normal build)

namespace mla::sm90::decode {

// The three sums of marks 13..15 (TimelineSums::add).
enum Ws64TlSum { kTl64Epilogue = 0, kTl64SegStart = 1, kTl64PReady = 2 };

using Ws64Timeline = TimelineSums;

}  // namespace mla::sm90::decode

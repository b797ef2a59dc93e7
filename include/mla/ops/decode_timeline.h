#pragma once
// Diagnostics of a decode call's fixed costs (bench_decode --timeline; off unless a buffer is set): while set,
// every mla_decode launch stamps %globaltimer (ns) into the buffer, per CTA:
//   decode CTA i = blockIdx.y * gridDim.x + blockIdx.x (i < kTimelineDecodeCtas), at slot kTimelineDecodeStride i:
//     [0] PartCursor::init entered (thread 0)      [1] the first KV page's number known (start chain done)
//     [2] the part's last item walked (latest cursor of the CTA)   [3] the SM it ran on
//     [4 .. kTimelineDecodeStride) free marks a kernel sets where it wants to see time go (MLA_TL_MARK_FIRST /
//     MLA_TL_MARK_LAST in ops/cuda/sm90/decode/timeline.cuh: the first or the latest time any thread passed;
//     each kernel documents what its marks mean); bench_decode --timeline prints min / median / max per mark
//   combine CTA j (j < kTimelineCombineCtas), at slot kTimelineDecodeStride kTimelineDecodeCtas + 4 j:
//     [0] entered (before griddepcontrol.wait)   [1] wait returned   [2] done   [3] the SM
// The caller zeroes the buffer before a call. Compiled in only with -DMLA_DECODE_TIMELINE (CUDA sources of a
// diagnostics build); otherwise the kernels are as without it and the buffer is never written.
#include <cstdint>

namespace mla::cuda {

#ifdef MLA_DECODE_TIMELINE
constexpr bool kDecodeTimelineCompiled = true;
#else
constexpr bool kDecodeTimelineCompiled = false;
#endif
constexpr int kTimelineDecodeCtas = 1024;
constexpr int kTimelineCombineCtas = 8192;
constexpr int kTimelineDecodeStride = 16;  // uint64 slots per decode CTA: 4 fixed + 12 free marks
constexpr int kTimelineFirstMark = 4;
constexpr int kTimelineSlots = kTimelineDecodeStride * kTimelineDecodeCtas + 4 * kTimelineCombineCtas;  // uint64 each

// Device buffer of kTimelineSlots uint64 (nullptr: off), read by mla_decode when it builds the kernel params.
void set_decode_timeline(unsigned long long* device_buffer);
unsigned long long* decode_timeline();

}  // namespace mla::cuda

#pragma once
// plan_decode: the split-KV schedule of one decode step, computed once and reused by every layer.
//
// Work is counted in 64-token KV blocks. Sequence b costs nblk(b) + seq_cost (the fixed price of
// setting up a sequence and writing its result); the batch's total cost is cut into `num_parts` equal
// intervals, one per CTA column of the decode grid. A part therefore covers a contiguous run of
// (sequence, block) pairs, possibly starting and ending mid-sequence; a sequence touched by k parts
// has k splits whose partial results the combine step merges (k == 1: the kernel writes `out` itself).
//
// The geometry (num_parts, grid, workspace size) depends only on shapes and the SM count, so buffers
// are fixed-size and a captured CUDA graph stays valid across steps; only the contents depend on seqlens.
#include <cstddef>
#include <cstdint>

#include "mla/core/macros.h"
#include "mla/core/mla_shapes.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

// Query rows one CTA handles: s_q * h_q rows are cut into tiles of 64 (one wgmma M tile).
constexpr int kDecodeRowsPerCta = 64;
constexpr int kPlanPartInts = 8;  // ints per part record (padded for 32-byte loads)

// Fields of one part record: the part covers blocks [begin_block, nblk) of begin_batch, all blocks of
// the batches strictly between, and blocks [0, end_block) of end_batch (end_block == 0: none of it).
enum PlanPartField : int {
  kPartBeginBatch = 0,
  kPartBeginBlock = 1,
  kPartEndBatch = 2,
  kPartEndBlock = 3,
  kPartFirstSplit = 4,  // split index of this part within begin_batch (0 if the part starts it)
};

struct DecodePlanTuning {
  int seq_cost = 4;       // a sequence's fixed cost, in blocks
  int min_part_cost = 1;  // no part gets less than this, so tiny batches don't split into slivers
};

// Shape-only geometry of a decode step's plan.
struct DecodePlanGeometry {
  int batch = 0;
  int s_q = 0;
  int h_q = 0;
  int num_head_tiles = 0;  // ceil(s_q * h_q / 64): grid.y
  int num_parts = 0;       // grid.x
  int max_splits = 0;      // batch + num_parts - 1: partial-result slots the workspace must hold
};

// Shape validation + geometry. num_sms: the device's multiprocessor count (132 on H200).
Status decode_plan_geometry(int batch, int s_q, int h_q, int num_sms, DecodePlanGeometry* out);

// The plan's contents, in caller-owned buffers (host for the reference, device for the kernels).
struct DecodePlanView {
  int32_t* parts = nullptr;          // [num_parts, kPlanPartInts]
  int32_t* split_offsets = nullptr;  // [batch + 1]: splits of sequence b are slots [off[b], off[b+1])
  int num_parts = 0;
};

// Workspace for split partials: o_accum fp32 [max_splits, s_q * h_q, 512] at offset 0, then lse_accum
// fp32 [max_splits, s_q * h_q] at decode_workspace_lse_offset(g). Fixed-size from the geometry. (The plan
// buffers are separate: parts int32 [num_parts * kPlanPartInts], split_offsets int32 [batch + 1].)
size_t decode_workspace_bytes(const DecodePlanGeometry& g);
inline size_t decode_workspace_lse_offset(const DecodePlanGeometry& g) {
  const size_t o = static_cast<size_t>(g.max_splits) * g.s_q * g.h_q * kDimV * sizeof(float);
  return (o + 255) / 256 * 256;
}

MLA_HD_INLINE int decode_num_blocks(int seqlen) { return seqlen > 0 ? (seqlen + kDecodePageSize - 1) / kDecodePageSize : 0; }

// The one definition of the schedule, run by the CPU reference and (in one thread) by the CUDA plan
// kernel. seqlens: [batch]; writes parts [num_parts, 8] and split_offsets [batch + 1].
MLA_HD inline void compute_decode_plan(const int32_t* seqlens, int batch, int num_parts, DecodePlanTuning tune,
                                       int32_t* parts, int32_t* split_offsets) {
  int64_t total = 0;
  for (int b = 0; b < batch; ++b) {
    const int n = decode_num_blocks(seqlens[b]);
    total += n > 0 ? n + tune.seq_cost : 0;
    split_offsets[b] = 0;  // used as a per-sequence split counter below
  }
  int64_t per_part = (total + num_parts - 1) / num_parts;
  if (per_part < tune.min_part_cost) per_part = tune.min_part_cost;

  // Maps a cost position to (batch, block) with a cursor that only moves forward (positions ascend).
  int cur_b = 0;
  int64_t cur_start = 0;  // cost position where cur_b begins
  auto locate = [&](int64_t pos, int* out_b, int* out_blk) {
    while (cur_b < batch) {
      const int n = decode_num_blocks(seqlens[cur_b]);
      const int64_t cost = n > 0 ? n + tune.seq_cost : 0;
      if (pos < cur_start + cost) break;
      cur_start += cost;
      ++cur_b;
    }
    if (cur_b >= batch) { *out_b = batch; *out_blk = 0; return; }
    const int64_t blk = pos - cur_start - tune.seq_cost;
    *out_b = cur_b;
    *out_blk = blk < 0 ? 0 : static_cast<int>(blk);
  };

  int end_b = 0, end_blk = 0;
  locate(0, &end_b, &end_blk);
  for (int p = 0; p < num_parts; ++p) {
    const int begin_b = end_b, begin_blk = end_blk;
    int64_t end_pos = (p + 1) * per_part;
    if (end_pos > total || p == num_parts - 1) end_pos = total;
    locate(end_pos, &end_b, &end_blk);
    int32_t* rec = parts + static_cast<int64_t>(p) * kPlanPartInts;
    rec[kPartBeginBatch] = begin_b;
    rec[kPartBeginBlock] = begin_blk;
    rec[kPartEndBatch] = end_b;
    rec[kPartEndBlock] = end_blk;
    rec[kPartFirstSplit] = begin_b < batch ? split_offsets[begin_b] : 0;
    for (int f = kPartFirstSplit + 1; f < kPlanPartInts; ++f) rec[f] = 0;
    for (int b = begin_b; b <= end_b && b < batch; ++b) {
      const int lo = b == begin_b ? begin_blk : 0;
      const int hi = b == end_b ? end_blk : decode_num_blocks(seqlens[b]);
      if (lo < hi) ++split_offsets[b];
    }
  }
  // Counts -> exclusive prefix sums.
  int32_t acc = 0;
  for (int b = 0; b < batch; ++b) {
    const int32_t c = split_offsets[b];
    split_offsets[b] = acc;
    acc += c;
  }
  split_offsets[batch] = acc;
}

namespace ref {
// Host plan: seqlens host [batch] int32 -> plan (host buffers sized from the geometry).
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan,
                   DecodePlanTuning tune = {});
}  // namespace ref

namespace cuda {
// Device plan: seqlens device int32 [batch] -> plan in device buffers, on `stream`, no host sync, no
// allocation (CUDA-graph safe). Produces exactly what compute_decode_plan produces on the host.
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan, Stream stream,
                   DecodePlanTuning tune = {});
}  // namespace cuda

}  // namespace mla

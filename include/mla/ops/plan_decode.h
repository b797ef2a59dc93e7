#pragma once
// plan_decode: the split-KV schedule of one decode step, computed once and reused by every layer.
//
// Work is counted in 64-token KV blocks. Sequence b costs nblk(b) + seq_cost (the fixed price of
// setting up a sequence and writing its result); the batch's total cost is cut into `num_parts` about
// equal intervals, one per CTA column of the decode grid, whose ends move to sequence ends where that
// does not lengthen the longest part (compute_decode_plan). A part therefore covers a contiguous run of
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
  // Start hints: what a decode CTA would otherwise fetch in two dependent global loads (seqlens, then the
  // block table) before its first KV page can be requested. -1: not given, the kernel loads it itself.
  kPartFirstSeqlen = 5,  // seqlens[begin_batch] (-1 when begin_batch == batch)
  kPartFirstPage = 6,    // physical page of the part's first item (begin_batch, begin_block)
  kPartSecondPage = 7,   // ... of its second item, when that is (begin_batch, begin_block + 1)
};

// The block table [batch, stride] the page hints come from; data == nullptr: no page hints (fields 6-7 = -1).
struct DecodePlanPages {
  const int32_t* data = nullptr;
  int64_t stride = 0;
};

struct DecodePlanTuning {
  int seq_cost = 4;       // a sequence's fixed cost, in blocks
  int min_part_cost = 1;  // no part gets less than this, so tiny batches don't split into slivers
  int split_cost = 4;     // a cut's price per piece, in blocks: fp32 partials written, then merged by the combine
};

// Shape-only geometry of a decode step's plan.
struct DecodePlanGeometry {
  int batch = 0;
  int s_q = 0;
  int h_q = 0;
  int num_head_tiles = 0;  // ceil(s_q * h_q / 64): grid.y
  int num_parts = 0;       // grid.x
  int max_splits = 0;      // batch + num_parts - 1: partial-result slots the workspace must hold
  // What a split costs beyond DecodePlanTuning::split_cost, in blocks (decode_split_price): charged per true
  // split, and added to per_part when decode_plan_snap picks a sequence's piece count, so at h_q 128 a
  // sequence of under ~1.5 x (per_part + 3) is not cut (b32 s512: 8 pages stay whole instead of 2 x 128 KB
  // of fp32 partials per head tile).
  int split_price = 0;
};

// Shape validation + geometry. num_sms: the device's multiprocessor count (132 on H200).
Status decode_plan_geometry(int batch, int s_q, int h_q, int num_sms, DecodePlanGeometry* out);

// split_price of a head tile of `rows` query rows (<= 64): the fp32 partial one piece writes and the combine
// reads back (rows x 512 x 4 B) over the 64 x 576 values of one KV page, counted one byte each (an fp8 page),
// rounded down: 16 rows (h_q 16) 0, 32 rows 1, 48 rows 2, 64 rows (h_q >= 64, or s_q x h_q >= 64) 3.
// The same in every format: a split's cost is the combine's pass and the partials' round trip, not the KV
// bytes, and on the H200 (NOTES_plan.md T1) h128 b32 s512 gains from price 3 in bf16 (-0.9 us) as in fp8
// (-2.2) and fp8_ds (-0.3), where a bf16-page ratio (1) would leave bf16 cut.
MLA_HD_INLINE constexpr int decode_split_price(int rows) {
  return static_cast<int>(static_cast<int64_t>(rows) * kDimV * 4 / (static_cast<int64_t>(kDecodePageSize) * kDimQK));
}

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

// Cost of the piece [lo, hi) of a sequence of n blocks, the unit every plan decision is made in: its
// blocks, the fixed per-sequence price, and split_cost more when it is a true split (partials written in
// fp32 and merged again by the combine). An empty piece costs nothing.
MLA_HD_INLINE int64_t decode_piece_cost(int lo, int hi, int n, const DecodePlanTuning& tune) {
  if (lo >= hi) return 0;
  return (hi - lo) + tune.seq_cost + (lo > 0 || hi < n ? tune.split_cost : 0);
}

// The snapped form of a part boundary `pos` that falls inside a sequence occupying cost positions
// [seq_begin, seq_end): the nearest (ties: the lower) of the sequence's k + 1 piece edges
// seq_begin + floor(i * cost / k), i = 0..k, where k = max(1, round(cost / (per_part + split_price))).
// A sequence of up to 1.5 parts (each part made dearer by what a cut writes and merges) is thus never
// cut, and a longer one only into k about equal pieces, so the stride of the boundaries drifting against
// the sequence lengths leaves no slivers. Rounding to a fixed sorted set of points is monotone in pos,
// so snapped parts stay ordered. split_price 0: k = round(cost / per_part), the shape-blind rule.
MLA_HD_INLINE int64_t decode_plan_snap(int64_t pos, int64_t seq_begin, int64_t seq_end, int64_t per_part,
                                       int64_t split_price) {
  const int64_t cost = seq_end - seq_begin, d = pos - seq_begin, unit = per_part + split_price;
  int64_t k = (cost + unit / 2) / unit;
  if (k < 1) k = 1;
  int64_t i = d * k / cost;  // edge(i) <= d < edge(i + 1), after the two corrections
  while (i > 0 && i * cost / k > d) --i;
  while (i + 1 < k && (i + 1) * cost / k <= d) ++i;
  const int64_t lo = i * cost / k, hi = (i + 1) * cost / k;
  return seq_begin + (d - lo <= hi - d ? lo : hi);
}

// Walks cost positions in ascending order: which sequence holds a position, and at which block.
struct DecodePlanCursor {
  const int32_t* seqlens;
  int batch;
  int seq_cost;
  int b = 0;          // the sequence holding the last position sought (batch: past the end)
  int64_t start = 0;  // cost position where b begins

  MLA_HD int64_t cost(int i) const {
    const int n = decode_num_blocks(seqlens[i]);
    return n > 0 ? n + seq_cost : 0;
  }
  MLA_HD void seek(int64_t pos) {
    while (b < batch && pos >= start + cost(b)) {
      start += cost(b);
      ++b;
    }
  }
  // Block of position pos (after seek(pos)); the first seq_cost positions of a sequence map to block 0.
  MLA_HD int block(int64_t pos) const {
    if (b >= batch) return 0;
    const int64_t blk = pos - start - seq_cost;
    return blk < 0 ? 0 : static_cast<int>(blk);
  }
};

// One pass over the parts of one candidate plan (snap = false: boundaries at multiples of per_part;
// true: the same boundaries through decode_plan_snap, which takes split_price; tune.split_cost already
// includes it). Returns the largest part cost (sum of decode_piece_cost over its pieces). With
// parts != nullptr it also writes the records and counts splits
// into split_offsets (zeroed by the caller).
// The start hints of one record (fields 5-7) from its range: the page of item i of the part is given only
// when that item is (b0, k0 + i) -- inside the part and in its first sequence.
MLA_HD inline void decode_plan_hints(const int32_t* seqlens, int batch, DecodePlanPages pages, int b0, int k0, int b1,
                                     int k1, int32_t* rec) {
  rec[kPartFirstSeqlen] = b0 < batch ? seqlens[b0] : -1;
  rec[kPartFirstPage] = rec[kPartSecondPage] = -1;
  const int hi = b0 >= batch || pages.data == nullptr ? 0 : b0 == b1 ? k1 : decode_num_blocks(seqlens[b0]);
  const int32_t* row = pages.data + static_cast<int64_t>(b0) * pages.stride;
  if (k0 < hi) rec[kPartFirstPage] = row[k0];
  if (k0 + 1 < hi) rec[kPartSecondPage] = row[k0 + 1];
}

MLA_HD inline int64_t decode_plan_walk(const int32_t* seqlens, int batch, int num_parts, DecodePlanTuning tune,
                                       int split_price, int64_t total, int64_t per_part, bool snap, int32_t* parts,
                                       int32_t* split_offsets, DecodePlanPages pages = {}) {
  DecodePlanCursor c{seqlens, batch, tune.seq_cost};
  c.seek(0);
  int end_b = c.b, end_blk = c.block(0);
  int64_t worst = 0;
  for (int p = 0; p < num_parts; ++p) {
    const int begin_b = end_b, begin_blk = end_blk;
    int64_t end_pos = static_cast<int64_t>(p + 1) * per_part;
    if (end_pos > total || p == num_parts - 1) end_pos = total;
    c.seek(end_pos);
    if (snap && c.b < batch) {
      end_pos = decode_plan_snap(end_pos, c.start, c.start + c.cost(c.b), per_part, split_price);
      c.seek(end_pos);
    }
    end_b = c.b;
    end_blk = c.block(end_pos);
    // This part's split index within begin_b: the pieces of begin_b that earlier parts counted.
    const int32_t first_split = parts != nullptr && begin_b < batch ? split_offsets[begin_b] : 0;
    int64_t work = 0;
    for (int b = begin_b; b <= end_b && b < batch; ++b) {
      const int n = decode_num_blocks(seqlens[b]);
      const int lo = b == begin_b ? begin_blk : 0;
      const int hi = b == end_b ? end_blk : n;
      work += decode_piece_cost(lo, hi, n, tune);
      if (parts != nullptr && lo < hi) ++split_offsets[b];
    }
    if (work > worst) worst = work;
    if (parts != nullptr) {
      int32_t* rec = parts + static_cast<int64_t>(p) * kPlanPartInts;
      rec[kPartBeginBatch] = begin_b;
      rec[kPartBeginBlock] = begin_blk;
      rec[kPartEndBatch] = end_b;
      rec[kPartEndBlock] = end_blk;
      rec[kPartFirstSplit] = first_split;
      decode_plan_hints(seqlens, batch, pages, begin_b, begin_blk, end_b, end_blk, rec);
    }
  }
  return worst;
}

// The one definition of the schedule, run by the CPU reference and (in one thread) by the CUDA plan
// kernel. seqlens: [batch]; writes parts [num_parts, 8] and split_offsets [batch + 1]; the page hints come
// from `pages` (its rows must hold every block of their sequence, as the decode kernels' block table does).
//
// The batch's total cost is cut into num_parts intervals of per_part = max(ceil(total / num_parts),
// min_part_cost). Two candidate plans use these boundaries: as they are, and snapped to sequence ends
// (decode_plan_snap). The snapped plan is taken unless its largest part costs more than the plain one's,
// both counted with decode_piece_cost: when the batch has about as many sequences as parts, or more,
// the plain boundaries cut almost every sequence (b128 at 132 or 66 parts: ~64 MB of fp32 partials for
// h_q 128 and a combine pass over them), while whole-sequence parts cost ~3 % more makespan; with few
// long sequences, or a long sequence among short ones, the long ones stay cut and the plan stays balanced.
// split_price (DecodePlanGeometry) is added to every true split's charge and to the snapped piece size.
// The plain candidate does not depend on it, so batch 1 (plain pieces of per_part, the smallest) keeps
// its many splits: there one sequence must be spread over all 132 SMs whatever the partials cost.
MLA_HD inline void compute_decode_plan(const int32_t* seqlens, int batch, int num_parts, int split_price,
                                       DecodePlanTuning tune, int32_t* parts, int32_t* split_offsets,
                                       DecodePlanPages pages = {}) {
  tune.split_cost += split_price;
  int64_t total = 0;
  for (int b = 0; b < batch; ++b) {
    const int n = decode_num_blocks(seqlens[b]);
    total += n > 0 ? n + tune.seq_cost : 0;
    split_offsets[b] = 0;  // used as a per-sequence split counter below
  }
  int64_t per_part = (total + num_parts - 1) / num_parts;
  if (per_part < tune.min_part_cost) per_part = tune.min_part_cost;
  const int sp = split_price;
  const int64_t plain = decode_plan_walk(seqlens, batch, num_parts, tune, sp, total, per_part, false, nullptr,
                                         nullptr);
  const int64_t snapped = decode_plan_walk(seqlens, batch, num_parts, tune, sp, total, per_part, true, nullptr,
                                           nullptr);
  decode_plan_walk(seqlens, batch, num_parts, tune, sp, total, per_part, snapped <= plain, parts, split_offsets, pages);
  // Counts -> exclusive prefix sums.
  int32_t acc = 0;
  for (int b = 0; b < batch; ++b) {
    const int32_t c = split_offsets[b];
    split_offsets[b] = acc;
    acc += c;
  }
  split_offsets[batch] = acc;
}

// Checks the optional block table of plan_decode: int32 [batch, max_blocks], contiguous (empty: no page hints).
Status check_plan_block_table(const TensorView& block_table, int batch, DecodePlanPages* out);

namespace ref {
// Host plan: seqlens host [batch] int32 -> plan (host buffers sized from the geometry). With the step's
// block table (host int32 [batch, max_blocks]) the records also carry the page hints.
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan,
                   DecodePlanTuning tune = {});
Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, DecodePlanTuning tune = {});
}  // namespace ref

namespace cuda {
// Device plan: seqlens device int32 [batch] -> plan in device buffers, on `stream`, no host sync, no
// allocation (CUDA-graph safe). Produces exactly what compute_decode_plan produces on the host. With the
// step's block table (device int32 [batch, max_blocks], written before the plan on the same stream) the
// records carry the page hints; the decode of every layer then starts one dependent load earlier.
Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan, Stream stream,
                   DecodePlanTuning tune = {});
Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, Stream stream, DecodePlanTuning tune = {});
}  // namespace cuda

}  // namespace mla

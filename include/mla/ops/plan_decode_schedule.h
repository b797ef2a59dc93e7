#pragma once
// The schedule of plan_decode (plan_decode.h): how the batch's work is cut into parts. One definition, run by
// the CPU reference (ops/ref/plan_decode_ref.cpp), by the CUDA plan kernel (ops/cuda/plan_decode.cu: the serial
// walk for large batches, its pieces -- decode_plan_snap, decode_piece_cost, decode_plan_hints -- in the
// parallel form) and by the tests that compare the two. Kept out of plan_decode.h so that the decode kernels,
// which include that header for the record layout only, do not depend on it.
#include <cstdint>

#include "mla/core/macros.h"
#include "mla/ops/plan_decode.h"

namespace mla {

// Cost of the piece [lo, hi) of a sequence of n blocks, the unit every plan decision is made in: its
// blocks, the fixed per-sequence price, and split_cost more when it is a true split (partials written in
// fp32 and merged again by the combine). An empty piece costs nothing.
MLA_HD_INLINE int64_t decode_piece_cost(int lo, int hi, int n, const DecodePlanTuning& tune) {
  if (lo >= hi) return 0;
  return (hi - lo) + tune.seq_cost + (lo > 0 || hi < n ? tune.split_cost : 0);
}

// The snapped form of a part boundary `pos` that falls inside a sequence occupying cost positions
// [seq_begin, seq_end) (its seq_cost fixed positions, then one per block): the nearest (ties: the lower) of
// the edges of its k pieces, k = max(1, round(cost / (per_part + split_price))). The pieces hold equal page
// counts because each pays the same fixed price (its Q, first-page latency and epilogue; decode_piece_cost
// charges seq_cost to every piece): pieces of equal cost positions (sessions 4-6) gave the first one seq_cost
// pages fewer and the others' parts the longest time (b32 s4096: 13 / 17 / 17 / 17 pages on a CTA instead of
// 16 each). Short sequences keep their old pieces: the cost-equal edges i cost / k at or below seq_cost (the
// first e of them) stay where they were, leaving their pieces empty as before (b1 sequences of 2-5 pages stay
// whole at split price 3 and are cut page by page at price 0, on the same parts; the tests encode both), and
// the other k - e pieces share the n = cost - seq_cost blocks equally: edge i = seq_cost + (i - e) n / (k - e).
// A sequence of up to 1.5 parts (each part made dearer by what a cut writes and merges) is thus never cut,
// and a longer one only into k about equal pieces, so the stride of the boundaries drifting against the
// sequence lengths leaves no slivers. Rounding to a fixed sorted set of points is monotone in pos, so snapped
// parts stay ordered. split_price 0: k = round(cost / per_part), the shape-blind rule.
MLA_HD_INLINE int64_t decode_plan_snap(int64_t pos, int64_t seq_begin, int64_t seq_end, int64_t seq_cost,
                                       int64_t per_part, int64_t split_price) {
  const int64_t cost = seq_end - seq_begin, d = pos - seq_begin, unit = per_part + split_price;
  const int64_t n = cost > seq_cost ? cost - seq_cost : 0;  // blocks
  int64_t k = (cost + unit / 2) / unit;
  if (k < 1) k = 1;
  // Edges i = 1 .. k - 1 with i cost / k <= seq_cost, i.e. i cost < (seq_cost + 1) k.
  int64_t e = cost > 0 ? ((seq_cost + 1) * k - 1) / cost : 0;
  if (e > k - 1) e = k - 1;
  auto edge = [&](int64_t i) {  // in cost positions from seq_begin; non-decreasing in i
    return i <= 0 ? int64_t{0} : i >= k ? cost : i <= e ? i * cost / k : seq_cost + (i - e) * n / (k - e);
  };
  int64_t lo_i = 0, hi_i = k;  // the last i in [0, k) with edge(i) <= d (edge(0) = 0 <= d)
  while (hi_i - lo_i > 1) {
    const int64_t mid = (lo_i + hi_i) / 2;
    if (edge(mid) <= d) lo_i = mid; else hi_i = mid;
  }
  const int64_t lo = edge(lo_i), hi = edge(lo_i + 1);
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

// per_part of both candidates: the cut spacing ceil(total / num_parts) (at least min_part_cost), raised for a
// single sequence whose pieces would fill nearly every part, where the partials they all write at once cost
// more than the pages a coarser cut adds. Pieces of p blocks make ~total / p splits, each writing and merging
// partials worth c = 3 x split_price / num_parts blocks of call time, and T(p) = p + c x total / p is smallest at
// the least p with p (p + 1) >= c x total.
// The weight 3 per unit of price (1.5 until session 9, with a price of 3 at 64 rows) is fitted on the H200 with
// fcb23dd's partials (NOTES_plan.md "Session 9, price", runs 1-2): h_q 64 s8192 (132 parts) 64 pieces of 2 pages
// against 128 of 1: -0.8 us fp8, -0.3 bf16, +0.1 fp8_ds; h_q 128 (66 parts) s6144 / s8192 48 x 2 / 64 x 2 against
// the old weight's (4.5) 33 x 3 / 43 x 3: -0.35 / 0 fp8, -0.85 / -0.4 bf16, -1.55 / -1.45 fp8_ds; what weight 3
// costs: h_q 64 s16384 128 x 2 against 86 x 3 +0.65 fp8, +0.85 bf16 (-1.05 fp8_ds). h_q 32 (price 0, no raise)
// wants its 1-page pieces (s6144 / s8192: 2-page ones +1.75..+3.7 us). Session 8 (comb runs 1-3, older
// partials): where the cut at the plain spacing leaves a quarter of the parts or more idle, the coarser cut lost
// (h_q 128 s2048 1 -> 2 pages +0.6 / +1.15 us, h_q 64 s4096 +0.85 / +1.2), and so it did in batches of several
// sequences (h_q 128 b4 / b16 s512, h_q 64 b32 s512: +0.8..+2 us; the snapped candidate's pieces follow per_part
// too): the raise applies to batch 1 with >= 3/4 of the parts busy. split_price 0 (tiles of < 64 rows): never
// raised.
MLA_HD_INLINE int64_t decode_plan_per_part(int64_t total, int batch, int num_parts, const DecodePlanTuning& tune,
                                           int split_price) {
  int64_t p = (total + num_parts - 1) / num_parts;
  if (p < tune.min_part_cost) p = tune.min_part_cost;
  if (batch != 1 || 4 * total < 3 * p * num_parts) return p;
  while (p * (p + 1) * num_parts < 3 * static_cast<int64_t>(split_price) * total) ++p;  // <= ~3 x price steps
  return p;
}

// A step's size as decode_plan_seq_cost reads it: its pages and its non-empty sequences. A plan's total cost is
// blocks + seq_cost x seqs (every non-empty sequence pays seq_cost once, decode_piece_cost).
struct DecodeStepSize {
  int64_t blocks = 0;
  int64_t seqs = 0;
};

MLA_HD_INLINE DecodeStepSize decode_step_size(const int32_t* seqlens, int batch) {
  DecodeStepSize s;
  for (int b = 0; b < batch; ++b) {
    const int n = decode_num_blocks(seqlens[b]);
    s.blocks += n;
    s.seqs += n > 0;
  }
  return s;
}

// The seq_cost a step's plan charges, from its total pages (`blocks`) and non-empty sequences (`seqs`): none on a short
// step (tune.short_step_pages: at most that many pages per column, rounded up) whose sequences are long enough to be
// cut anyway (at least kDecodeShortStepSpan columns' worth of pages each on average), else tune.seq_cost. There the
// fixed cost only decides where the cuts go, and charging it left columns idle: h_q 16 b32 s512 ran 64 parts of 3
// pages and 32 of 2 with 36 of 132 columns idle, b16 s512 64 of 2 pages with 68 idle; now 128 of 2 / of 1 page.
// H200 against the rule-less plan (bench/decode/NOTES.md "Session 33" items 8-10), bf16 / fp8 us: h_q 16 b16 s512
// -0.6 / -0.45, b32 s512 -0.25 / -0.45, b32 s256 -0.75 / -0.5, b4 s2048 -0.9 / -0.7; narrow tiles h_q 128 b3 s512
// -1.1 / -0.7, h_q 64 b4 s512 -1.0 / -0.55; one loss, fp8 h_q 64 b2 s1024 +0.6 (bf16 +0.1). Outside the rule it lost:
// more pages per column (h_q 16 b48 s512, 2.9 a column: +1.8 / +1.5) and sequences newly cut that the default keeps
// whole (h_q 128 b8 s256 on 16 narrow columns, 4-page sequences: +0.95..+1.8, session 29).
// One sequence keeps the fixed cost: its pieces follow decode_plan_per_part's batch-1 raise, fitted with it.
MLA_HD_INLINE int decode_plan_seq_cost(int64_t blocks, int64_t seqs, int num_parts, const DecodePlanTuning& tune) {
  if (tune.short_step_pages <= 0 || seqs < 2 || num_parts <= 0) return tune.seq_cost;
  const int64_t per_column = (blocks + num_parts - 1) / num_parts;
  return per_column <= tune.short_step_pages && blocks >= kDecodeShortStepSpan * per_column * seqs ? 0 : tune.seq_cost;
}

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
      end_pos = decode_plan_snap(end_pos, c.start, c.start + c.cost(c.b), tune.seq_cost, per_part, split_price);
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
// The batch's total cost is cut into num_parts intervals of per_part = decode_plan_per_part (ceil(total /
// num_parts), at least min_part_cost; raised for a lone sequence spread over nearly every part). Two candidate
// plans use these boundaries: as they are, and snapped to sequence ends (decode_plan_snap). The snapped plan is
// taken unless its largest part costs more than the plain one's, both counted with decode_piece_cost: when the
// batch has about as many sequences as parts, or more,
// the plain boundaries cut almost every sequence (b128 at 132 or 66 parts: ~64 MB of fp32 partials for
// h_q 128 and a combine pass over them), while whole-sequence parts cost ~3 % more makespan; with few
// long sequences, or a long sequence among short ones, the long ones stay cut and the plan stays balanced.
// split_price (DecodePlanGeometry) is added to every true split's charge and to the snapped piece size.
// The plain candidate depends on it only through per_part, so batch 1 (plain pieces of per_part, the
// smallest) keeps its many splits: there one sequence is spread over the SMs, in pieces no smaller than
// decode_plan_per_part's (h_q 64 s8192: 64 pieces of 2 pages, not 128 of 1).
MLA_HD inline void compute_decode_plan(const int32_t* seqlens, int batch, int num_parts, int split_price,
                                       DecodePlanTuning tune, int32_t* parts, int32_t* split_offsets,
                                       DecodePlanPages pages = {}) {
  tune.split_cost += split_price;
  const DecodeStepSize step = decode_step_size(seqlens, batch);
  tune.seq_cost = decode_plan_seq_cost(step.blocks, step.seqs, num_parts, tune);
  const int64_t total = step.blocks + tune.seq_cost * step.seqs;
  for (int b = 0; b < batch; ++b) split_offsets[b] = 0;  // used as a per-sequence split counter below
  const int64_t per_part = decode_plan_per_part(total, batch, num_parts, tune, split_price);
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

}  // namespace mla

// plan_decode: geometry, and properties of the schedule over random batches: every KV block of every
// sequence is covered by exactly one part, parts are contiguous and ordered, split indices are dense,
// the total fits the fixed workspace, and the work is balanced; then the cut rules: uniform batches of
// about as many sequences as parts (or more) are not cut at all, long sequences among short ones are.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <random>
#include <utility>
#include <vector>

#include "mla/ops/decode_combine_grid.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace mla {
namespace {

struct Plan {
  DecodePlanGeometry g;
  std::vector<int32_t> parts, offsets;
};

// split_price < 0: the geometry's own; else that price (the cut rules at a given price). host_seqlens: the geometry
// sees the seqlens (head tiles chosen by decode_plan_narrow_tiles) as an engine's eager step; else 64-row tiles.
Plan make_plan(const std::vector<int32_t>& seqlens, int s_q, int h_q, int sms, DecodePlanTuning tune = {},
               int split_price = -1, bool host_seqlens = false) {
  Plan p;
  EXPECT_TRUE(decode_plan_geometry(static_cast<int>(seqlens.size()), s_q, h_q, sms, &p.g,
                                   host_seqlens ? seqlens.data() : nullptr)
                  .is_ok());
  if (split_price >= 0) p.g.split_price = split_price;
  p.parts.assign(size_t(p.g.num_parts) * kPlanPartInts, -7);
  p.offsets.assign(seqlens.size() + 1, -7);
  auto sl = TensorView::contiguous(seqlens.data(), DType::kInt32, {int64_t(seqlens.size())});
  EXPECT_TRUE(ref::plan_decode(sl, p.g, {p.parts.data(), p.offsets.data(), p.g.num_parts}, tune).is_ok());
  return p;
}

// What the plan charges: the tuning's split cost plus the geometry's price, and the step's seq_cost
// (decode_plan_seq_cost: none on a short step).
DecodePlanTuning charged(DecodePlanTuning tune, const Plan& p, const std::vector<int32_t>& seqlens) {
  tune.split_cost += p.g.split_price;
  const DecodeStepSize step = decode_step_size(seqlens.data(), static_cast<int>(seqlens.size()));
  tune.seq_cost = decode_plan_seq_cost(step.blocks, step.seqs, p.g.num_parts, tune);
  return tune;
}

void check_plan_properties(const std::vector<int32_t>& seqlens, const Plan& p, DecodePlanTuning tune_in = {}) {
  const DecodePlanTuning tune = charged(tune_in, p, seqlens);
  const int batch = static_cast<int>(seqlens.size());
  std::vector<std::vector<int>> owner(batch);
  std::vector<std::vector<int>> split_of(batch);
  for (int b = 0; b < batch; ++b) owner[b].assign(decode_num_blocks(seqlens[b]), -1);
  std::vector<int> splits_seen(batch, 0);
  int64_t max_cost = 0, total_cost = 0;
  for (int part = 0; part < p.g.num_parts; ++part) {
    const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
    int64_t cost = 0;
    for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < batch; ++b) {
      const int lo = b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0;
      const int hi = b == r[kPartEndBatch] ? r[kPartEndBlock] : decode_num_blocks(seqlens[b]);
      if (lo >= hi) continue;
      const int k = b == r[kPartBeginBatch] ? r[kPartFirstSplit] : 0;
      EXPECT_EQ(k, splits_seen[b]) << "part " << part << " batch " << b;  // splits numbered in order
      ++splits_seen[b];
      for (int j = lo; j < hi; ++j) {
        ASSERT_LT(j, int(owner[b].size()));
        EXPECT_EQ(owner[b][j], -1) << "block covered twice";
        owner[b][j] = part;
      }
      cost += decode_piece_cost(lo, hi, decode_num_blocks(seqlens[b]), tune);
    }
    max_cost = std::max(max_cost, cost);
    total_cost += cost;
  }
  int total_splits = 0;
  for (int b = 0; b < batch; ++b) {
    for (size_t j = 0; j < owner[b].size(); ++j) EXPECT_GE(owner[b][j], 0) << "block " << j << " of " << b << " missed";
    EXPECT_EQ(p.offsets[b + 1] - p.offsets[b], splits_seen[b]);
    total_splits += splits_seen[b];
  }
  EXPECT_EQ(p.offsets[0], 0);
  EXPECT_EQ(p.offsets[batch], total_splits);
  EXPECT_LE(total_splits, p.g.max_splits);
  // Balance, counted as the plan counts it (decode_piece_cost): the plain cut gives every part at most
  // per_part = max(ceil(total / parts), min_part_cost) positions plus the fixed cost again for a part
  // that starts mid-sequence and split_cost for each of its two end pieces; the snapped plan is only
  // taken when its largest part is no larger. total <= total_cost, so share bounds ceil(total / parts).
  const int64_t share = (total_cost + p.g.num_parts - 1) / p.g.num_parts;
  EXPECT_LE(max_cost, std::max<int64_t>(share, tune.min_part_cost) + tune.seq_cost + 2 * tune.split_cost);
}

// Splits per sequence of a plan.
std::vector<int> splits_of(const Plan& p) {
  std::vector<int> n(p.offsets.size() - 1);
  for (size_t b = 0; b + 1 < p.offsets.size(); ++b) n[b] = p.offsets[b + 1] - p.offsets[b];
  return n;
}

// Largest part in decode_piece_cost units.
int64_t max_part_cost(const std::vector<int32_t>& seqlens, const Plan& p, DecodePlanTuning tune_in = {}) {
  const DecodePlanTuning tune = charged(tune_in, p, seqlens);
  int64_t worst = 0;
  for (int part = 0; part < p.g.num_parts; ++part) {
    const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
    int64_t cost = 0;
    for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < int(seqlens.size()); ++b) {
      const int n = decode_num_blocks(seqlens[b]);
      cost += decode_piece_cost(b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0,
                                b == r[kPartEndBatch] ? r[kPartEndBlock] : n, n, tune);
    }
    worst = std::max(worst, cost);
  }
  return worst;
}

TEST(PlanDecode, GeometryFillsTheMachine) {
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(8, 1, 128, 132, &g).is_ok());
  EXPECT_EQ(g.num_head_tiles, 2);
  EXPECT_EQ(g.num_parts, 66);
  ASSERT_TRUE(decode_plan_geometry(8, 1, 16, 132, &g).is_ok());
  EXPECT_EQ(g.num_head_tiles, 1);
  EXPECT_EQ(g.num_parts, 132);
  EXPECT_EQ(g.max_splits, 8 + 132 - 1);
  ASSERT_TRUE(decode_plan_geometry(2, 4, 128, 132, &g).is_ok());
  EXPECT_EQ(g.num_head_tiles, 8);
}

// host_mean_part_pages: ceil(the step's pages / num_parts) when the seqlens are given (a launcher's choice for short
// parts, decode_fp8/variant64.h), 0 without them (a graph's geometry: shapes only).
TEST(PlanDecode, GeometryMeanPartPagesNeedsSeqlens) {
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(32, 1, 128, 132, &g).is_ok());
  EXPECT_EQ(g.host_mean_part_pages, 0);
  const std::vector<int32_t> lens(32, 640);  // 32 x 10 pages over 66 parts: 4.8
  ASSERT_TRUE(decode_plan_geometry(32, 1, 128, 132, &g, lens.data()).is_ok());
  EXPECT_EQ(g.num_parts, 66);
  EXPECT_EQ(g.host_mean_part_pages, 5);
  const std::vector<int32_t> mixed = {0, 1, 64, 65, 8192};  // 0 + 1 + 1 + 2 + 128 = 132 pages over 66 parts
  ASSERT_TRUE(decode_plan_geometry(5, 1, 128, 132, &g, mixed.data()).is_ok());
  EXPECT_EQ(g.host_mean_part_pages, 2);
}

// Narrow tiles: a step of s_q 1 and h_q 64 / 128 whose seqlens (given on the host) come to at most 1.5 KV pages per
// CTA column of the narrow grid, or to sequences of at most 8 pages and at most one per column, cuts its rows into
// 16-row head tiles (the 16-row kernels), num_sms / tiles columns each; more pages, no seqlens, s_q > 1 and h_q 16 / 32
// keep 64-row tiles. MLA_DECODE_TILE_ROWS forces either (16 only where s_q is 1 and h_q >= 64) and is strict like
// every knob.
TEST(PlanDecode, GeometryNarrowTilesForFewPages) {
  unsetenv("MLA_DECODE_TILE_ROWS");
  const std::vector<int32_t> s512 = {512}, s1536 = {1536}, s1537 = {1537}, two768 = {768, 768}, s2048 = {2048},
                             s3136 = {3136}, s3137 = {3137}, empty = {0};
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(1, 1, 128, 132, &g, s512.data()).is_ok());
  EXPECT_EQ(g.tile_rows, 16);
  EXPECT_EQ(g.num_head_tiles, 8);
  EXPECT_EQ(g.num_parts, 16);
  EXPECT_EQ(g.max_splits, 16);
  EXPECT_EQ(g.split_price, 0);  // a 16-row tile's partial, as h_q 16's
  auto tile_of = [&](int b, int s_q, int h_q, const std::vector<int32_t>& lens) {
    EXPECT_TRUE(decode_plan_geometry(b, s_q, h_q, 132, &g, lens.data()).is_ok());
    return g.tile_rows;
  };
  EXPECT_EQ(tile_of(1, 1, 128, s1536), 16);    // 24 pages on 16 columns
  EXPECT_EQ(tile_of(1, 1, 128, s1537), 64);    // 25
  EXPECT_EQ(tile_of(2, 1, 128, two768), 16);   // 12 + 12
  EXPECT_EQ(tile_of(1, 1, 128, empty), 16);    // nothing to read: either is right
  EXPECT_EQ(tile_of(1, 1, 64, s3136), 16);     // 49 pages on 33 columns (4 tiles)
  EXPECT_EQ(g.num_head_tiles, 4);
  EXPECT_EQ(g.num_parts, 33);
  EXPECT_EQ(tile_of(1, 1, 64, s3137), 64);     // 50
  EXPECT_EQ(g.num_head_tiles, 1);
  EXPECT_EQ(tile_of(1, 2, 128, s512), 64);     // causal rows: 64-row kernels only
  EXPECT_EQ(tile_of(1, 1, 32, s512), 64);      // one short tile
  EXPECT_EQ(g.num_head_tiles, 1);
  EXPECT_EQ(tile_of(1, 1, 128, s2048), 64);
  // Short sequences (<= 8 pages each), at most one per column: h_q 128 <= 16 of them, h_q 64 <= 33.
  const std::vector<int32_t> b8s256(8, 256), b16s512(16, 512), b17s512(17, 512), b17s64(17, 64), b24s256(24, 256),
      b4s1024(4, 1024), b33s512(33, 512), b34s512(34, 512), mixed = {512, 1, 0, 300, 64, 65, 511, 448};
  EXPECT_EQ(tile_of(8, 1, 128, b8s256), 16);    // 32 pages
  EXPECT_EQ(tile_of(16, 1, 128, b16s512), 16);  // 128 pages, one sequence per column
  EXPECT_EQ(tile_of(17, 1, 128, b17s512), 64);  // 17 sequences on 16 columns
  EXPECT_EQ(tile_of(17, 1, 128, b17s64), 16);   // 17 pages: the first case
  EXPECT_EQ(tile_of(24, 1, 128, b24s256), 64);  // 96 pages of 24 sequences
  EXPECT_EQ(tile_of(4, 1, 128, b4s1024), 64);   // 64 pages of 16-page sequences
  EXPECT_EQ(tile_of(8, 1, 128, mixed), 16);     // 32 pages, none over 8
  EXPECT_EQ(tile_of(33, 1, 64, b33s512), 16);   // 33 sequences on 33 columns
  EXPECT_EQ(tile_of(34, 1, 64, b34s512), 64);
  ASSERT_TRUE(decode_plan_geometry(1, 1, 128, 132, &g).is_ok());  // no seqlens: the shapes' geometry
  EXPECT_EQ(g.tile_rows, 64);
  EXPECT_EQ(g.num_head_tiles, 2);
  EXPECT_EQ(g.num_parts, 66);

  setenv("MLA_DECODE_TILE_ROWS", "64", 1);
  EXPECT_EQ(tile_of(1, 1, 128, s512), 64);
  setenv("MLA_DECODE_TILE_ROWS", "16", 1);
  EXPECT_EQ(tile_of(1, 1, 128, s2048), 16);
  ASSERT_TRUE(decode_plan_geometry(32, 1, 128, 132, &g).is_ok());  // forced: no seqlens needed
  EXPECT_EQ(g.tile_rows, 16);
  EXPECT_EQ(g.num_head_tiles, 8);
  EXPECT_EQ(tile_of(1, 4, 128, s512), 64);  // not possible at s_q 4
  setenv("MLA_DECODE_TILE_ROWS", "32", 1);
  const Status bad = decode_plan_geometry(1, 1, 128, 132, &g, s512.data());
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("MLA_DECODE_TILE_ROWS"), std::string::npos) << bad.to_string();
  unsetenv("MLA_DECODE_TILE_ROWS");
}

// Short h_q 128 steps of whole sequences: one CTA column per sequence (decode_plan_whole_sequences), so the plan cuts
// nothing and the fused merge takes the step; only with seqlens, 8 pages each, fewer than 66 sequences, not fp8_ds.
TEST(PlanDecode, WholeSequencesGetAColumnEach) {
  auto geometry = [](const std::vector<int32_t>& lens, int h_q, KvFormat f) {
    DecodePlanGeometry g;
    EXPECT_TRUE(decode_plan_geometry(static_cast<int>(lens.size()), 1, h_q, 132, &g, lens.data(), f).is_ok());
    return g;
  };
  const std::vector<int32_t> b32s512(32, 512), b24s512(24, 512), b32s256(32, 256), b32s768(32, 768),
      b67s512(67, 512), b16s512(16, 512);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kBf16).num_parts, 32);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kBf16).max_splits, 63);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kFp8).num_parts, 32);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kFp16).num_parts, 32);
  EXPECT_EQ(geometry(b24s512, 128, KvFormat::kBf16).num_parts, 24);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kFp8Ds).num_parts, 66);  // fp8_ds's page costs more on half the CTAs
  EXPECT_EQ(geometry(b32s512, 16, KvFormat::kBf16).num_parts, 132);   // h_q 16: one tile, the 16-row kernels
  EXPECT_EQ(geometry(std::vector<int32_t>(34, 512), 64, KvFormat::kBf16).num_parts, 132);  // h_q 64: not measured
  EXPECT_EQ(geometry(b32s256, 128, KvFormat::kBf16).num_parts, 66);   // 4 pages: a tie
  EXPECT_EQ(geometry(b32s768, 128, KvFormat::kBf16).num_parts, 66);   // 12 pages: a tie / a loss
  EXPECT_EQ(geometry(b67s512, 128, KvFormat::kBf16).num_parts, 66);   // more sequences than columns
  EXPECT_EQ(geometry(b16s512, 128, KvFormat::kBf16).tile_rows, 16);   // narrow tiles first
  std::vector<int32_t> mixed(40);
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i] = 449 + static_cast<int32_t>(13 * i % 64);  // 8 pages each
  const DecodePlanGeometry gm = geometry(mixed, 128, KvFormat::kFp8);
  ASSERT_EQ(gm.num_parts, 40);
  {  // the plan keeps every sequence whole: the fused merge takes the step
    std::vector<int32_t> parts(size_t(gm.num_parts) * kPlanPartInts), off(mixed.size() + 1);
    auto sl = TensorView::contiguous(mixed.data(), DType::kInt32, {int64_t(mixed.size())});
    ASSERT_TRUE(ref::plan_decode(sl, gm, {parts.data(), off.data(), gm.num_parts}).is_ok());
    EXPECT_TRUE(decode_plan_wants_fused_merge(gm, off.data()));
  }
  // Shorter or mixed page counts keep the machine's columns (mixed: a plan of 24 columns would pair short ones).
  std::vector<int32_t> paired(24, 350);
  paired[0] = 300, paired[1] = 512, paired[2] = 400, paired[3] = 480;
  EXPECT_EQ(geometry(paired, 128, KvFormat::kBf16).num_parts, 66);
  EXPECT_EQ(geometry(std::vector<int32_t>(40, 448), 128, KvFormat::kBf16).num_parts, 66);  // 7 pages
  std::vector<int32_t> with_long = b32s512;
  with_long[5] = 576;  // 9 pages
  EXPECT_EQ(geometry(with_long, 128, KvFormat::kBf16).num_parts, 66);
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(32, 1, 128, 132, &g).is_ok());  // no seqlens (a graph step): the machine's columns
  EXPECT_EQ(g.num_parts, 66);

  setenv("MLA_DECODE_WHOLE_SEQS", "off", 1);
  EXPECT_EQ(geometry(b32s512, 128, KvFormat::kBf16).num_parts, 66);
  setenv("MLA_DECODE_WHOLE_SEQS", "on", 1);
  EXPECT_EQ(geometry(b32s768, 128, KvFormat::kFp8Ds).num_parts, 32);
  EXPECT_EQ(geometry(b32s512, 16, KvFormat::kBf16).num_parts, 32);
  EXPECT_EQ(geometry(b67s512, 128, KvFormat::kBf16).num_parts, 66);  // still no column for each
  setenv("MLA_DECODE_WHOLE_SEQS", "all", 1);
  const Status bad = decode_plan_geometry(32, 1, 128, 132, &g, b32s512.data());
  EXPECT_FALSE(bad.is_ok());
  EXPECT_NE(bad.to_string().find("MLA_DECODE_WHOLE_SEQS"), std::string::npos) << bad.to_string();
  unsetenv("MLA_DECODE_WHOLE_SEQS");
}

// The plan on narrow tiles: the 64-row one's, run with the narrow grid's num_parts and the 16-row split price (0).
// h_q 128 b1 s512 (session 28's gain) is 8 one-page pieces on the 16 columns of each 16-row tile. h_q 64 b1 s2048
// (32 pages + seq_cost 4 over 33 columns: per_part 2) is 16 two-page pieces on half the columns -- measured faster
// than 64-row tiles all the same (15.5-15.7 against 16.1-16.4 us bf16), though at h_q 128 b2 s512 the same cost
// model's 2-page pieces lost 0.4-0.7 us to 1-page ones (NOTES.md "Session 28" item 8): pinned here as it is.
TEST(PlanDecode, NarrowTilesPlanOnTheNarrowGrid) {
  unsetenv("MLA_DECODE_TILE_ROWS");
  const std::vector<int32_t> s512 = {512}, s2048 = {2048};
  Plan p = make_plan(s512, 1, 128, 132, {}, -1, true);
  ASSERT_EQ(p.g.tile_rows, kDecodeNarrowTileRows);
  check_plan_properties(s512, p);
  EXPECT_EQ(splits_of(p)[0], 8);
  Plan q = make_plan(s2048, 1, 64, 132, {}, -1, true);
  ASSERT_EQ(q.g.tile_rows, kDecodeNarrowTileRows);
  ASSERT_EQ(q.g.num_parts, 33);
  check_plan_properties(s2048, q);
  EXPECT_EQ(splits_of(q)[0], 16);
  for (const auto& [pl, most] : {std::pair<const Plan*, int>{&p, 1}, {&q, 2}})
    for (int part = 0; part < pl->g.num_parts; ++part)
      EXPECT_LE(decode_part_pages_from_record(&pl->parts[size_t(part) * kPlanPartInts]), most) << "part " << part;
}

// The split price: a piece's fp32 partial (rows of a head tile x 512 x 4 B) over three pages of 64 x 576
// one-byte values (108 KB), rounded down (session 9; NOTES_plan.md "Session 9, price"). It follows the rows of a
// tile (s_q x h_q, at most 64), not h_q alone.
TEST(PlanDecode, GeometrySplitPriceFollowsTheTileRows) {
  EXPECT_EQ(decode_split_price(16), 0);  // 32 KB
  EXPECT_EQ(decode_split_price(32), 0);  // 64 KB
  EXPECT_EQ(decode_split_price(48), 0);  // 96 KB
  EXPECT_EQ(decode_split_price(64), 1);  // 128 KB
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(8, 1, 128, 132, &g).is_ok());
  EXPECT_EQ(g.split_price, 1);
  ASSERT_TRUE(decode_plan_geometry(8, 1, 64, 132, &g).is_ok());
  EXPECT_EQ(g.split_price, 1);
  ASSERT_TRUE(decode_plan_geometry(8, 1, 16, 132, &g).is_ok());
  EXPECT_EQ(g.split_price, 0);
  ASSERT_TRUE(decode_plan_geometry(8, 1, 32, 132, &g).is_ok());
  EXPECT_EQ(g.split_price, 0);
  ASSERT_TRUE(decode_plan_geometry(8, 3, 16, 132, &g).is_ok());  // 48 rows in one tile
  EXPECT_EQ(g.split_price, 0);
  ASSERT_TRUE(decode_plan_geometry(8, 4, 16, 132, &g).is_ok());  // 64 rows per tile
  EXPECT_EQ(g.split_price, 1);
}

// Short steps (decode_plan_seq_cost): at most short_step_pages pages per CTA column, rounded up, and sequences of at
// least kDecodeShortStepSpan columns' pages on average charge no seq_cost, so their cuts use the idle columns. What
// decode_plan_seq_cost and the plans' total cost are computed from: pages of 64 tokens (a partial page counts), and
// only the sequences with keys.
TEST(PlanDecode, StepSize) {
  const std::vector<int32_t> lens = {0, 1, 64, 65, 8192, 0};
  const DecodeStepSize s = decode_step_size(lens.data(), static_cast<int>(lens.size()));
  EXPECT_EQ(s.blocks, 0 + 1 + 1 + 2 + 128 + 0);
  EXPECT_EQ(s.seqs, 4);
  const DecodeStepSize none = decode_step_size(lens.data(), 1);
  EXPECT_EQ(none.blocks, 0);
  EXPECT_EQ(none.seqs, 0);
}

TEST(PlanDecode, ShortStepSeqCost) {
  DecodePlanTuning t;  // seq_cost 4, short_step_pages 2
  EXPECT_EQ(decode_plan_seq_cost(256, 32, 132, t), 0);   // h_q 16 b32 s512: 2 pages a column, 8 per sequence
  EXPECT_EQ(decode_plan_seq_cost(128, 16, 132, t), 0);   // b16 s512: 1 a column
  EXPECT_EQ(decode_plan_seq_cost(192, 32, 132, t), 0);   // b32 s384: 2 a column, 6 per sequence = 3 columns
  EXPECT_EQ(decode_plan_seq_cost(384, 48, 132, t), 4);   // b48 s512: 3 a column
  EXPECT_EQ(decode_plan_seq_cost(32, 8, 16, t), 4);      // h_q 128 b8 s256 on 16 narrow columns: 4-page sequences
  EXPECT_EQ(decode_plan_seq_cost(8, 1, 132, t), 4);      // one sequence: batch 1's pieces are decode_plan_per_part's
  EXPECT_EQ(decode_plan_seq_cost(16, 2, 132, t), 0);     // two
  EXPECT_EQ(decode_plan_seq_cost(0, 0, 132, t), 4);      // nothing to read
  t.short_step_pages = 0;                                // off: the plan before session 33
  EXPECT_EQ(decode_plan_seq_cost(256, 32, 132, t), 4);
  t.short_step_pages = 3;
  EXPECT_EQ(decode_plan_seq_cost(384, 48, 132, t), 4);   // 3 a column, but 8-page sequences span < 3 columns of 3
  EXPECT_EQ(decode_plan_seq_cost(384, 32, 132, t), 0);   // 12-page sequences
}

// The plans it changes: h_q 16 b32 s512 was 64 parts of 3 pages and 32 of 2 with 36 of 132 columns idle, now 128 of 2;
// b16 s512 64 of 2 (68 idle) -> 128 of 1. H200: -0.25 / -0.6 us bf16, -0.45 / -0.45 fp8 (bench/decode/NOTES.md
// "Session 33" item 10). h_q 16 b48 s512 (3 pages a column) keeps its plan.
TEST(PlanDecode, ShortStepsUseTheIdleColumns) {
  auto pages_per_part = [](const Plan& p) {
    std::vector<int> n;
    for (int part = 0; part < p.g.num_parts; ++part)
      n.push_back(decode_part_pages_from_record(&p.parts[size_t(part) * kPlanPartInts]));
    return n;
  };
  auto count = [](const std::vector<int>& v, int x) { return static_cast<int>(std::count(v.begin(), v.end(), x)); };
  const std::vector<int32_t> b32(32, 512), b16(16, 512), b48(48, 512);
  DecodePlanTuning off;
  off.short_step_pages = 0;
  const Plan p32 = make_plan(b32, 1, 16, 132), o32 = make_plan(b32, 1, 16, 132, off);
  check_plan_properties(b32, p32);
  check_plan_properties(b32, o32, off);
  EXPECT_EQ(count(pages_per_part(p32), 2), 128);
  EXPECT_EQ(count(pages_per_part(p32), 0), 4);
  EXPECT_EQ(count(pages_per_part(o32), 3), 64);
  EXPECT_EQ(count(pages_per_part(o32), 0), 36);
  const Plan p16 = make_plan(b16, 1, 16, 132);
  check_plan_properties(b16, p16);
  EXPECT_EQ(count(pages_per_part(p16), 1), 128);
  const Plan p48 = make_plan(b48, 1, 16, 132), o48 = make_plan(b48, 1, 16, 132, off);
  EXPECT_EQ(p48.parts, o48.parts);
  EXPECT_EQ(p48.offsets, o48.offsets);
}

TEST(PlanDecode, GeometryRejectsBadShapes) {
  DecodePlanGeometry g;
  EXPECT_EQ(decode_plan_geometry(0, 1, 16, 132, &g).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_plan_geometry(1, 5, 16, 132, &g).code(), StatusCode::kUnsupported);
  Status s = decode_plan_geometry(1, 1, 24, 132, &g);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.to_string().find("h_q 24"), std::string::npos);
  EXPECT_FALSE(decode_plan_geometry(1, 1, 16, 0, &g).is_ok());
}

// With the step's host seqlens the geometry knows the block-table width the step needs; a negative length is refused
// there. A narrower table is refused before anything runs: by check_block_table_width where the seqlens are on the
// device (cuda plan_decode, mla_decode), by the host plan's own per-sequence check where they are not.
TEST(PlanDecode, GeometryKnowsTheTableWidthTheStepNeeds) {
  DecodePlanGeometry g;
  const std::vector<int32_t> lens = {1, 640, 0, 129};  // 1, 10, 0 and 3 pages
  ASSERT_TRUE(decode_plan_geometry(4, 1, 16, 132, &g, lens.data()).is_ok());
  EXPECT_EQ(g.host_max_seq_pages, 10);
  ASSERT_TRUE(decode_plan_geometry(4, 1, 16, 132, &g).is_ok());
  EXPECT_EQ(g.host_max_seq_pages, 0);  // no seqlens: unknown, nothing to check

  const std::vector<int32_t> negative = {64, -1};
  const Status neg = decode_plan_geometry(2, 1, 16, 132, &g, negative.data());
  EXPECT_EQ(neg.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(neg.to_string().find("seqlens[1] = -1"), std::string::npos) << neg.to_string();

  ASSERT_TRUE(decode_plan_geometry(4, 1, 16, 132, &g, lens.data()).is_ok());
  std::vector<int32_t> table(4 * 9, 0), parts(size_t(g.num_parts) * kPlanPartInts), offsets(5);
  std::vector<int32_t> seqlens = lens;
  const TensorView sl = TensorView::contiguous(seqlens.data(), DType::kInt32, {4});
  const DecodePlanView plan{parts.data(), offsets.data(), g.num_parts};
  const Status narrow = ref::plan_decode(sl, TensorView::contiguous(table.data(), DType::kInt32, {4, 9}), g, plan);
  EXPECT_EQ(narrow.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(narrow.to_string().find("seqlens[1] = 640 needs more blocks than block_table"), std::string::npos)
      << narrow.to_string();
  const Status width =
      check_block_table_width("plan_decode", TensorView::contiguous(table.data(), DType::kInt32, {4, 9}), g);
  EXPECT_EQ(width.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(width.to_string().find("has 9 pages per row, the step's longest sequence needs 10"), std::string::npos)
      << width.to_string();
  table.resize(4 * 10, 0);
  EXPECT_TRUE(ref::plan_decode(sl, TensorView::contiguous(table.data(), DType::kInt32, {4, 10}), g, plan).is_ok());
  EXPECT_TRUE(check_block_table_width("mla_decode", TensorView::contiguous(table.data(), DType::kInt32, {4, 10}), g)
                  .is_ok());
  const Status named =
      check_block_table_width("mla_decode", TensorView::contiguous(table.data(), DType::kInt32, {4, 2}), g);
  EXPECT_EQ(named.op(), "mla_decode");
}

TEST(PlanDecode, SingleLongSequenceSplitsAcrossAllParts) {
  const std::vector<int32_t> sl = {8192};  // 128 blocks
  Plan p = make_plan(sl, 1, 16, 132);
  check_plan_properties(sl, p);
  EXPECT_GT(p.offsets[1], 32);  // spread over many SMs
}

TEST(PlanDecode, ZeroLengthAndTinySequences) {
  const std::vector<int32_t> sl = {0, 1, 0, 64, 65, 0};
  Plan p = make_plan(sl, 1, 128, 132);
  check_plan_properties(sl, p);
  EXPECT_EQ(p.offsets[1] - p.offsets[0], 0);  // seqlen 0: no split, the combine writes zeros / -inf
  EXPECT_EQ(p.offsets[3] - p.offsets[2], 0);
}

TEST(PlanDecode, AllZeroBatch) {
  const std::vector<int32_t> sl = {0, 0, 0};
  Plan p = make_plan(sl, 2, 32, 132);
  check_plan_properties(sl, p);
  EXPECT_EQ(p.offsets[3], 0);
}

TEST(PlanDecode, RandomBatchesProperties) {
  std::mt19937 rng(42);
  for (int iter = 0; iter < 300; ++iter) {
    const int batch = 1 + rng() % (iter % 10 == 0 ? 1200 : 160);
    std::vector<int32_t> sl(batch);
    const int mode = iter % 3;  // 0: any lengths; 1: about equal lengths (snapping's case); 2: a few long among short
    const int base = 64 + rng() % 12000;
    for (auto& x : sl) {
      if (mode == 0) x = (rng() % 5 == 0) ? int32_t(rng() % 3) : int32_t(rng() % 20000);
      if (mode == 1) x = base + int32_t(rng() % (base / 16 + 1));
      if (mode == 2) x = rng() % 20 == 0 ? int32_t(30000 + rng() % 70000) : int32_t(rng() % 1500);
    }
    const int h_q = 16 << (rng() % 4);
    const int s_q = 1 + rng() % 4;
    const int sms = 1 + rng() % 140;
    DecodePlanTuning tune;
    tune.seq_cost = rng() % 6;
    tune.min_part_cost = 1 + rng() % 4;
    tune.split_cost = rng() % 9;
    Plan p = make_plan(sl, s_q, h_q, sms, tune, int(rng() % 3 ? rng() % 7 : 0));
    check_plan_properties(sl, p, tune);
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << iter << " batch " << batch << " sms " << sms;
      return;
    }
  }
}

// decode_part_pages_from_record (the fp8 16-row kernel's lead and L2 policy size a part with it): the part's true page
// count whenever the part touches at most two sequences; beyond, every sequence in between counted as one page, so at
// most the true count plus the empty ones among them. Random plans (with empty sequences), parts in one, two and many
// sequences each seen.
TEST(PlanDecode, PartPagesFromRecordIsExactForTwoSequencesAndCountsOnePagePerSequenceBeyond) {
  std::mt19937 rng(7);
  int seen_one = 0, seen_two = 0, seen_many = 0, seen_under = 0;
  for (int iter = 0; iter < 200; ++iter) {
    const int batch = 1 + rng() % (iter % 4 == 0 ? 600 : 140);
    std::vector<int32_t> sl(batch);
    for (auto& x : sl) x = rng() % 6 == 0 ? int32_t(rng() % 3) : int32_t(rng() % (iter % 2 ? 9000 : 700));
    Plan p = make_plan(sl, 1, 16 << (rng() % 4), 1 + rng() % 140);
    for (int part = 0; part < p.g.num_parts; ++part) {
      const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
      int pages = 0, empty_between = 0;
      for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < batch; ++b) {
        const int lo = b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0;
        const int hi = b == r[kPartEndBatch] ? r[kPartEndBlock] : decode_num_blocks(sl[b]);
        pages += std::max(0, hi - lo);
        if (b != r[kPartBeginBatch] && b != r[kPartEndBatch]) empty_between += decode_num_blocks(sl[b]) == 0;
      }
      const int got = decode_part_pages_from_record(r);
      const int span = r[kPartEndBatch] - r[kPartBeginBatch];
      if (span <= 1) {
        EXPECT_EQ(got, pages) << "iteration " << iter << " part " << part << " span " << span;
        ++(span == 0 ? seen_one : seen_two);
      } else {
        EXPECT_LE(got, pages + empty_between) << "iteration " << iter << " part " << part << " span " << span;
        ++seen_many;
        seen_under += got < pages;
      }
    }
    if (HasFailure()) return;
  }
  EXPECT_GT(seen_one, 0);
  EXPECT_GT(seen_two, 0);
  EXPECT_GT(seen_many, 0);
  EXPECT_GT(seen_under, 0);  // the bound is strict somewhere: the case the kernels' comments warn of
}

// b128 (the bench's large rows): 132 parts of h_q 16 or 2 x 66 of h_q 128 would cut nearly every sequence
// in two at the plain boundaries; whole sequences cost at most 3 % more makespan and no partials.
TEST(PlanDecode, UniformBatchNearPartCountIsNotCut) {
  for (int h_q : {16, 128})
    for (int len : {4096, 8192, 8191, 6000}) {
      const std::vector<int32_t> sl(128, len);
      Plan p = make_plan(sl, 1, h_q, 132);
      check_plan_properties(sl, p);
      for (int n : splits_of(p)) ASSERT_EQ(n, 1) << "h_q " << h_q << " len " << len;
      // Parts hold 1 (h_q 16) or at most 2 (h_q 128) whole sequences.
      const int64_t seq = decode_num_blocks(len) + DecodePlanTuning{}.seq_cost;
      EXPECT_LE(max_part_cost(sl, p), (h_q == 16 ? 1 : 2) * seq);
    }
}

// Fewer, longer sequences than parts: each is still cut (b32 h_q 16 s8192: about 4 parts each), but a
// boundary within per_part / 8 of a sequence end moves there instead of leaving a sliver.
TEST(PlanDecode, FewLongSequencesAreCutWithoutSlivers) {
  const std::vector<int32_t> sl(32, 8192);  // 132 cost each; per_part 32 at 132 parts, 64 at 66
  for (int h_q : {16, 128}) {
    Plan p = make_plan(sl, 1, h_q, 132);
    check_plan_properties(sl, p);
    const int expect = h_q == 16 ? 4 : 2;  // 132 / 32 -> 4 pieces (the 4-block tail snapped); 132 / 64 -> 2
    for (int n : splits_of(p)) EXPECT_EQ(n, expect) << "h_q " << h_q;
  }
  const std::vector<int32_t> one = {8192};
  Plan p = make_plan(one, 1, 16, 132);
  EXPECT_EQ(splits_of(p)[0], 128);  // batch 1: per_part = min_part_cost, one block per part
}

// The pieces of a cut sequence hold equal page counts (each pays the same fixed price), so on the uniform
// bench batches every busy part holds the same pages: b32 s4096 at h_q 16 is 4 x 16 pages per sequence (the
// cost-equal cut of sessions 4-6 gave 13 / 17 / 17 / 17), at h_q 128 2 x 32 (was 30 / 34); s8192 32 / 64.
TEST(PlanDecode, CutPiecesHoldEqualPages) {
  for (int len : {4096, 8192})
    for (int h_q : {16, 128}) {
      const std::vector<int32_t> sl(32, len);
      Plan p = make_plan(sl, 1, h_q, 132);
      check_plan_properties(sl, p);
      const int pieces = h_q == 16 ? 4 : 2, want = len / 64 / pieces;
      for (int n : splits_of(p)) ASSERT_EQ(n, pieces) << "h_q " << h_q << " len " << len;
      for (int part = 0; part < p.g.num_parts; ++part) {
        const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
        int pages = 0;
        for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < 32; ++b) {
          const int hi = b == r[kPartEndBatch] ? r[kPartEndBlock] : len / 64;
          pages += hi - (b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0);
        }
        if (pages != 0) {
          EXPECT_EQ(pages, want) << "h_q " << h_q << " len " << len << " part " << part;
        }
      }
    }
}

// Sequences of 0.69 parts each: whole, they would pack 1 or 2 to a part (~1.4 x the plain makespan), so
// the plain cut must win and stay balanced.
TEST(PlanDecode, SnappingThatUnbalancesIsRejected) {
  const std::vector<int32_t> sl(190, 64 * 70);  // 74 cost each; 190 * 74 / 132 -> per_part 107
  Plan p = make_plan(sl, 1, 16, 132);
  check_plan_properties(sl, p);
  EXPECT_LE(max_part_cost(sl, p), 107 + 4 + 2 * 4);
  int cut = 0;
  for (int n : splits_of(p)) cut += n > 1;
  EXPECT_GT(cut, 60);
}

// A long sequence among short ones is spread over many parts, and the plan stays balanced (at this mix
// the snapped candidate's junction part is larger, so the plain cut is the one taken).
TEST(PlanDecode, LongSequenceAmongShortOnesIsCut) {
  std::vector<int32_t> sl(100, 512);  // 12 cost each
  sl[37] = 65536;                     // 1028 cost: ~45 % of the total
  Plan p = make_plan(sl, 1, 16, 132);
  check_plan_properties(sl, p);
  EXPECT_GT(splits_of(p)[37], 40);
  EXPECT_LE(max_part_cost(sl, p), 17 + 4 + 2 * 4);  // per_part 17
  // A long sequence among a few short and many zero-length ones (no cost positions): only the long
  // one is cut, since whole short ones cost no more here.
  std::vector<int32_t> z(64, 0);
  z[5] = 100000;
  z[6] = 100;
  z[60] = 3000;
  Plan q = make_plan(z, 2, 128, 132);
  check_plan_properties(z, q);
  const std::vector<int> n = splits_of(q);
  EXPECT_GT(n[5], 10);
  EXPECT_EQ(n[6], 1);
  EXPECT_EQ(n[60], 1);
}

// h_q 128 b32 s512 (8 pages, cost 12, per_part 6 at 66 parts): shape-blind, every sequence is cut in two
// (2 x 128 KB of partials per head tile for 8 pages of KV); at price 3 (session 6's, for 64 rows) per_part +
// price = 9 leaves each whole, on 32 of the 66 parts; at price 1 (session 9's) it stays cut (round(12 / 7) = 2).
// Longer rows keep their cuts (s4096: 68 / 36 -> 2), and batch 1 keeps the plain cut it has at price 0.
TEST(PlanDecode, SplitPriceKeepsShortSequencesWhole) {
  const std::vector<int32_t> s512(32, 512);
  for (int price : {0, 1, 3, 6}) {
    Plan p = make_plan(s512, 1, 128, 132, {}, price);
    check_plan_properties(s512, p);
    for (int n : splits_of(p)) ASSERT_EQ(n, price >= 3 ? 1 : 2) << "price " << price;
  }
  for (int len : {4096, 8192}) {
    const std::vector<int32_t> sl(32, len);
    Plan p = make_plan(sl, 1, 128, 132, {}, 3);
    check_plan_properties(sl, p);
    for (int n : splits_of(p)) ASSERT_EQ(n, 2) << "len " << len;
  }
  for (int len : {512, 4096}) {
    const std::vector<int32_t> one = {len};
    Plan p0 = make_plan(one, 1, 128, 132, {}, 0), p3 = make_plan(one, 1, 128, 132, {}, 3);
    EXPECT_EQ(p3.parts, p0.parts) << "len " << len;
    EXPECT_EQ(p3.offsets, p0.offsets) << "len " << len;
  }
  // s8192 (cost 132 over 66 parts): 64 pieces of 2 pages up to price 1, 43 of 3 at price 2 (raise weight 6)
  // (decode_plan_per_part).
  const std::vector<int32_t> s8192 = {8192};
  EXPECT_EQ(splits_of(make_plan(s8192, 1, 128, 132, {}, 0))[0], 64);
  EXPECT_EQ(splits_of(make_plan(s8192, 1, 128, 132, {}, 1))[0], 64);
  EXPECT_EQ(splits_of(make_plan(s8192, 1, 128, 132, {}, 2))[0], 43);
  // ... but a 2-page sequence is no longer cut into two one-page pieces (1 + 4 + 7 each vs 2 + 4 whole).
  const std::vector<int32_t> tiny = {100};
  EXPECT_EQ(splits_of(make_plan(tiny, 1, 128, 132, {}, 0))[0], 2);
  EXPECT_EQ(splits_of(make_plan(tiny, 1, 128, 132, {}, 3))[0], 1);
  // The threshold moves with the price: 32 x s1024 at h_q 128 (cost 20, per_part 10) is cut in two up to
  // price 3 (round(20 / 13) = 2) and kept whole from price 6 (round(20 / 16) = 1; the plain cut's largest
  // part, 10 + 4 + 4 + 6 = 24, is then larger than a whole sequence's 20).
  const std::vector<int32_t> s1024(32, 1024);
  for (int price : {0, 3, 6}) {
    Plan p = make_plan(s1024, 1, 128, 132, {}, price);
    check_plan_properties(s1024, p);
    for (int n : splits_of(p)) ASSERT_EQ(n, price >= 6 ? 1 : 2) << "price " << price;
  }
}

// decode_plan_per_part: the plain spacing p0 = max(ceil(total / parts), min_part_cost), except for batch 1 with
// >= 3/4 of the parts busy at p0: the least p >= p0 minimizing p + c total / p, c = 3 price / parts (ties: the
// smaller p), found by brute force in exact integer arithmetic (T(p) <= T(q) <=> P p^2 q + 3 price total q <=
// P q^2 p + 3 price total p).
TEST(PlanDecode, PerPartWeighsPagesAgainstPartials) {
  std::mt19937 rng(8);
  int raised = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    const int parts = 1 + rng() % 300;
    const int batch = rng() % 2 ? 1 : 2 + rng() % 100;
    const int64_t total = rng() % 4 == 0 ? int64_t(rng() % 50) : int64_t(rng() % (rng() % 2 ? 1200 : 200000));
    const int price = rng() % 8;
    DecodePlanTuning tune;
    tune.min_part_cost = 1 + rng() % 5;
    const int64_t p0 = std::max<int64_t>((total + parts - 1) / parts, tune.min_part_cost);
    int64_t best = p0;
    if (batch == 1 && 4 * total >= 3 * p0 * parts) {
      for (int64_t q = p0 + 1; q <= p0 + 40; ++q) {
        const __int128 lhs = __int128(parts) * best * best * q + __int128(3) * price * total * q;
        const __int128 rhs = __int128(parts) * q * q * best + __int128(3) * price * total * best;
        if (rhs < lhs) best = q;
      }
    }
    raised += best > p0;
    ASSERT_EQ(decode_plan_per_part(total, batch, parts, tune, price), best)
        << "total " << total << " batch " << batch << " parts " << parts << " price " << price << " min "
        << tune.min_part_cost;
  }
  EXPECT_GT(raised, 100);  // the raise itself was exercised
  // Price 0 (h_q 16): the plain spacing.
  EXPECT_EQ(decode_plan_per_part(132, 1, 132, {}, 0), 1);
  EXPECT_EQ(decode_plan_per_part(132, 1, 66, {}, 0), 2);
}

// The h_q 128 batch-1 rows on 64-row tiles (2 head tiles x 66 parts, price 1, raise weight 3): 1-page pieces at s512 (8
// splits), 2 at s4096 (32) and s8192 (64; 43 of 3 with session 8's weight 4.5, which lost 1.5 us fp8_ds and gained at
// most 0.2 fp8 with fcb23dd's partials: NOTES_plan.md "Session 9, price"), every piece within 2 pages; h_q 16 (price 0)
// keeps its 1-page pieces.
TEST(PlanDecode, BatchOnePiecesFollowThePartialTraffic) {
  const int expect_splits[3] = {8, 32, 64}, expect_pages[3] = {1, 2, 2};
  const int lens[3] = {512, 4096, 8192};
  for (int i = 0; i < 3; ++i) {
    const std::vector<int32_t> one = {lens[i]};
    Plan p = make_plan(one, 1, 128, 132);
    check_plan_properties(one, p);
    EXPECT_EQ(splits_of(p)[0], expect_splits[i]) << "len " << lens[i];
    for (int part = 0; part < p.g.num_parts; ++part) {
      const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
      if (r[kPartBeginBatch] != 0) continue;
      const int hi = r[kPartEndBatch] == 0 ? r[kPartEndBlock] : decode_num_blocks(lens[i]);
      EXPECT_LE(hi - r[kPartBeginBlock], expect_pages[i]) << "len " << lens[i] << " part " << part;
    }
  }
  const std::vector<int32_t> one = {8192};
  EXPECT_EQ(splits_of(make_plan(one, 1, 16, 132))[0], 128);
  // h_q 64 (one tile, 132 parts): s8192 64 x 2 pages instead of 128 x 1; s4096 (half the parts idle at 1 page) and
  // h_q 128 s2048 keep their 1-page pieces; a batch of two is never raised (h_q 64 b2 s8192: 128 x 2).
  EXPECT_EQ(splits_of(make_plan(one, 1, 64, 132))[0], 64);
  // h_q 32 (price 0): 1-page pieces (2-page ones cost +1.75..+2.5 us fp8 / bf16 at s6144 / s8192, session 9).
  EXPECT_EQ(splits_of(make_plan(one, 1, 32, 132))[0], 128);
  EXPECT_EQ(splits_of(make_plan({4096}, 1, 64, 132))[0], 64);
  EXPECT_EQ(splits_of(make_plan({2048}, 1, 128, 132))[0], 32);
  const std::vector<int32_t> two = {8192, 8192};
  Plan p2 = make_plan(two, 1, 64, 132);
  check_plan_properties(two, p2);
  EXPECT_EQ(splits_of(p2)[0] + splits_of(p2)[1], 128);
}

TEST(PlanDecode, RejectsNegativeSeqlenAndMissingBuffers) {
  const std::vector<int32_t> sl = {5, -1};
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(2, 1, 16, 132, &g).is_ok());
  std::vector<int32_t> parts(size_t(g.num_parts) * kPlanPartInts), off(3);
  auto t = TensorView::contiguous(sl.data(), DType::kInt32, {2});
  Status s = ref::plan_decode(t, g, {parts.data(), off.data(), g.num_parts});
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("seqlens[1] = -1"), std::string::npos);
  EXPECT_FALSE(ref::plan_decode(t, g, {nullptr, off.data(), g.num_parts}).is_ok());
}

// The start hints (fields 5-7), stated from the cursor's side: a part's items are its (sequence, block)
// pairs in walk order; field 5 is seqlens of its first sequence, field 6 / 7 the block-table entry of its
// first / second item when that item is (b0, k0) / (b0, k0 + 1), else -1. Without a block table the page
// fields are -1 and everything else is the same plan.
TEST(PlanDecode, StartHintsNameTheFirstItemsPages) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    const int batch = 1 + rng() % (iter % 10 == 0 ? 600 : 150);
    std::vector<int32_t> sl(batch);
    for (auto& x : sl) x = rng() % 4 == 0 ? int32_t(rng() % 130) : int32_t(rng() % 9000);
    int max_blocks = 1;
    for (int32_t x : sl) max_blocks = std::max(max_blocks, decode_num_blocks(x) + int(rng() % 3));
    std::vector<int32_t> bt(size_t(batch) * max_blocks);
    for (auto& x : bt) x = int32_t(rng() % 1000000);  // distinct enough that a wrong entry shows
    const int h_q = 16 << (rng() % 4), s_q = 1 + rng() % 4, sms = 1 + rng() % 140;
    DecodePlanTuning tune;
    tune.seq_cost = rng() % 6;
    tune.min_part_cost = 1 + rng() % 4;
    tune.split_cost = rng() % 9;
    Plan bare = make_plan(sl, s_q, h_q, sms, tune, int(rng() % 5));
    Plan p = bare;
    auto slv = TensorView::contiguous(sl.data(), DType::kInt32, {batch});
    auto btv = TensorView::contiguous(bt.data(), DType::kInt32, {batch, max_blocks});
    ASSERT_TRUE(ref::plan_decode(slv, btv, p.g, {p.parts.data(), p.offsets.data(), p.g.num_parts}, tune).is_ok());
    EXPECT_EQ(p.offsets, bare.offsets);
    for (int part = 0; part < p.g.num_parts; ++part) {
      const int32_t* r = &p.parts[size_t(part) * kPlanPartInts];
      const int32_t* r0 = &bare.parts[size_t(part) * kPlanPartInts];
      for (int f = 0; f <= kPartFirstSeqlen; ++f) EXPECT_EQ(r[f], r0[f]) << "field " << f;
      EXPECT_EQ(r0[kPartFirstPage], -1);
      EXPECT_EQ(r0[kPartSecondPage], -1);
      std::vector<std::pair<int, int>> items;  // the part's first two items, in walk order
      for (int b = r[kPartBeginBatch]; b <= r[kPartEndBatch] && b < batch && items.size() < 2; ++b) {
        const int lo = b == r[kPartBeginBatch] ? r[kPartBeginBlock] : 0;
        const int hi = b == r[kPartEndBatch] ? r[kPartEndBlock] : decode_num_blocks(sl[b]);
        for (int k = lo; k < hi && items.size() < 2; ++k) items.emplace_back(b, k);
      }
      const int b0 = r[kPartBeginBatch], k0 = r[kPartBeginBlock];
      EXPECT_EQ(r[kPartFirstSeqlen], b0 < batch ? sl[b0] : -1);
      for (int i = 0; i < 2; ++i) {
        const bool hinted = int(items.size()) > i && items[i] == std::make_pair(b0, k0 + i);
        EXPECT_EQ(r[kPartFirstPage + i], hinted ? bt[size_t(b0) * max_blocks + k0 + i] : -1)
            << "item " << i << " of part " << part;
      }
    }
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << iter << " batch " << batch << " sms " << sms;
      return;
    }
  }
}

TEST(PlanDecode, RejectsABlockTableThatCannotHoldTheSequences) {
  const std::vector<int32_t> sl = {130, 64};  // 3 and 1 blocks
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(2, 1, 16, 132, &g).is_ok());
  std::vector<int32_t> parts(size_t(g.num_parts) * kPlanPartInts), off(3), bt(2 * 3, 0);
  const DecodePlanView plan{parts.data(), off.data(), g.num_parts};
  auto slv = TensorView::contiguous(sl.data(), DType::kInt32, {2});
  EXPECT_TRUE(ref::plan_decode(slv, TensorView::contiguous(bt.data(), DType::kInt32, {2, 3}), g, plan).is_ok());
  Status s = ref::plan_decode(slv, TensorView::contiguous(bt.data(), DType::kInt32, {2, 2}), g, plan);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("seqlens[0] = 130"), std::string::npos) << s.to_string();
  EXPECT_FALSE(ref::plan_decode(slv, TensorView::contiguous(bt.data(), DType::kInt32, {3, 2}), g, plan).is_ok());
  EXPECT_FALSE(ref::plan_decode(slv, TensorView::contiguous(bt.data(), DType::kInt32, {6}), g, plan).is_ok());
  TensorView strided = TensorView::contiguous(bt.data(), DType::kInt32, {2, 3});
  strided.stride[1] = 2;
  EXPECT_FALSE(ref::plan_decode(slv, strided, g, plan).is_ok());
}

// The host plan zeroes the fused merge's counters when it is given them (the device plan does too: GPU tests).
TEST(PlanDecode, ZeroesTheMergeCounters) {
  const std::vector<int32_t> sl = {5000, 0, 64, 9000};
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(4, 2, 128, 132, &g).is_ok());  // 256 rows: 4 head tiles
  ASSERT_EQ(decode_plan_counters(g), 4 * 4);
  std::vector<int32_t> parts(size_t(g.num_parts) * kPlanPartInts), off(5), cnt(decode_plan_counters(g) + 1, -9);
  const DecodePlanView plan{parts.data(), off.data(), g.num_parts, cnt.data()};
  ASSERT_TRUE(ref::plan_decode(TensorView::contiguous(sl.data(), DType::kInt32, {4}), g, plan).is_ok());
  for (int64_t i = 0; i < decode_plan_counters(g); ++i) EXPECT_EQ(cnt[i], 0) << i;
  EXPECT_EQ(cnt.back(), -9);  // and nothing past them
}

// The caller's rule for the fused merge: steps whose sequences are all whole (nothing to merge), whatever the batch.
TEST(PlanDecode, FusedMergeRuleWantsStepsWithoutCuts) {
  auto fused = [](const std::vector<int32_t>& sl, int h_q) {
    const Plan p = make_plan(sl, 1, h_q, 132);
    return decode_plan_wants_fused_merge(p.g, p.offsets.data());
  };
  EXPECT_TRUE(fused(std::vector<int32_t>(128, 8192), 16));    // uniform b128: nothing is cut
  EXPECT_TRUE(fused(std::vector<int32_t>(128, 512), 128));
  EXPECT_TRUE(fused(std::vector<int32_t>(48, 2048), 128));    // b48 of 32 pages on 66 columns: whole sequences
  EXPECT_FALSE(fused(std::vector<int32_t>(64, 4096), 16));    // b64 on 132 parts: every sequence in 2 pieces
  EXPECT_FALSE(fused(std::vector<int32_t>(100, 4096), 128));  // b100 on 66 columns: some cut
  EXPECT_FALSE(fused(std::vector<int32_t>(32, 4096), 128));
  EXPECT_FALSE(fused(std::vector<int32_t>(1, 8192), 16));
  std::vector<int32_t> skewed(64, 64);  // 63 one-page sequences and one of 128k tokens: cut into many pieces
  skewed[17] = 131072;
  EXPECT_FALSE(fused(skewed, 16));
  // The rule reads split_offsets alone: one piece per sequence but sequence 1, which gets `extra` more.
  DecodePlanGeometry g;
  ASSERT_TRUE(decode_plan_geometry(64, 1, 16, 132, &g).is_ok());
  auto offsets = [](int extra) {
    std::vector<int32_t> off(65);
    for (int b = 0; b <= 64; ++b) off[b] = b + (b >= 2 ? extra : 0);
    return off;
  };
  EXPECT_TRUE(decode_plan_wants_fused_merge(g, offsets(0).data()));   // 1 piece each
  EXPECT_FALSE(decode_plan_wants_fused_merge(g, offsets(1).data()));  // 2 pieces
}

// The combine grid the launcher picks from the shapes (query rows per sequence, batch): column chunks double while
// rows x batch x chunks x 2 fits one wave of 528 CTAs; one CTA per item while the items fit that wave; the direct
// grid's 8-chunk form (rows x batch <= 66) merges rows of up to 16 splits in one thread group, every other grid 8.
TEST(PlanDecode, CombineGridFollowsTheShapes) {
  struct Want {
    int rows, batch, chunks;
    int64_t items, ctas;
    bool direct;
    int few;
  };
  const Want wants[] = {
      {16, 1, 8, 128, 128, true, 16},       // h_q 16 b1: every SM reads a share of a long row's partials
      {32, 1, 8, 256, 256, true, 16},       // h_q 32 b1
      {64, 1, 8, 512, 512, true, 16},       // h_q 64 b1, h_q 16 b4
      {66, 1, 8, 528, 528, true, 16},       // 66 x 4 x 2 = 528: the last 8-chunk size
      {67, 1, 4, 268, 268, true, 8},        // ... one row more: 4 chunks, the 8-split instance
      {128, 1, 4, 512, 512, true, 8},       // h_q 128 b1
      {16, 32, 1, 512, 512, true, 8},       // h_q 16 b32: one chunk, still one wave
      {16, 33, 1, 528, 528, true, 8},       // exactly one wave
      {16, 34, 1, 544, 528, false, 8},      // past it: the list kernel over one wave
      {128, 32, 1, 4096, 528, false, 8},    // h_q 128 b32
      {4 * 128, 128, 1, 65536, 528, false, 8},  // s_q 4 x h_q 128, b128
  };
  for (const Want& w : wants) {
    const DecodeCombineGrid g = decode_combine_grid(w.rows, w.batch);
    SCOPED_TRACE("rows " + std::to_string(w.rows) + " batch " + std::to_string(w.batch));
    EXPECT_EQ(g.chunks, w.chunks);
    EXPECT_EQ(g.items, w.items);
    EXPECT_EQ(g.ctas, w.ctas);
    EXPECT_EQ(g.direct, w.direct);
    EXPECT_EQ(g.few_splits, w.few);
  }
}

// A many-split row on the direct grid uses the fewest column chunks whose split lanes (2 per chunk) take its splits in
// one load batch of 8: 9-16 splits 1 chunk, 17-32 2, 33-64 4, more all 8; never more than the grid has.
TEST(PlanDecode, CombineManyChunksTakeARowInOneLoadBatch) {
  EXPECT_EQ(decode_combine_many_chunks(9, 8), 1);
  EXPECT_EQ(decode_combine_many_chunks(16, 8), 1);
  EXPECT_EQ(decode_combine_many_chunks(17, 8), 2);
  EXPECT_EQ(decode_combine_many_chunks(32, 8), 2);
  EXPECT_EQ(decode_combine_many_chunks(33, 8), 4);
  EXPECT_EQ(decode_combine_many_chunks(64, 8), 4);
  EXPECT_EQ(decode_combine_many_chunks(65, 8), 8);
  EXPECT_EQ(decode_combine_many_chunks(128, 8), 8);
  EXPECT_EQ(decode_combine_many_chunks(1000, 8), 8);
  EXPECT_EQ(decode_combine_many_chunks(64, 4), 4);  // h_q 128 b1: a 4-chunk grid
  EXPECT_EQ(decode_combine_many_chunks(100, 4), 4);
  EXPECT_EQ(decode_combine_many_chunks(100, 1), 1);
  // combine_many indexes with shifts: every grid's chunk count, and every count taken from it, is a power of two.
  for (int rows = 1; rows <= 512; rows *= 2) {
    for (int batch = 1; batch <= 1024; batch += batch < 8 ? 1 : 37) {
      const int chunks = decode_combine_grid(rows, batch).chunks;
      ASSERT_TRUE(chunks >= 1 && chunks <= kCombineMaxChunks && (chunks & (chunks - 1)) == 0) << rows << " " << batch;
      for (int n = 9; n <= 300; ++n) {
        const int u = decode_combine_many_chunks(n, chunks);
        ASSERT_TRUE(u >= 1 && u <= chunks && (u & (u - 1)) == 0) << rows << " " << batch << " " << n;
      }
    }
  }
}

// decode_plan_spreads_sequences picks the 64-row kernels' plain-store form (mla_decode.cu plain_out_knob's auto,
// decode_fp8/variant64.h). It is a shape rule (2 x batch <= num_parts). On a step of about equal lengths of >= 10
// pages it means the plan cuts nearly every sequence (>= 80 %), so the TMA-store epilogue the form drops would seldom
// run. It can hold where few or none are cut: on short sequences (today's tuning, DecodePlanTuning's defaults, keeps
// them whole: seq_cost and the split price weigh a cut against their few pages) and on skewed steps (only the long
// ones are cut). The form is correct there too; its direct segments are plain stores.
TEST(PlanDecode, SpreadStepsOfEqualLengthsCutNearlyEverySequence) {
  std::mt19937 rng(11);
  int spread_steps = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int batch = 1 + rng() % 140;
    const int base = 577 + rng() % 12000;  // >= 10 pages; 3-9 page steps of 17-66 sequences kept up to all whole
    std::vector<int32_t> sl(batch);
    for (auto& x : sl) x = base + int32_t(rng() % (base / 16 + 1));
    const int h_q = 16 << (rng() % 4);
    const Plan p = make_plan(sl, 1, h_q, 132, {}, -1, /*host_seqlens=*/true);
    if (p.g.tile_rows != kDecodeRowsPerCta || !decode_plan_spreads_sequences(p.g)) continue;
    ++spread_steps;
    int cut = 0;
    for (int b = 0; b < batch; ++b) cut += p.offsets[b + 1] - p.offsets[b] > 1;
    // Nearly: the low end seen is h_q 128 b33 of 14-15 pages, 27 of 33 cut (rare; a helper drew 200k such steps).
    EXPECT_GE(100 * cut, 80 * batch) << "batch " << batch << " h_q " << h_q << " length " << base;
  }
  EXPECT_GE(spread_steps, 50);  // the loop saw enough spread steps to mean something
  auto whole = [](const Plan& p, int b) { return p.offsets[b + 1] - p.offsets[b] == 1; };
  // With today's tuning (seq_cost 3 or 5, or split price 0, would cut all 39 here). The geometry knows it from the
  // seqlens (host_uncut), so the step is not taken for a spread one; a graph's geometry (shapes only) cannot know.
  const std::vector<int32_t> short_lens(39, 269);  // 5 pages each
  const Plan short_step = make_plan(short_lens, 1, 64, 132, {}, -1, true);
  ASSERT_EQ(short_step.g.tile_rows, kDecodeRowsPerCta);
  EXPECT_TRUE(short_step.g.host_uncut);
  EXPECT_FALSE(decode_plan_spreads_sequences(short_step.g));
  EXPECT_TRUE(decode_plan_spreads_sequences(make_plan(short_lens, 1, 64, 132).g));
  for (int b = 0; b < 39; ++b) EXPECT_TRUE(whole(short_step, b)) << b;
  std::vector<int32_t> skewed(13, 640);  // 12 sequences of 10 pages and one of 1024
  skewed[5] = 65536;
  const Plan skewed_step = make_plan(skewed, 1, 128, 132, {}, -1, true);
  ASSERT_EQ(skewed_step.g.tile_rows, kDecodeRowsPerCta);
  EXPECT_FALSE(skewed_step.g.host_uncut);
  EXPECT_TRUE(decode_plan_spreads_sequences(skewed_step.g));
  for (int b = 0; b < 13; ++b) EXPECT_EQ(whole(skewed_step, b), b != 5) << b;
}

// host_uncut is the default-tuned host plan's "every sequence in one piece" (decode_plan_wants_fused_merge of its
// split_offsets), known only from host seqlens. Random steps of short and long, equal and mixed lengths, every h_q and
// s_q; both answers must be seen, or the comparison means nothing.
TEST(PlanDecode, GeometryKnowsWhetherThePlanCutsAnything) {
  std::mt19937 rng(59);
  int uncut = 0, cut = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int batch = 1 + rng() % 140;
    const int base = 1 + rng() % (iter % 2 ? 700 : 9000);
    std::vector<int32_t> sl(batch);
    for (auto& x : sl) x = iter % 3 ? base : int32_t(rng() % (base + 1));
    const int h_q = 16 << (rng() % 4), s_q = 1 + rng() % 4;
    const Plan p = make_plan(sl, s_q, h_q, 132, {}, -1, /*host_seqlens=*/true);
    const bool want = decode_plan_wants_fused_merge(p.g, p.offsets.data());
    EXPECT_EQ(p.g.host_uncut, want) << "batch " << batch << " h_q " << h_q << " s_q " << s_q << " base " << base;
    (want ? uncut : cut) += 1;
    EXPECT_FALSE(make_plan(sl, s_q, h_q, 132).g.host_uncut);  // no seqlens: unknown, reported as cut
  }
  EXPECT_GE(uncut, 50);
  EXPECT_GE(cut, 50);
  // The sweep's shapes (bench/decode/NOTES.md "Session 59"): h_q 128 b24 s320 stays whole, s384 is cut.
  EXPECT_TRUE(make_plan(std::vector<int32_t>(24, 320), 1, 128, 132, {}, -1, true).g.host_uncut);
  EXPECT_FALSE(make_plan(std::vector<int32_t>(24, 384), 1, 128, 132, {}, -1, true).g.host_uncut);
}

}  // namespace
}  // namespace mla

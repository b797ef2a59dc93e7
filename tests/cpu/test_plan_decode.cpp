// plan_decode: geometry, and properties of the schedule over random batches: every KV block of every
// sequence is covered by exactly one part, parts are contiguous and ordered, split indices are dense,
// the total fits the fixed workspace, and the work is balanced.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "mla/ops/plan_decode.h"

namespace mla {
namespace {

struct Plan {
  DecodePlanGeometry g;
  std::vector<int32_t> parts, offsets;
};

Plan make_plan(const std::vector<int32_t>& seqlens, int s_q, int h_q, int sms, DecodePlanTuning tune = {}) {
  Plan p;
  EXPECT_TRUE(decode_plan_geometry(static_cast<int>(seqlens.size()), s_q, h_q, sms, &p.g).is_ok());
  p.parts.assign(size_t(p.g.num_parts) * kPlanPartInts, -7);
  p.offsets.assign(seqlens.size() + 1, -7);
  auto sl = TensorView::contiguous(seqlens.data(), DType::kInt32, {int64_t(seqlens.size())});
  EXPECT_TRUE(ref::plan_decode(sl, p.g, {p.parts.data(), p.offsets.data(), p.g.num_parts}, tune).is_ok());
  return p;
}

void check_plan_properties(const std::vector<int32_t>& seqlens, const Plan& p, DecodePlanTuning tune = {}) {
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
      cost += hi - lo + tune.seq_cost;
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
  // Balance: no part exceeds its share by more than one sequence's fixed cost (a part that starts a
  // sequence mid-way pays the fixed cost again) plus the rounding of the share.
  const int64_t share = (total_cost + p.g.num_parts - 1) / p.g.num_parts;
  EXPECT_LE(max_cost, share + 2 * tune.seq_cost + tune.min_part_cost + 1);
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

TEST(PlanDecode, GeometryRejectsBadShapes) {
  DecodePlanGeometry g;
  EXPECT_EQ(decode_plan_geometry(0, 1, 16, 132, &g).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_plan_geometry(1, 5, 16, 132, &g).code(), StatusCode::kUnsupported);
  Status s = decode_plan_geometry(1, 1, 24, 132, &g);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.to_string().find("h_q 24"), std::string::npos);
  EXPECT_FALSE(decode_plan_geometry(1, 1, 16, 0, &g).is_ok());
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
    const int batch = 1 + rng() % 160;
    std::vector<int32_t> sl(batch);
    for (auto& x : sl) x = (rng() % 5 == 0) ? int32_t(rng() % 3) : int32_t(rng() % 20000);
    const int h_q = 16 << (rng() % 4);
    const int s_q = 1 + rng() % 4;
    const int sms = 1 + rng() % 140;
    DecodePlanTuning tune;
    tune.seq_cost = rng() % 6;
    tune.min_part_cost = 1 + rng() % 4;
    Plan p = make_plan(sl, s_q, h_q, sms, tune);
    check_plan_properties(sl, p, tune);
    if (HasFailure()) {
      ADD_FAILURE() << "iteration " << iter << " batch " << batch << " sms " << sms;
      return;
    }
  }
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

}  // namespace
}  // namespace mla

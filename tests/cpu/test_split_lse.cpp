// split_lse_spread (tests/common/split_lse.h): the spread of a row's split-lse errors over the pieces that weigh in
// its merge, on hand-made workspaces.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/split_lse.h"

namespace mla::test {
namespace {

// Three sequences, two query rows each: sequence 0 has one piece (slot 0, never counted), sequence 1 three (slots
// 1-3), sequence 2 two (slots 4-5). Layout [slot][row].
struct Workspace {
  std::vector<int32_t> offsets{0, 1, 4, 6};
  std::vector<float> ref = std::vector<float>(6 * 2), kernel = std::vector<float>(6 * 2);
  float& r(int slot, int q) { return ref[slot * 2 + q]; }
  float& k(int slot, int q) { return kernel[slot * 2 + q]; }
  Workspace() {
    for (int s = 0; s < 6; ++s)
      for (int q = 0; q < 2; ++q) r(s, q) = k(s, q) = 10.f + s + 0.5f * q;  // every piece weighs in (<= 2.5 apart)
    r(0, 0) = k(0, 0) = NAN;                                                // a one-piece sequence's slot: poison
  }
};

TEST(SplitLseSpread, ASharedBiasSpreadsNothing) {
  Workspace w;
  for (float& x : w.kernel) x -= 0.3f;
  const SplitLseSpread s = split_lse_spread(w.kernel, w.ref, w.offsets, 2);
  EXPECT_EQ(s.rows, 4);  // sequences 1 and 2, two rows each
  EXPECT_NEAR(s.max_nats, 0.0, 1e-6);
}

TEST(SplitLseSpread, OnePieceOffIsFoundAtItsRow) {
  Workspace w;
  w.k(2, 1) += 1.15f;  // sequence 1's second piece, query row 1
  w.k(5, 0) -= 0.2f;   // sequence 2's second piece, query row 0
  const SplitLseSpread s = split_lse_spread(w.kernel, w.ref, w.offsets, 2);
  EXPECT_NEAR(s.max_nats, 1.15, 1e-5);
  EXPECT_EQ(s.row, 1 * 2 + 1);
}

TEST(SplitLseSpread, PiecesThatDoNotWeighInAreLeftOut) {
  Workspace w;
  w.r(1, 0) = w.k(1, 0) = -83.f;  // 93 nats under sequence 1's top piece: weight e^-93
  w.k(1, 0) += 5.f;               // its error cannot move the output
  EXPECT_NEAR(split_lse_spread(w.kernel, w.ref, w.offsets, 2).max_nats, 0.0, 1e-6);
  // With a weight floor below e^-93 it counts.
  EXPECT_NEAR(split_lse_spread(w.kernel, w.ref, w.offsets, 2, 1e-60).max_nats, 5.0, 1e-5);
}

TEST(SplitLseSpread, ANonFiniteKernelValueIsInfinite) {
  Workspace w;
  w.k(4, 1) = NAN;
  const SplitLseSpread s = split_lse_spread(w.kernel, w.ref, w.offsets, 2);
  EXPECT_TRUE(std::isinf(s.max_nats));
  EXPECT_EQ(s.row, 2 * 2 + 1);
}

TEST(SplitLseSpread, MaskedPiecesAndRowsAreSkipped) {
  Workspace w;
  // Sequence 2, query row 0 sees no key in its second piece (causal: -inf in both); its only other piece leaves the
  // row with one counted piece. Query row 1 sees none at all.
  w.r(5, 0) = w.k(5, 0) = -INFINITY;
  w.r(4, 1) = w.k(4, 1) = w.r(5, 1) = w.k(5, 1) = -INFINITY;
  const SplitLseSpread s = split_lse_spread(w.kernel, w.ref, w.offsets, 2);
  EXPECT_EQ(s.rows, 2);  // sequence 1's two rows only
  EXPECT_NEAR(s.max_nats, 0.0, 1e-6);
}

}  // namespace
}  // namespace mla::test

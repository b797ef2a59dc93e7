// The shared error metrics (tests/common/metrics.h) the GPU suites judge kernels by.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/metrics.h"

namespace mla::test {
namespace {

// A wrong row hides in a case's rel_l2 but not in worst_row, which also names it; an exact result reads 0.
TEST(Metrics, WorstRowFindsOneWrongRowTheCaseHides) {
  const size_t rows = 4096, cols = 512;
  std::mt19937 rng(59);
  std::normal_distribution<double> n01;
  std::vector<double> ref(rows * cols), got;
  for (auto& x : ref) x = n01(rng);
  got = ref;
  for (size_t c = 0; c < cols; ++c) got[1234 * cols + c] = n01(rng);  // another row's values: ~1.4 off
  auto at = [](const std::vector<double>& v) { return [&v](size_t i) { return v[i]; }; };
  const ErrorStats whole = compare(ref.size(), at(got), at(ref));
  const ErrorStats row = worst_row(rows, cols, at(got), at(ref));
  EXPECT_LT(whole.rel_l2, 0.03);  // 1.4 / sqrt(4096): under a 3e-2 case limit
  EXPECT_GT(row.rel_l2, 1.0);
  EXPECT_EQ(row.worst, 1234u);
  EXPECT_EQ(row.n, rows);
  EXPECT_EQ(worst_row(rows, cols, at(ref), at(ref)).rel_l2, 0.0);
}

// Rows whose reference is (near) zero are held to 1e-2 of the RMS row norm, not divided by ~0; non-finite values are
// skipped (compare counts them).
TEST(Metrics, WorstRowFloorsNearZeroRowsAndSkipsNonFinite) {
  const size_t rows = 3, cols = 4;
  std::vector<double> ref = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
  std::vector<double> got = ref;
  got[4] = 1e-3;  // row 1: reference zero, held to 1e-2 of the RMS row norm
  got[8] = NAN;    // skipped: row 2's norm counts its 3 finite values, so the RMS row norm is sqrt(7 / 3)
  auto at = [](const std::vector<double>& v) { return [&v](size_t i) { return v[i]; }; };
  const ErrorStats row = worst_row(rows, cols, at(got), at(ref));
  EXPECT_NEAR(row.rel_l2, 1e-3 / (1e-2 * std::sqrt(7.0 / 3.0)), 1e-12);
  EXPECT_EQ(row.worst, 1u);
}

}  // namespace
}  // namespace mla::test

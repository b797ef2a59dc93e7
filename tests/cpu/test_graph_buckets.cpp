// runner/graph_buckets.h: the CUDA-graph batch buckets a decode-only step pads to (the runner and `mlaserve plan
// decode` share the list).
#include <gtest/gtest.h>

#include <vector>

#include "mla/runner/graph_buckets.h"

namespace mla::runner {
namespace {

TEST(GraphBuckets, DefaultsRunEvery64PastTheFixedListUpToMaxNumSeqs) {
  const std::vector<int> b = decode_graph_buckets({}, 1024, 16384);
  std::vector<int> want = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 160, 192, 224, 256};
  for (int x = 320; x <= 1024; x += 64) want.push_back(x);
  EXPECT_EQ(b, want);
}

TEST(GraphBuckets, CapIsTheSmallerLimitAndAlwaysABucket) {
  // 100 sequences at most: nothing above 100, and 100 itself added.
  EXPECT_EQ(decode_graph_buckets({}, 100, 16384), (std::vector<int>{1, 2, 4, 8, 16, 32, 48, 64, 96, 100}));
  // 40 tokens a step caps the batch at 40 even with 256 sequences allowed.
  EXPECT_EQ(decode_graph_buckets({}, 256, 40), (std::vector<int>{1, 2, 4, 8, 16, 32, 40}));
  // A caller's list: sorted, unique, out-of-range sizes dropped, the cap added.
  EXPECT_EQ(decode_graph_buckets({64, 8, 8, 0, -3, 5000}, 512, 16384), (std::vector<int>{8, 64, 512}));
}

TEST(GraphBuckets, AStepPadsToTheSmallestBucketItFits) {
  const std::vector<int> b = decode_graph_buckets({}, 1024, 16384);
  EXPECT_EQ(decode_graph_bucket(b, 1), 1);
  EXPECT_EQ(decode_graph_bucket(b, 33), 48);
  EXPECT_EQ(decode_graph_bucket(b, 128), 128);
  EXPECT_EQ(decode_graph_bucket(b, 257), 320);
  EXPECT_EQ(decode_graph_bucket(b, 1024), 1024);
  EXPECT_EQ(decode_graph_bucket(b, 1025), 0);  // past the largest: eager
}

}  // namespace
}  // namespace mla::runner

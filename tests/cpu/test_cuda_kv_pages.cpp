// The CUDA backend's page bookkeeping (src/model/cuda/kv_pages.h, host-only): reservation in whole
// 64-token pages, all-or-nothing when the pool is short, shrink undoing a reservation, release returning
// every page, committed lengths.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "model/cuda/kv_pages.h"

namespace mla::model::cuda_backend {
namespace {

TEST(CudaKvPages, ReservesWholePagesAndReleasesThem) {
  KvPages p;
  p.init(10);
  EXPECT_EQ(p.free_pages(), 10);
  EXPECT_TRUE(p.reserve(1, 1));
  EXPECT_EQ(p.num_pages(1), 1);
  EXPECT_TRUE(p.reserve(1, 64));
  EXPECT_EQ(p.num_pages(1), 1);
  EXPECT_TRUE(p.reserve(1, 65));
  EXPECT_EQ(p.num_pages(1), 2);
  EXPECT_TRUE(p.reserve(2, 64 * 8));
  EXPECT_EQ(p.free_pages(), 0);
  std::set<int32_t> ids(p.pages(1).begin(), p.pages(1).end());
  ids.insert(p.pages(2).begin(), p.pages(2).end());
  EXPECT_EQ(ids.size(), 10u);  // distinct
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 9);
  EXPECT_FALSE(p.reserve(3, 1));  // pool empty: refused, nothing handed out
  EXPECT_EQ(p.num_pages(3), 0);
  p.release(2);
  EXPECT_EQ(p.free_pages(), 8);
  EXPECT_TRUE(p.reserve(3, 64 * 8));
  EXPECT_EQ(p.free_pages(), 0);
}

TEST(CudaKvPages, ShortPoolRefusesWholeRequestAndShrinkUndoes) {
  KvPages p;
  p.init(4);
  EXPECT_TRUE(p.reserve(7, 100));  // 2 pages
  EXPECT_FALSE(p.reserve(8, 64 * 3));  // needs 3, 2 free
  EXPECT_EQ(p.free_pages(), 2);
  EXPECT_TRUE(p.reserve(7, 64 * 4));  // grows to 4
  p.shrink(7, 2);
  EXPECT_EQ(p.num_pages(7), 2);
  EXPECT_EQ(p.free_pages(), 2);
  p.commit(7, 100);
  EXPECT_EQ(p.committed(7), 100);
  p.shrink(7, 0);  // committed sequences keep their entry
  EXPECT_EQ(p.committed(7), 100);
  p.release(7);
  EXPECT_EQ(p.committed(7), 0);
  EXPECT_EQ(p.free_pages(), 4);
}

}  // namespace
}  // namespace mla::model::cuda_backend

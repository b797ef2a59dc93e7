// BlockManager: unit behaviour, error values that change nothing, and a long random property test
// against a shadow model (every page free at the end, never owned twice, counts = holders).
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "mla/engine/block_manager.h"

namespace mla::engine {
namespace {

std::vector<const BlockTable*> ptrs(const std::vector<BlockTable>& tables) {
  std::vector<const BlockTable*> out;
  for (const BlockTable& t : tables) out.push_back(&t);
  return out;
}

TEST(BlockManager, GeometryIsValidated) {
  EXPECT_FALSE(BlockManager::validate_geometry(0, 64).is_ok());
  EXPECT_FALSE(BlockManager::validate_geometry(8, 0).is_ok());
  EXPECT_TRUE(BlockManager::validate_geometry(1, 1).is_ok());
}

TEST(BlockManager, AllocateAppendFree) {
  BlockManager bm(4, 64);
  BlockTable t;
  EXPECT_EQ(bm.pages_needed(t, 65), 2);
  ASSERT_TRUE(bm.allocate(&t, 65).is_ok());
  EXPECT_EQ(t.pages, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(t.num_slots, 65);
  EXPECT_EQ(bm.num_free_pages(), 2);
  EXPECT_EQ(slot_of(t, 64, 64), 64);  // token 64 = page 1, row 0
  EXPECT_EQ(slot_of(t, 3, 64), 3);
  for (int i = 0; i < 63; ++i) ASSERT_TRUE(bm.append_slot(&t).is_ok());  // fills page 1 exactly
  EXPECT_EQ(bm.num_free_pages(), 2);
  ASSERT_TRUE(bm.append_slot(&t).is_ok());  // slot 128 opens page 2
  EXPECT_EQ(bm.num_free_pages(), 1);
  EXPECT_EQ(slot_of(t, 128, 64), 2 * 64);
  ASSERT_TRUE(bm.allocate(&t, 10).is_ok());  // never shrinks
  EXPECT_EQ(t.num_slots, 129);
  ASSERT_TRUE(bm.free(&t).is_ok());
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(bm.num_free_pages(), 4);
  ASSERT_TRUE(bm.free(&t).is_ok());  // freeing again is a no-op
  EXPECT_EQ(bm.num_free_pages(), 4);
  EXPECT_TRUE(bm.check_consistency({&t}).is_ok());
}

TEST(BlockManager, OutOfPagesIsAStatusAndChangesNothing) {
  BlockManager bm(2, 16);
  BlockTable a, b;
  ASSERT_TRUE(bm.allocate(&a, 20).is_ok());
  EXPECT_FALSE(bm.can_allocate(b, 1));
  EXPECT_EQ(bm.max_slots(b), 0);  // both pages went to a
  EXPECT_EQ(bm.max_slots(a), 32);
  Status st = bm.allocate(&b, 17);
  EXPECT_EQ(st.code(), StatusCode::kOutOfMemory) << st.to_string();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free_pages(), 0);
  EXPECT_TRUE(bm.check_consistency({&a, &b}).is_ok());
}

TEST(BlockManager, CorruptTablesAreRefused) {
  BlockManager bm(4, 16);
  BlockTable a;
  ASSERT_TRUE(bm.allocate(&a, 16).is_ok());
  BlockTable forged{.pages = {1}, .num_slots = 16};  // page 1 is free: freeing it would double-free
  EXPECT_EQ(bm.free(&forged).code(), StatusCode::kInternal);
  BlockTable twice{.pages = {0, 0}, .num_slots = 32};
  EXPECT_EQ(bm.free(&twice).code(), StatusCode::kInternal);
  BlockTable out_of_range{.pages = {9}, .num_slots = 1};
  EXPECT_FALSE(bm.free(&out_of_range).is_ok());
  BlockTable wrong_count{.pages = {0}, .num_slots = 40};
  EXPECT_FALSE(bm.allocate(&wrong_count, 41).is_ok());
  EXPECT_EQ(bm.num_free_pages(), 3);
  EXPECT_EQ(bm.ref_count(0), 1);
  EXPECT_TRUE(bm.check_consistency({&a}).is_ok());
  EXPECT_FALSE(bm.check_consistency({}).is_ok());  // the audit notices a page nobody holds
}

TEST(BlockManager, SharedFullPagesAreRefCounted) {
  BlockManager bm(8, 4);
  BlockTable a, b;
  ASSERT_TRUE(bm.allocate(&a, 10).is_ok());  // pages 0, 1 full, page 2 partial
  ASSERT_TRUE(bm.share_full_pages(a, &b).is_ok());
  EXPECT_EQ(b.pages, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(b.num_slots, 8);
  EXPECT_EQ(bm.ref_count(0), 2);
  EXPECT_EQ(bm.ref_count(2), 1);
  EXPECT_FALSE(bm.share_full_pages(a, &b).is_ok());  // destination must be empty
  ASSERT_TRUE(bm.append_slot(&b).is_ok());  // b's next token goes to a page of its own
  EXPECT_NE(b.pages[2], a.pages[2]);
  ASSERT_TRUE(bm.free(&a).is_ok());
  EXPECT_EQ(bm.ref_count(0), 1);  // still held by b
  EXPECT_EQ(bm.num_free_pages(), 8 - 3);
  ASSERT_TRUE(bm.free(&b).is_ok());
  EXPECT_EQ(bm.num_free_pages(), 8);
  EXPECT_TRUE(bm.check_consistency({&a, &b}).is_ok());
}

// 10^5+ random operations on 24 tables over a small cache (so out-of-pages is common), checked after
// every operation against a shadow of who holds which page.
TEST(BlockManager, RandomOperationsPropertyTest) {
  constexpr int kPages = 48, kPageSize = 16, kTables = 24, kOps = 120000;
  BlockManager bm(kPages, kPageSize);
  std::vector<BlockTable> tables(kTables);
  std::mt19937_64 rng(1234);
  auto pick = [&](int n) { return int(rng() % uint64_t(n)); };
  int64_t ok_ops = 0, oom_ops = 0;

  for (int op = 0; op < kOps; ++op) {
    BlockTable& t = tables[size_t(pick(kTables))];
    const int free_before = bm.num_free_pages();
    const int kind = pick(10);
    if (kind < 4) {  // append a slot (a decode step)
      const int need = bm.pages_needed(t, t.num_slots + 1);
      Status st = bm.append_slot(&t);
      ASSERT_EQ(st.is_ok(), need <= free_before) << st.to_string();
      (st.is_ok() ? ok_ops : oom_ops) += 1;
    } else if (kind < 7) {  // allocate a chunk (a prefill chunk)
      const int want = t.num_slots + pick(3 * kPageSize);
      const int need = bm.pages_needed(t, want);
      const BlockTable before = t;
      Status st = bm.allocate(&t, want);
      ASSERT_EQ(st.is_ok(), need <= free_before);
      if (st.is_ok()) {
        ASSERT_EQ(bm.num_free_pages(), free_before - need);
        ASSERT_EQ(t.num_slots, std::max(want, before.num_slots));
        ++ok_ops;
      } else {
        ASSERT_EQ(st.code(), StatusCode::kOutOfMemory);
        ASSERT_EQ(t.pages, before.pages);  // a failed allocation takes nothing
        ASSERT_EQ(bm.num_free_pages(), free_before);
        ++oom_ops;
      }
    } else if (kind < 8) {  // finish: free
      ASSERT_TRUE(bm.free(&t).is_ok());
      ASSERT_TRUE(t.empty());
    } else if (kind < 9) {  // preempt: free, then regrow from zero (the recompute's first chunk)
      const int slots = t.num_slots;
      ASSERT_TRUE(bm.free(&t).is_ok());
      if (bm.allocate(&t, std::min(slots, kPageSize)).is_ok()) ++ok_ops;
    } else {  // share another table's full pages into an empty one (a prefix-cache hit)
      const BlockTable& src = tables[size_t(pick(kTables))];
      if (&src != &t && t.empty()) {
        ASSERT_TRUE(bm.share_full_pages(src, &t).is_ok());
      }
    }
    // Shadow check: each page's count equals the tables holding it; free exactly when unheld; and no
    // table holds a page twice (shared pages are held once by each of several tables).
    std::vector<int> holders(kPages, 0);
    for (const BlockTable& x : tables) {
      std::set<int32_t> distinct(x.pages.begin(), x.pages.end());
      ASSERT_EQ(distinct.size(), x.pages.size()) << "a table owns a page twice, op " << op;
      for (int32_t p : x.pages) ++holders[size_t(p)];
    }
    int unheld = 0;
    for (int p = 0; p < kPages; ++p) {
      ASSERT_EQ(bm.ref_count(p), holders[size_t(p)]) << "page " << p << " op " << op;
      unheld += holders[size_t(p)] == 0;
    }
    ASSERT_EQ(bm.num_free_pages(), unheld);
    if (op % 64 == 0) {
      ASSERT_TRUE(bm.check_consistency(ptrs(tables)).is_ok());
    }
  }
  EXPECT_GT(ok_ops, kOps / 4);
  EXPECT_GT(oom_ops, 1000);  // the cache really ran out, often
  for (BlockTable& t : tables) ASSERT_TRUE(bm.free(&t).is_ok());
  EXPECT_EQ(bm.num_free_pages(), kPages);
  for (int p = 0; p < kPages; ++p) EXPECT_EQ(bm.ref_count(p), 0);
  EXPECT_TRUE(bm.check_consistency(ptrs(tables)).is_ok());
}

}  // namespace
}  // namespace mla::engine

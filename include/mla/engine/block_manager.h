#pragma once
// BlockManager: owns the KV cache's pages. A free list, one reference count per page (pages shared by
// several block tables, the basis of prefix caching later) and the operations that grow and release
// block tables. Every failure is a Status and leaves all state unchanged: a page is never leaked, never
// handed out twice and never freed twice.
#include <cstdint>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/block_table.h"

namespace mla::engine {

class BlockManager {
 public:
  // Call validate_geometry() first; the constructor assumes num_pages >= 1 and page_size >= 1.
  BlockManager(int num_pages, int page_size);
  static Status validate_geometry(int num_pages, int page_size);

  int num_pages() const { return num_pages_; }
  int page_size() const { return page_size_; }
  int num_free_pages() const { return int(free_.size()); }
  int ref_count(int32_t page) const { return ref_counts_[size_t(page)]; }

  // New pages `table` needs to claim `num_slots` slots in total (0 when it already has them).
  int pages_needed(const BlockTable& table, int num_slots) const;
  bool can_allocate(const BlockTable& table, int num_slots) const {
    return pages_needed(table, num_slots) <= num_free_pages();
  }
  // Token slots `table` could claim in total with the pages that are free now.
  int max_slots(const BlockTable& table) const;

  // Grows `table` to `num_slots` claimed slots, taking pages from the free list. Never shrinks:
  // asking for fewer slots than claimed is a no-op. kOutOfMemory (nothing taken) if pages run out.
  Status allocate(BlockTable* table, int num_slots);
  // Claims one more slot (a decode step's token), taking a new page when the last one is full.
  Status append_slot(BlockTable* table) { return allocate(table, table->num_slots + 1); }
  // Makes an empty `dst` share the full pages of `src` (reference counts + 1). The partial last page
  // is not shared: dst's next token would write into it, and pages are immutable once shared.
  Status share_full_pages(const BlockTable& src, BlockTable* dst);
  // Drops the table's references; pages whose count reaches zero go back to the free list. The
  // table is left empty, so freeing it again is a no-op, never a double free.
  Status free(BlockTable* table);

  // Full audit (tests, debugging): every page either free with count 0 or in use with count > 0, no
  // page on the free list twice, and the counts equal the references held by `tables`.
  Status check_consistency(const std::vector<const BlockTable*>& tables) const;

 private:
  Status check_table(const char* op, const BlockTable& table) const;

  int num_pages_;
  int page_size_;
  std::vector<int32_t> free_;        // stack of free page ids; the top is handed out next
  std::vector<int32_t> ref_counts_;  // [num_pages]; 0 exactly when the page is on the free list
};

}  // namespace mla::engine

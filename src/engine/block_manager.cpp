#include "mla/engine/block_manager.h"

#include <string>

namespace mla::engine {

Status BlockManager::validate_geometry(int num_pages, int page_size) {
  if (num_pages < 1 || page_size < 1) {
    return Status::invalid("BlockManager", "need num_pages >= 1 and page_size >= 1, got " +
                                               std::to_string(num_pages) + " pages of " + std::to_string(page_size));
  }
  return Status::ok();
}

BlockManager::BlockManager(int num_pages, int page_size)
    : num_pages_(num_pages), page_size_(page_size), ref_counts_(size_t(num_pages), 0) {
  // Stack with page 0 on top: a fresh manager hands out pages 0, 1, 2... which makes logs readable.
  free_.reserve(size_t(num_pages));
  for (int32_t p = num_pages - 1; p >= 0; --p) free_.push_back(p);
}

int BlockManager::pages_needed(const BlockTable& table, int num_slots) const {
  const int want = pages_for_tokens(num_slots, page_size_);
  return want > int(table.pages.size()) ? want - int(table.pages.size()) : 0;
}

int BlockManager::max_slots(const BlockTable& table) const {
  return (int(table.pages.size()) + num_free_pages()) * page_size_;
}

Status BlockManager::check_table(const char* op, const BlockTable& table) const {
  if (int(table.pages.size()) != pages_for_tokens(table.num_slots, page_size_)) {
    return Status::internal(op, "block table holds " + std::to_string(table.pages.size()) + " pages for " +
                                    std::to_string(table.num_slots) + " slots of page size " +
                                    std::to_string(page_size_));
  }
  for (int32_t p : table.pages) {
    if (p < 0 || p >= num_pages_) return Status::internal(op, "page " + std::to_string(p) + " out of range");
    if (ref_counts_[size_t(p)] <= 0) return Status::internal(op, "page " + std::to_string(p) + " is not allocated");
  }
  return Status::ok();
}

Status BlockManager::allocate(BlockTable* table, int num_slots) {
  if (num_slots < 0) return Status::invalid("BlockManager::allocate", "negative slot count");
  MLA_TRY(check_table("BlockManager::allocate", *table));
  if (num_slots <= table->num_slots) return Status::ok();
  const int need = pages_needed(*table, num_slots);
  if (need > num_free_pages()) {
    return Status::oom("BlockManager::allocate", "need " + std::to_string(need) + " pages, " +
                                                     std::to_string(num_free_pages()) + " free");
  }
  for (int i = 0; i < need; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    ref_counts_[size_t(p)] = 1;
    table->pages.push_back(p);
  }
  table->num_slots = num_slots;
  return Status::ok();
}

Status BlockManager::share_full_pages(const BlockTable& src, BlockTable* dst) {
  MLA_TRY(check_table("BlockManager::share_full_pages", src));
  if (!dst->empty() || dst->num_slots != 0) {
    return Status::invalid("BlockManager::share_full_pages", "destination table is not empty");
  }
  const int full = src.num_slots / page_size_;
  for (int i = 0; i < full; ++i) {
    const int32_t p = src.pages[size_t(i)];
    ++ref_counts_[size_t(p)];
    dst->pages.push_back(p);
  }
  dst->num_slots = full * page_size_;
  return Status::ok();
}

Status BlockManager::free(BlockTable* table) {
  // Validate everything before touching a count, so a corrupt table changes nothing.
  MLA_TRY(check_table("BlockManager::free", *table));
  // A table holding the same page twice would drop two references it never took.
  for (size_t i = 0; i < table->pages.size(); ++i) {
    for (size_t j = i + 1; j < table->pages.size(); ++j) {
      if (table->pages[i] == table->pages[j]) {
        return Status::internal("BlockManager::free", "page " + std::to_string(table->pages[i]) + " listed twice");
      }
    }
  }
  // Release in reverse so the pages go back to the stack in the order they were taken.
  for (auto it = table->pages.rbegin(); it != table->pages.rend(); ++it) {
    if (--ref_counts_[size_t(*it)] == 0) free_.push_back(*it);
  }
  table->pages.clear();
  table->num_slots = 0;
  return Status::ok();
}

Status BlockManager::check_consistency(const std::vector<const BlockTable*>& tables) const {
  const char* op = "BlockManager::check_consistency";
  std::vector<int32_t> refs(size_t(num_pages_), 0);
  for (const BlockTable* t : tables) {
    MLA_TRY(check_table(op, *t));
    for (int32_t p : t->pages) ++refs[size_t(p)];
  }
  std::vector<char> on_free_list(size_t(num_pages_), 0);
  for (int32_t p : free_) {
    if (p < 0 || p >= num_pages_) return Status::internal(op, "free page " + std::to_string(p) + " out of range");
    if (on_free_list[size_t(p)]) return Status::internal(op, "page " + std::to_string(p) + " free twice");
    on_free_list[size_t(p)] = 1;
  }
  for (int p = 0; p < num_pages_; ++p) {
    const bool is_free = on_free_list[size_t(p)] != 0;
    if (is_free != (ref_counts_[size_t(p)] == 0) || refs[size_t(p)] != ref_counts_[size_t(p)]) {
      return Status::internal(op, "page " + std::to_string(p) + ": count " + std::to_string(ref_counts_[size_t(p)]) +
                                      ", held by " + std::to_string(refs[size_t(p)]) + " tables, " +
                                      (is_free ? "free" : "not free"));
    }
  }
  return Status::ok();
}

}  // namespace mla::engine

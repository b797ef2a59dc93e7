#pragma once
// A sequence's block table: the physical pages holding its KV cache, in logical order, and how many
// token slots of them it has claimed. Logical token t lives in slot pages[t / page_size] * page_size +
// t % page_size (the layout of mla/core/page_table.h and of concat_and_cache_mla's slot mapping).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mla::engine {

struct BlockTable {
  std::vector<int32_t> pages;  // physical page ids, logical order
  int num_slots = 0;           // token slots claimed; pages.size() == ceil(num_slots / page_size)

  bool empty() const { return pages.empty(); }
};

// Pages needed to hold `num_tokens` tokens.
inline int pages_for_tokens(int num_tokens, int page_size) { return (num_tokens + page_size - 1) / page_size; }

// Flat cache slot of logical token `pos`; the caller guarantees pos < table.num_slots.
inline int64_t slot_of(const BlockTable& table, int pos, int page_size) {
  return int64_t(table.pages[size_t(pos / page_size)]) * page_size + pos % page_size;
}

// The inverse, for checks: which page and row a slot names.
inline int32_t page_of_slot(int64_t slot, int page_size) { return int32_t(slot / page_size); }
inline int row_of_slot(int64_t slot, int page_size) { return int(slot % page_size); }

}  // namespace mla::engine

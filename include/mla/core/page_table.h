#pragma once
// One view of a paged KV cache, shared by the CPU reference and the kernels: logical token t of sequence
// b lives in physical page block_table[b][t / page_size], row t % page_size.
#include <cstdint>

#include "mla/core/macros.h"

namespace mla {

struct PagedKvView {
  const uint8_t* cache = nullptr;       // [num_pages][page_size][token_bytes]
  const int32_t* block_table = nullptr; // [batch][block_table_stride], physical page ids
  int64_t page_stride_bytes = 0;        // bytes between consecutive pages
  int token_bytes = 0;                  // bytes between consecutive tokens of a page
  int page_size = 0;                    // tokens per page
  int block_table_stride = 0;           // int32 entries per block-table row
  int num_pages = 0;

  MLA_HD_INLINE int32_t page(int b, int logical_block) const {
    return block_table[static_cast<int64_t>(b) * block_table_stride + logical_block];
  }
  MLA_HD_INLINE const uint8_t* page_ptr(int32_t physical_page) const {
    return cache + static_cast<int64_t>(physical_page) * page_stride_bytes;
  }
  MLA_HD_INLINE const uint8_t* token(int b, int t) const {
    return page_ptr(page(b, t / page_size)) + static_cast<int64_t>(t % page_size) * token_bytes;
  }
};

}  // namespace mla

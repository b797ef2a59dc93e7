#pragma once
// Walks one plan part as a flat list of (sequence, KV block) work items. The part record covers blocks
// [begin_block, nblk) of begin_batch, whole sequences in between, and [0, end_block) of end_batch; the
// cursor yields exactly the items the CPU split reference (ref::mla_decode_split) visits, in order.
#include <cstdint>

#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"

namespace mla::sm90::decode {

struct PartCursor {
  int b = 0, blk = 0, hi = 0, seqlen = 0;
  int page = 0;  // physical page of the current item, once fetch_page() ran
  int end_b = 0, end_blk = 0, batch = 0;

  __device__ void init(const DecodeKernelParams& p, const int32_t* rec) {
    b = rec[kPartBeginBatch];
    blk = rec[kPartBeginBlock];
    end_b = rec[kPartEndBatch];
    end_blk = rec[kPartEndBlock];
    batch = p.batch;
    settle(p);
  }
  __device__ bool valid() const { return b < batch; }
  // True when the current item is the last block this part computes for sequence b.
  __device__ bool last_of_sequence() const { return blk + 1 >= hi; }
  // Issues the block-table load early: the copy that needs it is one mainloop step away, so its
  // latency (an L2 miss, often) stays off the critical path.
  __device__ void fetch_page(const DecodeKernelParams& p) {
    if (valid()) page = p.block_table[static_cast<int64_t>(b) * p.block_table_stride + blk];
  }
  // Prefetches the current item's page into L2 (after fetch_page).
  __device__ void prefetch_page(const DecodeKernelParams& p) const {
    if (valid()) prefetch_l2_bulk(static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(page) * kPageBytes, kPageBytes);
  }
  __device__ void advance(const DecodeKernelParams& p) {
    if (++blk >= hi) {
      ++b;
      blk = 0;
      settle(p);
    }
  }

 private:
  // Moves to the first non-empty item at or after (b, blk), or to b = batch when the part is done.
  __device__ void settle(const DecodeKernelParams& p) {
    while (b <= end_b && b < batch) {
      seqlen = p.seqlens[b];
      hi = b == end_b ? end_blk : decode_num_blocks(seqlen);
      if (blk < hi) return;
      ++b;
      blk = 0;
    }
    b = batch;
  }
};

}  // namespace mla::sm90::decode

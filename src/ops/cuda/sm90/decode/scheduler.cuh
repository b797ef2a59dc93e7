#pragma once
// Walks one plan part as a flat list of (sequence, KV block) work items. The part record covers blocks
// [begin_block, nblk) of begin_batch, whole sequences in between, and [0, end_block) of end_batch; the
// cursor yields exactly the items the CPU split reference (ref::mla_decode_split) visits, in order.
#include <cstdint>

#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#ifdef MLA_DECODE_TIMELINE
#include "ops/cuda/sm90/decode/timeline.cuh"
#endif

namespace mla::sm90::decode {

// This CTA's plan part: record blockIdx.x [kPlanPartInts] of p.parts.
__device__ __forceinline__ const int32_t* part_record(const DecodeKernelParams& p) {
  return p.parts + static_cast<int64_t>(blockIdx.x) * kPlanPartInts;
}

// Start chain: the record's hints (plan_decode.h fields 5-7) stand in for seqlens[begin_batch] and the
// block-table entries of the part's first two items, so the first KV copy depends on one global load (the
// record) instead of three in a row (record, seqlens, block table; ~0.5-0.7 us each). A hint of -1 is not
// given and the cursor loads the value as before.
struct PartCursor {
  int b = 0, blk = 0, hi = 0, seqlen = 0;
  int page = 0;  // physical page of the current item, once fetch_page() ran
  int end_b = 0, end_blk = 0, batch = 0;
  int hint = -1, next_hint = -1;  // pages of the current and the next item from the record (-1: none)

  // hints = false: ignore fields 5-7 and load as before (the cp.async kernel of kernel.cuh for parts of more than one
  // page: there the hints put every CTA's first copies in lock-step, see its comment).
  __device__ void init(const DecodeKernelParams& p, const int32_t* rec, bool hints = true) {
#ifdef MLA_DECODE_TIMELINE
    if (p.timeline != nullptr) timeline_start(p, rec);
#endif
    b = rec[kPartBeginBatch];
    blk = rec[kPartBeginBlock];
    end_b = rec[kPartEndBatch];
    end_blk = rec[kPartEndBlock];
    hint = hints ? rec[kPartFirstPage] : -1;
    next_hint = hints ? rec[kPartSecondPage] : -1;
    batch = p.batch;
    // The first sequence, from the hint; the plan hints only items of the part's first sequence, so a part
    // that is empty there carries no page hints to misapply.
    if (b <= end_b && b < batch) {
      seqlen = hints ? rec[kPartFirstSeqlen] : -1;
      if (seqlen < 0) seqlen = p.seqlens[b];
      hi = b == end_b ? end_blk : decode_num_blocks(seqlen);
      // With the pages hinted, the block-table row is first read at the third item, mid-pipeline, where a
      // miss stalls the copy one short step ahead (run S1: bf16 h16 b32 / b128 rows 1-2 us slower with the
      // hints than without, whose start-up load had brought the row's line in): fetch that line into L1 now.
      if (next_hint >= 0 && blk + 2 < hi)
        asm volatile("prefetch.global.L1 [%0];" ::"l"(p.block_table + static_cast<int64_t>(b) * p.block_table_stride + blk + 2));
      if (blk < hi) return;
      ++b;
      blk = 0;
    }
    settle(p);
  }
  // This CTA's plan part (record blockIdx.x); false for an empty part (more CTAs than work), uniform across the CTA.
  __device__ bool init_part(const DecodeKernelParams& p) {
    init(p, part_record(p));
    return valid();
  }
  __device__ bool valid() const { return b < batch; }
  // True when the current item is the last block this part computes for sequence b.
  __device__ bool last_of_sequence() const { return blk + 1 >= hi; }
  // True when no later item follows in this part (called at a sequence's last item: the sequences after b up to the
  // part's end are all empty).
  __device__ bool last_of_part(const DecodeKernelParams& p) const {
    for (int nb = b + 1; nb <= end_b && nb < batch; ++nb)
      if ((nb == end_b ? end_blk : decode_num_blocks(p.seqlens[nb])) > 0) return false;
    return true;
  }
  // Issues the block-table load early: the copy that needs it is one mainloop step away, so its
  // latency (an L2 miss, often) stays off the critical path.
  __device__ void fetch_page(const DecodeKernelParams& p) {
    if (valid()) page = hint >= 0 ? hint : *page_entry(p);
  }
  // The current item's block-table entry (valid() only).
  __device__ const int32_t* page_entry(const DecodeKernelParams& p) const {
    return p.block_table + static_cast<int64_t>(b) * p.block_table_stride + blk;
  }
  // Prefetches the current item's page into L2 (after fetch_page).
  __device__ void prefetch_page(const DecodeKernelParams& p) const {
    if (valid()) prefetch_l2_bulk(static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(page) * kPageBytes, kPageBytes);
  }
  __device__ void advance(const DecodeKernelParams& p) {
    hint = next_hint;  // (-1 past the second item, and when the second item is in another sequence)
    next_hint = -1;
    if (++blk >= hi) {
      ++b;
      blk = 0;
      settle(p);
#ifdef MLA_DECODE_TIMELINE
      if (p.timeline != nullptr && !valid()) timeline_walked(p);
#endif
    }
  }

 private:
#ifdef MLA_DECODE_TIMELINE
  // Diagnostics (decode_timeline.h; compiled only with -DMLA_DECODE_TIMELINE): the CTA's start, and when its
  // first page number is known -- from the hint, or through the same seqlens and block-table loads the cursor
  // would make. Not inlined: inline, either stamp made ptxas spill 40 bytes in the fp8_ds 64-row ws kernel.
  __device__ __noinline__ void timeline_start(const DecodeKernelParams& p, const int32_t* rec) const {
    unsigned long long* t = timeline_decode_cta(p.timeline);
    if (t == nullptr || threadIdx.x != 0 || t[0] != 0) return;
    t[0] = timeline_now();
    const int b0 = rec[kPartBeginBatch], k0 = rec[kPartBeginBlock];
    int page = rec[kPartFirstPage];
    if (page < 0 && b0 < p.batch) {
      int n = rec[kPartFirstSeqlen];
      if (n < 0) n = p.seqlens[b0];
      if (k0 < decode_num_blocks(n)) page = p.block_table[static_cast<int64_t>(b0) * p.block_table_stride + k0];
    }
    // The branch on the loaded value orders the stamp after the load's return.
    if (page == -2) asm volatile("trap;");
    t[1] = timeline_now();
    t[3] = timeline_smid();
  }
  __device__ __noinline__ void timeline_walked(const DecodeKernelParams& p) const {
    unsigned long long* t = timeline_decode_cta(p.timeline);
    if (t != nullptr) atomicMax(t + 2, timeline_now());
  }
#endif

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

// KV pages of this CTA's part from its record (plan_decode.h decode_part_pages_from_record: exact for parts in one or
// two sequences, one page per sequence in between beyond).
__device__ __forceinline__ int part_pages_from_record(const DecodeKernelParams& p) {
  return decode_part_pages_from_record(part_record(p));
}

// Whether this CTA's KV copies take the L2 evict-first policy: its part holds at most kKvEvictFirstPartBytes (config.h).
__device__ __forceinline__ bool kv_evict_first(const DecodeKernelParams& p, int page_bytes) {
  return static_cast<int64_t>(part_pages_from_record(p)) * page_bytes <= kKvEvictFirstPartBytes;
}

}  // namespace mla::sm90::decode

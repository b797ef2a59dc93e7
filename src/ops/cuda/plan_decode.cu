// plan_decode on the device: the schedule of compute_decode_plan (plan_decode_schedule.h), computed by one CTA in
// parallel, once per decode step (H200, bench rows: 7.2-8.9 us of kernel time by ncu, 8.5-10.9 us as a
// graph launch against 2.8 for an empty kernel; FlashMLA's: 7-37 us; NOTES_plan.md P6/P7). The parallel form
// is exact: boundary q of a candidate is min(q * per_part, total) (total for q = num_parts), snapped
// through decode_plan_snap for the snapped candidate; locate(pos) is the first sequence whose inclusive
// cost prefix exceeds pos, which is what the serial cursor finds; a part's cost is decode_plan_walk's sum
// in closed form (its two end pieces plus the prefix difference between them); split counts and
// first_split count the parts that touch a sequence with a non-empty block range; the start hints (fields
// 5-7: seqlens[b0] and, given the block table, the pages of the part's first two items) are
// decode_plan_hints of the range, as in the walk, loaded for both candidates before the choice. Batches too large for
// shared memory run the serial definition in one thread (correct, slower).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "mla/core/check.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/decode_timeline.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/plan_decode_schedule.h"

namespace mla::cuda {
namespace {

constexpr int kPlanThreads = 512;
constexpr int kMaxParallelBatch = 1536;
constexpr int kMaxParallelParts = 1024;

// Exclusive scan of one int64 per thread: warp shuffles, then the 16 warp totals by warp 0, so two block
// barriers instead of the 18 of a shared-memory Hillis-Steele scan. Returns the thread's prefix, *total
// gets the sum. Every thread of the block must call it; warp_tot: kPlanThreads / 32 shared slots.
constexpr int kPlanWarps = kPlanThreads / 32;
__device__ int64_t block_exclusive_scan(int64_t v, int64_t* warp_tot, int64_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int64_t x = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int64_t y = __shfl_up_sync(0xffffffffu, x, d);
    if (lane >= d) x += y;
  }
  if (lane == 31) warp_tot[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int64_t w = lane < kPlanWarps ? warp_tot[lane] : 0;
#pragma unroll
    for (int d = 1; d < kPlanWarps; d <<= 1) {
      const int64_t y = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += y;
    }
    if (lane < kPlanWarps) warp_tot[lane] = w;  // inclusive warp prefixes
  }
  __syncthreads();
  const int64_t incl = (warp > 0 ? warp_tot[warp - 1] : 0) + x;
  *total = warp_tot[kPlanWarps - 1];
  __syncthreads();  // warp_tot may be reused by the next scan
  return incl - v;
}

struct PartRange {
  int b0, k0, b1, k1;
};

__device__ bool touches(const PartRange& r, int b, int batch, const int32_t* nblk) {
  if (b < r.b0 || b > r.b1 || b >= batch) return false;
  const int lo = b == r.b0 ? r.k0 : 0;
  const int hi = b == r.b1 ? r.k1 : nblk[b];
  return lo < hi;
}

// Everything one thread needs to find a part's range from shared-memory prefix sums.
struct PlanView {
  const int64_t* incl;  // inclusive cost prefix [batch]
  const int32_t* nblk;  // blocks per sequence [batch]
  int batch, num_parts;
  int64_t total, per_part;
  DecodePlanTuning tune;  // split_cost includes the geometry's split_price
  int split_price;

  // First sequence whose inclusive cost prefix exceeds pos (batch if none): the sequence holding pos.
  __device__ int holder(int64_t pos) const {
    int a = 0, z = batch;
    while (a < z) {
      const int mid = (a + z) / 2;
      if (pos < incl[mid]) z = mid; else a = mid + 1;
    }
    return a;
  }
  // Boundary q of the plain or snapped candidate (q = 0 .. num_parts); part p is [boundary(p), boundary(p + 1)).
  __device__ int64_t boundary(int q, bool snap) const {
    int64_t pos = static_cast<int64_t>(q) * per_part;
    if (pos > total || q == num_parts) pos = total;
    if (snap) {
      const int a = holder(pos);
      if (a < batch)
        pos = decode_plan_snap(pos, a > 0 ? incl[a - 1] : 0, incl[a], tune.seq_cost, per_part, split_price);
    }
    return pos;
  }
  __device__ void locate(int64_t pos, int* ob, int* oblk) const {
    const int a = holder(pos);
    if (a >= batch) { *ob = batch; *oblk = 0; return; }
    const int64_t blk = pos - (a > 0 ? incl[a - 1] : 0) - tune.seq_cost;
    *ob = a;
    *oblk = blk < 0 ? 0 : static_cast<int>(blk);
  }
  __device__ PartRange range(int p, bool snap) const {
    PartRange r;
    locate(boundary(p, snap), &r.b0, &r.k0);
    locate(boundary(p + 1, snap), &r.b1, &r.k1);
    return r;
  }
  // decode_plan_walk's part cost in closed form: the end pieces plus the whole sequences between them.
  __device__ int64_t cost(const PartRange& r) const {
    if (r.b0 >= batch) return 0;
    if (r.b0 == r.b1) return decode_piece_cost(r.k0, r.k1, nblk[r.b0], tune);
    int64_t c = decode_piece_cost(r.k0, nblk[r.b0], nblk[r.b0], tune) + (incl[r.b1 - 1] - incl[r.b0]);
    if (r.b1 < batch) c += decode_piece_cost(0, r.k1, nblk[r.b1], tune);
    return c;
  }
};

__global__ void __launch_bounds__(kPlanThreads) plan_parallel_kernel(const int32_t* __restrict__ seqlens, int batch,
                                                                     int num_parts, int split_price,
                                                                     DecodePlanTuning tune, DecodePlanPages pages,
                                                                     int32_t* __restrict__ parts,
                                                                     int32_t* __restrict__ split_offsets,
                                                                     int32_t* __restrict__ merge_counters,
                                                                     int64_t num_counters) {
  __shared__ int64_t incl[kMaxParallelBatch];  // inclusive cost prefix
  __shared__ int32_t nblk[kMaxParallelBatch];
  __shared__ int32_t count[kMaxParallelBatch];  // splits per sequence
  __shared__ int64_t tmp[kPlanWarps];
  __shared__ PartRange ranges[kMaxParallelParts];
  __shared__ int32_t touch_prefix[kMaxParallelParts];  // exclusive prefix over parts of "touches its begin sequence"
  __shared__ unsigned long long worst[2];  // largest part cost of the plain and the snapped candidate
  const int t = threadIdx.x;
  tune.split_cost += split_price;  // as compute_decode_plan charges it
  const int per_thread = (batch + kPlanThreads - 1) / kPlanThreads;
  const int lo = min(batch, t * per_thread), hi = min(batch, lo + per_thread);
  if (t < 2) worst[t] = 0;

  // 1. The step's seq_cost (decode_plan_seq_cost: pages and non-empty sequences summed in one scan, the count in
  // bits 40 and up), then the costs' inclusive prefix, which follows from the same scan: every non-empty sequence
  // costs its pages + seq_cost (the total likewise, DecodeStepSize).
  constexpr int kSeqShift = 40;  // pages < 2^40 (kMaxParallelBatch sequences of < 2^31 tokens), sequences < 2^23
  constexpr int64_t kPagesMask = (int64_t{1} << kSeqShift) - 1;
  int64_t pages_seqs = 0;
  for (int b = lo; b < hi; ++b) {
    const int n = decode_num_blocks(seqlens[b]);
    nblk[b] = n;
    count[b] = 0;
    pages_seqs += n + (n > 0 ? int64_t{1} << kSeqShift : 0);
  }
  int64_t step = 0;
  const int64_t before = block_exclusive_scan(pages_seqs, tmp, &step);  // its barriers also publish worst[]
  tune.seq_cost = decode_plan_seq_cost(step & kPagesMask, step >> kSeqShift, num_parts, tune);
  const int64_t total = (step & kPagesMask) + tune.seq_cost * (step >> kSeqShift);
  int64_t run = (before & kPagesMask) + tune.seq_cost * (before >> kSeqShift);
  for (int b = lo; b < hi; ++b) {
    run += nblk[b] > 0 ? nblk[b] + tune.seq_cost : 0;
    incl[b] = run;
  }
  __syncthreads();
  const int64_t per_part = decode_plan_per_part(total, batch, num_parts, tune, split_price);
  const PlanView v{incl, nblk, batch, num_parts, total, per_part, tune, split_price};

  // 2. Both candidates' ranges of this thread's parts (kept for step 3) and their largest part; the
  // snapped one wins ties (compute_decode_plan).
  constexpr int kPartsPerThread = kMaxParallelParts / kPlanThreads;
  PartRange r_plain[kPartsPerThread], r_snap[kPartsPerThread];
  // Both candidates' start hints, loaded here so the seqlens and block-table loads (an L2 miss each) overlap
  // the reduction and barrier below instead of following them. Fields 5-7 of a record.
  int32_t h_plain[kPartsPerThread][kPlanPartInts], h_snap[kPartsPerThread][kPlanPartInts];
  unsigned long long w_plain = 0, w_snap = 0;
#pragma unroll
  for (int i = 0; i < kPartsPerThread; ++i) {
    const int p = t + i * kPlanThreads;
    if (p < num_parts) {
      r_plain[i] = v.range(p, false);
      r_snap[i] = v.range(p, true);
      decode_plan_hints(seqlens, batch, pages, r_plain[i].b0, r_plain[i].k0, r_plain[i].b1, r_plain[i].k1, h_plain[i]);
      decode_plan_hints(seqlens, batch, pages, r_snap[i].b0, r_snap[i].k0, r_snap[i].b1, r_snap[i].k1, h_snap[i]);
      w_plain = max(w_plain, static_cast<unsigned long long>(v.cost(r_plain[i])));
      w_snap = max(w_snap, static_cast<unsigned long long>(v.cost(r_snap[i])));
    }
  }
  // One shared-memory atomic per warp: 512 contending 64-bit atomics cost microseconds.
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    w_plain = max(w_plain, __shfl_xor_sync(0xffffffffu, w_plain, d));
    w_snap = max(w_snap, __shfl_xor_sync(0xffffffffu, w_snap, d));
  }
  if ((t & 31) == 0) {
    atomicMax(&worst[0], w_plain);
    atomicMax(&worst[1], w_snap);
  }
  __syncthreads();
  const bool snap = worst[1] <= worst[0];

  // 3. Part boundaries of the chosen candidate.
#pragma unroll
  for (int i = 0; i < kPartsPerThread; ++i) {
    const int p = t + i * kPlanThreads;
    if (p < num_parts) {
      const PartRange r = snap ? r_snap[i] : r_plain[i];
      ranges[p] = r;
      int32_t* rec = parts + static_cast<int64_t>(p) * kPlanPartInts;
      rec[kPartBeginBatch] = r.b0;
      rec[kPartBeginBlock] = r.k0;
      rec[kPartEndBatch] = r.b1;
      rec[kPartEndBlock] = r.k1;
#pragma unroll
      for (int f = kPartFirstSeqlen; f < kPlanPartInts; ++f) rec[f] = snap ? h_snap[i][f] : h_plain[i][f];
    }
  }
  __syncthreads();

  // 4. Split counts, and each part's split index within its first sequence b0: the parts before it that
  // touch b0. Parts are contiguous and ordered, so those are the parts q < p that begin in b0 and touch
  // it (a prefix count over parts, from the first part that begins in b0, found by binary search) plus
  // at most the one part just before those, which begins in an earlier sequence and ends inside b0 --
  // what the serial walk counts, in O(log parts) per part instead of a scan back over every earlier part
  // (131 steps for the last part of a batch-1 row).
  {
    const int p0 = t * kPartsPerThread;  // contiguous parts per thread for the prefix count
    int local_touch = 0;
#pragma unroll
    for (int i = 0; i < kPartsPerThread; ++i)
      if (p0 + i < num_parts) local_touch += touches(ranges[p0 + i], ranges[p0 + i].b0, batch, nblk) ? 1 : 0;
    int64_t unused = 0;
    int64_t pre = block_exclusive_scan(local_touch, tmp, &unused);
#pragma unroll
    for (int i = 0; i < kPartsPerThread; ++i) {
      if (p0 + i < num_parts) {
        touch_prefix[p0 + i] = static_cast<int32_t>(pre);
        pre += touches(ranges[p0 + i], ranges[p0 + i].b0, batch, nblk) ? 1 : 0;
      }
    }
  }
  __syncthreads();
  for (int p = t; p < num_parts; p += kPlanThreads) {
    const PartRange r = ranges[p];
    for (int b = r.b0; b <= r.b1 && b < batch; ++b)
      if (touches(r, b, batch, nblk)) atomicAdd(&count[b], 1);
    int first = 0;
    if (r.b0 < batch) {
      int lo = 0, hi = p;  // first part q in [0, p] with ranges[q].b0 == r.b0 (b0 is non-decreasing in q)
      while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (ranges[mid].b0 < r.b0) lo = mid + 1; else hi = mid;
      }
      first = touch_prefix[p] - touch_prefix[lo];
      if (lo > 0 && ranges[lo - 1].b1 == r.b0 && ranges[lo - 1].k1 > 0) ++first;
    }
    parts[static_cast<int64_t>(p) * kPlanPartInts + kPartFirstSplit] = first;
  }
  __syncthreads();

  // 5. Counts -> exclusive offsets.
  int64_t local = 0;
  for (int b = lo; b < hi; ++b) local += count[b];
  int64_t splits = 0;
  run = block_exclusive_scan(local, tmp, &splits);
  for (int b = lo; b < hi; ++b) {
    split_offsets[b] = static_cast<int32_t>(run);
    run += count[b];
  }
  if (t == 0) split_offsets[batch] = static_cast<int32_t>(splits);
  for (int64_t i = t; i < num_counters; i += kPlanThreads) merge_counters[i] = 0;
}

// The serial definition itself, for batches beyond the shared-memory arrays.
__global__ void plan_serial_kernel(const int32_t* seqlens, int batch, int num_parts, int split_price,
                                   DecodePlanTuning tune, DecodePlanPages pages, int32_t* parts,
                                   int32_t* split_offsets, int32_t* merge_counters, int64_t num_counters) {
  compute_decode_plan(seqlens, batch, num_parts, split_price, tune, parts, split_offsets, pages);
  for (int64_t i = 0; i < num_counters; ++i) merge_counters[i] = 0;
}

}  // namespace

namespace {
unsigned long long* g_decode_timeline = nullptr;  // set only by diagnostics, before the calls it should see
}  // namespace
void set_decode_timeline(unsigned long long* device_buffer) { g_decode_timeline = device_buffer; }
unsigned long long* decode_timeline() { return g_decode_timeline; }

Status plan_decode(const TensorView& seqlens, const DecodePlanGeometry& g, DecodePlanView plan, Stream stream,
                   DecodePlanTuning tune) {
  return plan_decode(seqlens, TensorView{}, g, plan, stream, tune);
}

Status plan_decode(const TensorView& seqlens, const TensorView& block_table, const DecodePlanGeometry& g,
                   DecodePlanView plan, Stream stream, DecodePlanTuning tune) {
  MLA_TRY(check_tensor("plan_decode", "seqlens", seqlens, DType::kInt32, {g.batch}));
  DecodePlanPages pages;
  MLA_TRY(check_plan_block_table(block_table, g.batch, &pages));
  MLA_TRY(check_block_table_width("plan_decode", block_table, g));  // the page hints read any block of a sequence
  if (plan.parts == nullptr || plan.split_offsets == nullptr)
    return Status::invalid("plan_decode", "plan buffers must be non-null (parts [" + std::to_string(g.num_parts) +
                                              ", 8], split_offsets [" + std::to_string(g.batch + 1) + "])");
  if (plan.num_parts != g.num_parts || g.num_parts < 1 || g.batch < 1)
    return Status::invalid("plan_decode", "plan.num_parts " + std::to_string(plan.num_parts) +
                                              " != geometry num_parts " + std::to_string(g.num_parts));
  MLA_TRY(check_decode_plan_tuning(tune, g));
  auto* s = reinterpret_cast<cudaStream_t>(stream);
  const auto* sl = seqlens.ptr<const int32_t>();
  // The fused merge's counters (optional): zeroed with the plan, so a step starts from a known state.
  const int64_t num_counters = plan.merge_counters != nullptr ? decode_plan_counters(g) : 0;
  if (g.batch <= kMaxParallelBatch && g.num_parts <= kMaxParallelParts) {
    plan_parallel_kernel<<<1, kPlanThreads, 0, s>>>(sl, g.batch, g.num_parts, g.split_price, tune, pages,
                                                     plan.parts, plan.split_offsets, plan.merge_counters,
                                                     num_counters);
  } else {
    plan_serial_kernel<<<1, 1, 0, s>>>(sl, g.batch, g.num_parts, g.split_price, tune, pages, plan.parts,
                                       plan.split_offsets, plan.merge_counters, num_counters);
  }
  MLA_CUDA_TRY_LAUNCH("plan_decode");
  return Status::ok();
}

}  // namespace mla::cuda

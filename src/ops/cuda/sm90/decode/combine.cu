// Combine: merges the split partials of each (query row, sequence, column chunk) item, launched with PDL after the
// decode kernel. Sequences with one split were written by the decode kernel and are skipped; sequences with no keys
// (seqlen 0, no splits) get out = 0, lse = -inf; the rest are merged by combine_rows.cuh's row merges: up to kFewSplits
// splits (kDirectFewSplits on the direct grid's 8-chunk form) chunk 0 merges the whole row in one thread group; more
// splits (small batches, long sequences: up to one per part) are merged by column chunks, so a batch-1 row reads its
// ~100 partials from several SMs with many loads in flight: every chunk in the list kernel, on the direct grid the
// fewest that load the row in one batch of loads (decode_combine_many_chunks; the other chunks' CTAs exit).
// This file is the grids (NOTES_plan.md P6-P8): one CTA per item while the items fit one wave (batch 1, small
// batches), else one wave of CTAs that list the items needing a merge and merge several few-split rows at once; which
// one, and its column chunks, from the shapes alone (decode_combine_grid, mla/ops/decode_combine_grid.h); which CTAs
// wait for the decode kernel; the launcher.
#include <cstdint>

#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/decode_combine_grid.h"
#include "ops/cuda/sm90/decode/combine_rows.cuh"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/merge_store.cuh"
#include "ops/cuda/sm90/decode/partials.h"
#ifdef MLA_DECODE_TIMELINE
#include "ops/cuda/sm90/decode/timeline.cuh"
#endif
#include "ops/cuda/sm90/decode/traits.h"

namespace mla::sm90::decode {
namespace {

// Which combine CTAs wait (griddepcontrol.wait): only those with a row to merge, and CTA 0. A CTA with nothing to
// merge (every item of an unsplit sequence, chunks 1.. of a few-split row, and on the direct grid the chunks past
// decode_combine_many_chunks of a many-split row) exits as soon as it has checked its
// items, which need only split_offsets (the plan's, complete before the decode kernel started), instead of holding
// its slot until the decode grid has completed and then exiting with the others. The stream stays ordered: work
// queued after the combine starts only once the combine grid has completed (the combine never triggers its
// dependents early), the grid completes only after CTA 0 has exited, and CTA 0 passes its wait only once the decode
// grid has completed and its memory is visible; so what follows still sees everything the decode wrote (the unsplit
// sequences' out / lse), as when every CTA waited. A grid in which no CTA waits has no documented order after the
// decode (the PTX text of griddepcontrol describes the order only for a waiting thread); test_mla_decode's
// stream-order check did not catch one (session 10 tail run 2, ko 5, 5 cases), which shows nothing either way.
__device__ __forceinline__ bool combine_cta_waits(bool has_merge) { return has_merge || blockIdx.x == 0; }

// Item number -> (sequence, row, chunk); combine_item adds its split range (the plan's split_offsets, complete
// before the decode kernel started: readable before griddepcontrol.wait).
struct CombineItem {
  int b, row, chunk, first, n;
};
__device__ __forceinline__ CombineItem combine_item_pos(const DecodeKernelParams& p, int it, int chunks) {
  CombineItem c;
  c.chunk = it % chunks;
  c.row = (it / chunks) % p.rows;
  c.b = it / chunks / p.rows;
  c.first = 0;
  c.n = 0;
  return c;
}
__device__ __forceinline__ CombineItem combine_item(const DecodeKernelParams& p, int it, int chunks) {
  CombineItem c = combine_item_pos(p, it, chunks);
  c.first = p.split_offsets[c.b];
  c.n = p.split_offsets[c.b + 1] - c.first;
  return c;
}

// Not inlined: with the four GROUPS instantiations inlined into combine_list_kernel, ptxas spilled 24 bytes
// at its 64-register bound (the HEAD form). The list entries carry each item's first split and count (read once,
// when the list was built); few-split items are chunk 0, so list[j] / chunks = b * rows + row.
template <class Traits, class PT, int GROUPS>
__device__ __noinline__ void combine_few_list(FewArgs<PT> a, const int* list, const int* lfirst, const int* ln,
                                              int count, int chunks) {
  constexpr int G = kCombineThreads / GROUPS;
  for (int j0 = 0; j0 < count; j0 += GROUPS) {
    const int j = j0 + static_cast<int>(threadIdx.x) / G;
    if (j < count) {
      const int br = list[j] / chunks;
      combine_few_online<Traits, PT, GROUPS>(a, br / a.rows, br % a.rows, lfirst[j], ln[j],
                                         static_cast<int>(threadIdx.x) % G);
    }
  }
}

// The list kernel's grid is one full wave of CTAs (kCombineWaveCtas). A grid of one CTA per (row, sequence) cost
// ~11 us at h_q 128 · b128 when every CTA had nothing to merge (16384 CTAs launched and retired, NOTES_plan.md P2);
// this one checks up to 256 items per CTA and round with one round of parallel loads.

#ifdef MLA_DECODE_TIMELINE
// Diagnostics (decode_timeline.h; only with -DMLA_DECODE_TIMELINE): stamp k of this combine CTA, by thread 0
// (k 2: the latest thread's finish).
#define MLA_TIMELINE_COMBINE(p, k) \
  if ((p).timeline != nullptr) timeline_combine(p, k)
__device__ __noinline__ void timeline_combine(const DecodeKernelParams& p, int k) {
  unsigned long long* t = timeline_combine_cta(p.timeline);
  if (t == nullptr) return;
  if (k == 2) {
    atomicMax(t + 2, timeline_now());
  } else if (threadIdx.x == 0) {
    t[k] = timeline_now();
    t[3] = timeline_smid();
  }
}
#else
#define MLA_TIMELINE_COMBINE(p, k)
#endif

// Items (sequence b, row, column chunk), numbered ((b * rows) + row) * chunks + chunk; CTA x takes items
// x, x + G, x + 2G, ... (G = gridDim.x), 256 per round: every thread checks one, the items that need
// merging (a sequence with 0 or >= 2 splits; only chunk 0 when few splits) go to two shared lists; the
// few-split rows are merged by 1, 2, 4 or 8 thread groups at once (h_q 128 · b32: ~8 rows of two splits
// per CTA, -14 to -16 us against merging them one after the other, P6-P8).
// The first round's lists (with each item's first split and count) are built before griddepcontrol.wait: they
// need only split_offsets, written by the plan before the decode kernel started (programmatic dependent launch:
// the grid may be scheduled while the decode kernel drains), so after the wait the few-split rows issue their lse
// and partial loads at once. Session 7 comb2 (NOTES_plan.md), with combine_few_online: fp8 h_q 128 b32 s4096 /
// s8192 -0.95 / -0.8 us, fp8_ds -1.8 / -1.65, b128 -0.1 to -1.0 (in P6-P8 the lists alone before the wait gained
// nothing). A CTA with nothing to merge exits without waiting (but CTA 0: combine_cta_waits): session 10 tail run 2,
// -0.2..-1.9 us on the b128 rows, where nothing merges, in every format. Not understood: there, a one-CTA combine
// that only waits is still 3-4 us faster than this grid on h_q 128 (0.3 on h_q 16), and neither its CTAs' item
// checks (all but CTA 0 leaving at entry) nor their number (132, 264, 528) moves that (run 2 kox); session 4's
// kernel was 1-4 us faster there too (C1/C2; alone under ncu the two differ by 0.23 us), and neither the early
// (programmatic) launch nor the shared-memory carveout explained it (C2: nopdl, carve).
template <class Traits, class PT>
__global__ void __launch_bounds__(kCombineThreads, 4) combine_list_kernel(const __grid_constant__ DecodeKernelParams p,
                                                                        int chunks) {
  __shared__ int s_few[kCombineThreads], s_many[kCombineThreads];
  __shared__ int s_ffirst[kCombineThreads], s_fn[kCombineThreads];  // the few-split items' first split and count
  __shared__ int s_nfew, s_nmany;
  __shared__ CombineSmem sm;
  const int items = p.rows * p.batch * chunks;  // < 2^31: rows <= 512, batch <= 65535 (launcher checks)
  const int stride = gridDim.x;
  MLA_TIMELINE_COMBINE(p, 0);
  bool waited = false;
  for (int base = blockIdx.x; base < items; base += stride * kCombineThreads) {
    if (threadIdx.x == 0) {
      s_nfew = 0;
      s_nmany = 0;
    }
    __syncthreads();
    const int64_t i = base + static_cast<int64_t>(threadIdx.x) * stride;
    if (i < items) {
      const int b = static_cast<int>(i) / (p.rows * chunks);
      const int first = p.split_offsets[b];
      const int n = p.split_offsets[b + 1] - first;
      if (n > kFewSplits) {
        s_many[atomicAdd(&s_nmany, 1)] = static_cast<int>(i);
      } else if (n != 1 && i % chunks == 0) {
        const int e = atomicAdd(&s_nfew, 1);
        s_few[e] = static_cast<int>(i);
        s_ffirst[e] = first;
        s_fn[e] = n;
      }
    }
    __syncthreads();
    // The first round's lists need only split_offsets (the plan's); the partials need the wait.
    if (!waited && combine_cta_waits(s_nfew + s_nmany > 0)) {
      asm volatile("griddepcontrol.wait;\n" ::: "memory");
      MLA_TIMELINE_COMBINE(p, 1);
      waited = true;
    }
    const int nfew = s_nfew, nmany = s_nmany;
    const FewArgs<PT> fa{reinterpret_cast<const PT*>(p.o_accum), p.lse_accum, static_cast<uint16_t*>(p.out), p.lse,
                         p.rows, p.h_q, p.s_q};
    if (nfew > 4) {
      combine_few_list<Traits, PT, 8>(fa, s_few, s_ffirst, s_fn, nfew, chunks);
    } else if (nfew > 2) {
      combine_few_list<Traits, PT, 4>(fa, s_few, s_ffirst, s_fn, nfew, chunks);
    } else if (nfew == 2) {
      combine_few_list<Traits, PT, 2>(fa, s_few, s_ffirst, s_fn, nfew, chunks);
    } else if (nfew == 1) {
      combine_few_list<Traits, PT, 1>(fa, s_few, s_ffirst, s_fn, nfew, chunks);
    }
    for (int j = 0; j < nmany; ++j) {
      const CombineItem c = combine_item(p, s_many[j], chunks);
      combine_many<Traits, PT>(p, c.b, c.row, c.first, c.n, c.chunk, chunks, sm);
      __syncthreads();  // combine_many's shared memory is reused by the next item
    }
    __syncthreads();  // everyone has read the counts and lists before the next round resets them
  }
  if (!waited && combine_cta_waits(false)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  MLA_TIMELINE_COMBINE(p, 2);
}

// One CTA per item (session 4's P2 grid), for grids of at most one wave: no list round. On the same grids
// (P8, fp8): -0.6 to -2.8 us against combine_list_kernel on every batch-1 row, but +0.6 / +1.2 against
// session 4's list kernel on h_q 128 b1 s4096 / s8192: without a register bound this kernel took 72
// registers, so 3 CTAs per SM and 512-item grids (h_q 128 b1, h_q 16 b32) ran as 1.29 waves (ncu, C1); at 4
// CTAs per SM (64 registers, no spills) every grid this kernel gets is one wave (C2 vs C1, fp8: h_q 128 b1
// s4096 / s8192 19.6 / 23.2 -> 17.2 / 20.7 us, h_q 16 b32 s512 16.4 -> 15.5).
// The item (split_offsets: the plan's, complete before the decode kernel started) is read before the wait; a CTA
// whose item needs no merge exits without waiting (but CTA 0: combine_cta_waits).
// FEW: the most splits a row may have to be merged by one thread group -- kDirectFewSplits on 8-chunk grids,
// kFewSplits elsewhere. Two instances: with the 16-split path in the one kernel (10 KB more code), h_q 128 b1
// s4096 / s8192 (4-chunk grids, > 16 splits, combine_many) ran 0.3-0.7 us slower (session 35, c1 / c2).
template <class Traits, class PT, int FEW>
__global__ void __launch_bounds__(kCombineThreads, 4)
    combine_direct_kernel(const __grid_constant__ DecodeKernelParams p, int chunks) {
  MLA_TIMELINE_COMBINE(p, 0);
  const CombineItem c = combine_item(p, blockIdx.x, chunks);
  // One split: the decode kernel wrote the row; up to FEW (or none: seqlen 0), chunk 0 does the whole row; more,
  // the first `use` chunks (decode_combine_many_chunks), each a 1 / use share of the columns.
  const int use = decode_combine_many_chunks(c.n, chunks);
  const bool merge = c.n != 1 && (c.n > FEW ? c.chunk < use : c.chunk == 0);
  if (combine_cta_waits(merge)) asm volatile("griddepcontrol.wait;\n" ::: "memory");
  MLA_TIMELINE_COMBINE(p, 1);  // (a CTA that did not wait: when it left)
  __shared__ CombineSmem sm;
  if (!merge) {
    MLA_TIMELINE_COMBINE(p, 2);
    return;
  }
  // Rows of <= 8 splits keep the w[8] form even in the FEW 16 instance: 16 lse loads (8 of them duplicates) on the
  // latency-bound path cost h16 / h128 b1 s512 +0.2..+0.7 us (session 34, c9).
  if (c.n <= kFewSplits) {
    combine_few_group<Traits, PT, 1, kFewSplits>(p, c.b, c.row, c.first, c.n, threadIdx.x);
  } else if (FEW > kFewSplits && c.n <= FEW) {
    combine_few_group<Traits, PT, 1, FEW>(p, c.b, c.row, c.first, c.n, threadIdx.x);
  } else {
    combine_many<Traits, PT>(p, c.b, c.row, c.first, c.n, c.chunk, use, sm);
  }
  MLA_TIMELINE_COMBINE(p, 2);
}

using CombineKernel = void (*)(DecodeKernelParams, int);

// The grid's kernel: one CTA per item when the items fit in one wave (direct), else the list kernel.
template <class Traits, class PT>
CombineKernel combine_kernel(const DecodeCombineGrid& g) {
  if (!g.direct) return combine_list_kernel<Traits, PT>;
  return g.few_splits == kDirectFewSplits ? combine_direct_kernel<Traits, PT, kDirectFewSplits>
                                          : combine_direct_kernel<Traits, PT, kFewSplits>;
}

}  // namespace

template <class Traits>
Status launch_combine(const DecodeKernelParams& p, cudaStream_t stream, bool partials_bf16) {
  const DecodeCombineGrid g = decode_combine_grid(p.rows, p.batch);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(g.ctas));
  cfg.blockDim = dim3(kCombineThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (partials_bf16) {
    // Only the fp8 64-row kernel writes bf16 partials, and fp8's output is bf16: no fp16-output instantiation.
    if constexpr (std::is_same_v<Traits, Bf16Traits>) {
      MLA_CUDA_TRY("mla_decode (combine)",
                   cudaLaunchKernelEx(&cfg, combine_kernel<Traits, __nv_bfloat16>(g), p, g.chunks));
    } else {
      return Status::internal("mla_decode (combine)", "bf16 split partials are merged into bf16 output only");
    }
  } else {
    MLA_CUDA_TRY("mla_decode (combine)",
                 cudaLaunchKernelEx(&cfg, combine_kernel<Traits, float>(g), p, g.chunks));
  }
  MLA_CUDA_TRY_LAUNCH("mla_decode (combine)");
  return Status::ok();
}

template Status launch_combine<Bf16Traits>(const DecodeKernelParams&, cudaStream_t, bool);
template Status launch_combine<Fp16Traits>(const DecodeKernelParams&, cudaStream_t, bool);

}  // namespace mla::sm90::decode

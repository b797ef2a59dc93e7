// Stream benchmark: the floor under a memory-bound decode row. Reads `pages` pages of `page_bytes` each (64 tokens
// of page_bytes / 64), in the order of a random permutation (the decode bench's block tables), into a ring of
// shared-memory stages per CTA with no math, each CTA a contiguous range of the page list as a plan part would be,
// timed exactly as bench_decode times a row: one CUDA graph per call, median of --reps calls, each call preceded by
// an L2 flush outside the events. Three copy mechanisms (--copy), those the decode kernels use:
//   bulk    -- one 1D bulk copy (cp.async.bulk) per page, issued by one thread (the fp8_ds 16-row kernel's);
//   box     -- 2D TMA boxes of 64 tokens x 128 bytes, 128-byte swizzle (the 64-row and fp8 16-row kernels'; L2
//              promotion --promotion 128|256: the fp8 16-row kernel's cache map uses 128, the 16-bit maps 256);
//              --box-bytes 64: boxes of 64 tokens x 64 bytes, 64-byte swizzle (nine per 576-byte token row, each
//              box row inside one 128-byte line: with 128-byte boxes the odd tokens' rows straddle two lines);
//   cpasync -- 256 threads, 16 bytes per cp.async, one commit group per page (the 16-bit 16-row kernel's);
//   rows    -- one 1D bulk copy per token row into rows padded by 16 bytes (576 -> 592 for fp8: conflict-free
//              ldmatrix rows), 64 per page, issued by the 32 lanes of one warp (a candidate for the fp8 16-row kernel
//              with K as register A operands, session 15; static ranges only). Measured: 64 copies of 576 B per page
//              stream at ~2 TB/s (16384 fp8 pages evict-first: 290 us with no math, 353 with 500 ns; one bulk copy
//              per page 153 / 160), so that kernel design is out.
// Two flushes:
//   memset -- bench_decode's and the anchors' (ANCHORS.md "How the anchor was timed": a 256 MB memset between
//             calls): the flush leaves L2 full of dirty lines, which the timed kernel's reads write back to HBM;
//   read   -- bench/common's L2Flusher reading 256 MB (L2 left full of clean lines): the stream's own traffic only.
// The difference is what the anchor methodology bills every memory-bound call for the flush's dirty lines, and
// the memset column is a lower bound for any kernel that must read those bytes under it. The last two columns: the
// CTAs' ends in one more call after each flush (min / median / max, us after the first CTA's start), the spread that
// decides a call whose CTAs all stream at once.
// --math-ns N: after a page lands, its slot is refilled only N ns later (a spin on the global timer),
// as a decode step's math holds its stage: with it, deeper rings lose (session 13: 36 KB pages, 500 ns, 3 / 4 / 5
// slots 151.4 / 155.2 / 157.0 us at 16384 pages), which set the 16-row kernels' ring depths.
//
//   bench_stream [--page-bytes B] [--pages N[,N...]] [--ctas C] [--stages S] [--reps R] [--copy bulk|box|cpasync|rows]
//                [--promotion 0|64|128|256] [--box-bytes 64|128] [--math-ns N] [--dynamic K] [--evict-first F]
//                [--tail S] [--tail-cost NS] [--tail-chunk K]
//                (defaults: 36864 = one fp8 page, the KV pages of rows 4-9, 132, 5, 50, bulk, 128, 128, 0, 0)
// --dynamic K (bulk / box): no static ranges; each CTA claims chunks of K pages from a grid-wide counter until the
// list is done -- the bound of any work stealing over the same pages (session 14).
// --tail S (bulk / box): tail stealing over S segments (sequences) of n / S pages, the static plan of a b = S decode
// row (one whole sequence per CTA) plus work moved at the end: CTA c < S owns segment c and claims its pages from the
// front; a CTA whose own segment is exhausted (CTAs >= S at once) claims pages from the back of the segment with the
// most pages left, until none is left. One 64-bit word per segment (front claims low, back claims high) makes every
// claim exact with one atomic; claims of --tail-chunk K pages (default 1) are made one claim ahead. --tail-cost NS:
// what moving work costs a decode kernel, as a spin: each stolen run (a thief's pages of one victim: its partial) and
// each owner stolen from (its partial and the merge) pay NS at its end. The bound of the "tail pieces" design
// (NOTES_plan.md session 13 item 10) before any kernel is built. (Session 45: the tail mode's per-page bookkeeping,
// the warp kept alive and a shuffle per page, costs the fp8 stream ~9 us at a 500 ns hold, whatever the claims;
// compare it with --dynamic, not with the static stream: bench/decode/NOTES.md "Session 45".)
// --evict-first F (bulk / box / rows): a fraction F of the page copies' lines with an L2 evict-first cache policy,
// the rest evict-unchanged (F = 1: FlashMLA's dense decode loads its KV tiles so). Not for cpasync: ptxas (CUDA 13.0)
// built a hinted cp.async beside the plain one of a runtime branch into an odd-register descriptor (desc[UR1]) that
// faulted with an illegal instruction, here and in the decode kernel (session 15; there a __noinline__ function for
// the hinted copies compiled correctly).
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/args.h"
#include "common/timing.h"
#include "mla/core/cuda_check.h"
#include "mla/core/status.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/timeline.cuh"  // timeline_now: the global timer, ns
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/tma_encode.h"

namespace {

using mla::Status;

constexpr int kMaxStages = 8;

enum Copy { kBulk = 0, kBox = 1, kCpAsync = 2, kRows = 3 };

// Spins `ns` nanoseconds on the global timer (0: none).
__device__ __forceinline__ void spin_ns(int ns) {
  if (ns <= 0) return;
  const unsigned long long until = mla::sm90::decode::timeline_now() + static_cast<unsigned>(ns);
  while (mla::sm90::decode::timeline_now() < until) {
  }
}

// CTA c streams pages [c * n / C, (c + 1) * n / C) of `order` through `stages` shared-memory slots of `slot_bytes`:
// page i goes into slot i % stages once the slot's previous page has landed (bulk / box: thread 0 issues, mbarrier
// per slot; cpasync: every thread its 16-byte chunks, one commit group per page, wait_group keeps stages - 1 ahead).
template <int kCopy>
__global__ void stream_pages_kernel(const __grid_constant__ CUtensorMap map, const uint8_t* __restrict__ base,
                                    const int32_t* __restrict__ order, int n, int page_bytes, int slot_bytes,
                                    int stages, int math_ns, int box_bytes, int dynamic, float evict_first,
                                    int tail, int tail_cost_ns, int tail_chunk, int* counters, unsigned* sink,
                                    unsigned long long* stamps) {
  // stamps[2 c], [2 c + 1]: CTA c's start and end (globaltimer, ns), for the spread of the CTAs' ends.
  if (threadIdx.x == 0) stamps[2 * blockIdx.x] = mla::sm90::decode::timeline_now();
  extern __shared__ __align__(1024) uint8_t smem[];  // slots, then the slots' mbarriers (no static shared memory:
                                                    // the 128-byte swizzle wants 1024-byte aligned boxes)
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + stages * slot_bytes);
  const int lo = static_cast<int>(int64_t(blockIdx.x) * n / gridDim.x);
  const int hi = static_cast<int>(int64_t(blockIdx.x + 1) * n / gridDim.x);
  using namespace mla::sm90::decode;
  const uint32_t s0 = smem_u32(smem);
  unsigned acc = 0;
  if constexpr (kCopy == kCpAsync) {  // two slots, as the 16-row kernel (stages ignored)
    auto issue = [&](int i) {
      const uint8_t* src = base + int64_t(order[i]) * page_bytes;
      const uint32_t dst = s0 + ((i - lo) & 1) * slot_bytes;
      for (int c = threadIdx.x; c < page_bytes / 16; c += blockDim.x) cp_async_16(dst + 16 * c, src + 16 * c, 16);
    };
    // Pages lo and lo + 1 up front; page i + 2 into page i's slot once every thread is done with page i (one commit
    // group per page, empty past the end, so wait_group 1 always means "page i landed").
    if (lo < hi) issue(lo);
    cp_async_commit();
    if (lo + 1 < hi) issue(lo + 1);
    cp_async_commit();
    for (int i = lo; i < hi; ++i) {
      cp_async_wait<1>();
      __syncthreads();  // page i landed, for every thread
      acc += smem[((i - lo) & 1) * slot_bytes + threadIdx.x];
      spin_ns(math_ns);  // --math-ns: the page's math before its slot is refilled
      __syncthreads();  // every thread is done with the slot page i + 2 goes into
      if (i + 2 < hi) issue(i + 2);
      cp_async_commit();
    }
  } else {
    const int lane = threadIdx.x;  // kRows: the warp issues the rows; --tail: the warp scans; else thread 0 alone
    if (kCopy != kRows && tail == 0 && lane != 0) return;
    const int box_w = box_bytes / 64;  // bytes of a token row per box
    const int boxes = (page_bytes / 64 + box_w - 1) / box_w;
    const int row = page_bytes / 64;  // kRows: a token row's bytes; its slot row is row + 16
    if (lane == 0) {
      for (int s = 0; s < stages; ++s) mbar_init(smem_u32(&bars[s]), 1);
      mbar_init_fence();
    }
    __syncwarp();
    const uint64_t pol = l2_evict_first_fraction(evict_first);  // used only when evict_first > 0
    auto issue = [&](int i, int k) {  // page i of the list as this CTA's k-th
      const uint32_t bar = smem_u32(&bars[k % stages]);
      const uint32_t dst = s0 + (k % stages) * slot_bytes;
      const uint8_t* src = base + int64_t(order[i]) * page_bytes;
      auto bulk = [&](uint32_t d, const uint8_t* from, int bytes) {  // one 1D bulk copy, hinted under --evict-first
        if (evict_first > 0.f)
          bulk_load_hint(d, from, static_cast<uint32_t>(bytes), bar, pol);
        else
          bulk_load(d, from, static_cast<uint32_t>(bytes), bar);
      };
      if constexpr (kCopy == kRows) {
        if (lane == 0) mbar_expect_tx(bar, static_cast<uint32_t>(page_bytes));
        __syncwarp();
        for (int r = lane; r < 64; r += 32) bulk(dst + r * (row + 16), src + r * row, row);
      } else if (lane != 0) {  // --tail: lane 0 issues
      } else if constexpr (kCopy == kBulk) {
        mbar_expect_tx(bar, static_cast<uint32_t>(page_bytes));
        bulk(dst, src, page_bytes);
      } else {
        mbar_expect_tx(bar, static_cast<uint32_t>(boxes * box_bytes));  // out-of-row bytes arrive as zeros
        for (int x = 0; x < boxes; ++x) {
          if (evict_first > 0.f)
            tma_load_2d_hint(dst + x * box_bytes, &map, bar, box_w * x, order[i] * 64, pol);
          else
            tma_load_2d(dst + x * box_bytes, &map, bar, box_w * x, order[i] * 64);
        }
      }
    };
    // The pages this CTA streams, in order: its static range, or (--dynamic K) chunks of K pages of the whole list
    // claimed from a grid-wide counter, the next chunk claimed one chunk ahead so the atomic's latency stays off
    // the issue path. counters[0]: next chunk, counters[1]: CTAs done; the last CTA resets both for the next call.
    int pos = lo, end = hi, claim = n;
    if (dynamic > 0) {
      pos = atomicAdd(&counters[0], 1) * dynamic;
      end = min(pos + dynamic, n);
      claim = atomicAdd(&counters[0], 1) * dynamic;
    }
    // --tail: words[s] = (back claims << 32) | front claims of segment s; counters[0..1] as for --dynamic.
    unsigned long long* words = reinterpret_cast<unsigned long long*>(counters + 2);
    const int seg_pages = tail > 0 ? n / tail : 0;
    int seg = tail > 0 && static_cast<int>(blockIdx.x) < tail ? static_cast<int>(blockIdx.x) : -1;
    bool own = seg >= 0;
    // Claims of tail_chunk = K pages (L = seg_pages): the owner's [f, f + K) clipped below the back claims, a thief's
    // [L - b - K, L - b) clipped at the front claims (the other side's count in the same atomic's old value: no page
    // twice, none lost). Lane 0 keeps the next claim's old value one claim ahead (`ahead`) and the pages
    // [tpos, tend) of the current one.
    unsigned long long ahead = 0;
    int tpos = 0, tend = 0;
    if (own && lane == 0) ahead = atomicAdd(&words[seg], static_cast<unsigned long long>(tail_chunk));
    // The warp's pick of a victim: the segment with the most unclaimed pages (-1: none left).
    auto pick_victim = [&]() -> int {
      // Ties go to different segments for different CTAs (rank: the distance from a CTA-dependent start), so the
      // thieves that start together do not all land on one victim.
      const int start = static_cast<int>(blockIdx.x * 37u % static_cast<unsigned>(tail));
      auto rank = [&](int v) { return v < 0 ? -1 : (v - start + tail) % tail; };
      int best = -1, best_left = 0;
      for (int v = lane; v < tail; v += 32) {
        const unsigned long long w = __ldcg(&words[v]);
        const int left = seg_pages - static_cast<int>(w & 0xffffffffu) - static_cast<int>(w >> 32);
        if (left > best_left || (left == best_left && left > 0 && rank(v) > rank(best))) best_left = left, best = v;
      }
      for (int o = 16; o > 0; o >>= 1) {
        const int l2 = __shfl_xor_sync(0xffffffffu, best_left, o), b2 = __shfl_xor_sync(0xffffffffu, best, o);
        if (l2 > best_left || (l2 == best_left && rank(b2) > rank(best))) best_left = l2, best = b2;
      }
      return best;
    };
    auto next_tail_page = [&]() -> int {  // warp-collective: the same page (or -1) in every lane
      for (;;) {
        if (seg < 0) {
          seg = pick_victim();
          if (seg < 0) return -1;
          own = false;
          if (lane == 0) ahead = atomicAdd(&words[seg], static_cast<unsigned long long>(tail_chunk) << 32);
        }
        int idx = -1;
        if (lane == 0) {
          if (tpos >= tend) {  // take the claim made ahead, and make the next one
            const int f = static_cast<int>(ahead & 0xffffffffu), b = static_cast<int>(ahead >> 32);
            if (own) {
              tpos = f;
              tend = min(f + tail_chunk, seg_pages - b);
            } else {
              tpos = max(seg_pages - b - tail_chunk, f);
              tend = seg_pages - b;
            }
            if (tpos < tend)
              ahead = atomicAdd(&words[seg], own ? static_cast<unsigned long long>(tail_chunk)
                                                 : static_cast<unsigned long long>(tail_chunk) << 32);
          }
          if (tpos < tend) idx = own ? tpos++ : --tend;  // a thief walks its chunk from the back too
        }
        idx = __shfl_sync(0xffffffffu, idx, 0);
        if (idx >= 0) return seg * seg_pages + idx;
        // The run on this segment is over: a thief's partial, or an owner stolen from (its partial and the merge).
        if (own) {
          const unsigned long long w = __ldcg(&words[seg]);
          if ((w >> 32) != 0) spin_ns(tail_cost_ns);
        } else {
          spin_ns(tail_cost_ns);
        }
        seg = -1;
        tpos = tend = 0;
      }
    };
    auto next_page = [&]() -> int {
      if (tail > 0) return next_tail_page();
      if (pos >= end) {
        if (dynamic == 0 || claim >= n) return -1;
        pos = claim;
        end = min(claim + dynamic, n);
        claim = atomicAdd(&counters[0], 1) * dynamic;
      }
      return pos++;
    };
    int issued = 0;
    for (; issued < stages; ++issued) {
      const int i = next_page();
      if (i < 0) break;
      issue(i, issued);
    }
    for (int k = 0; k < issued; ++k) {
      mbar_wait(smem_u32(&bars[k % stages]), (k / stages) & 1);
      if (lane == 0) acc += smem[(k % stages) * slot_bytes];  // a read of the landed page, so the copy is not dead
      spin_ns(math_ns);  // --math-ns: a decode step's math on the page before its slot is free again
      const int i = next_page();
      if (i >= 0) issue(i, issued++);
    }
    if (dynamic > 0 || tail > 0) {
      __threadfence();
      int last = 0;
      if (lane == 0) last = atomicAdd(&counters[1], 1) == static_cast<int>(gridDim.x) - 1;
      if (__shfl_sync(tail > 0 ? 0xffffffffu : 1u, last, 0)) {
        for (int v = lane; v < tail; v += 32) words[v] = 0;
        if (lane == 0) counters[0] = 0, counters[1] = 0;
      }
    }
  }
  if (acc == 0x7fffffffu) *sink = acc;  // never in practice; keeps acc live
  if (threadIdx.x == 0) stamps[2 * blockIdx.x + 1] = timeline_now();
}

struct Options {
  int page_bytes = 36864;
  std::vector<int64_t> pages = {32 * 8, 32 * 64, 32 * 128, 128 * 8, 128 * 64, 128 * 128};  // rows 4-9's pages
  int ctas = 132, stages = 5, reps = 50;
  int math_ns = 0;  // ns of spin per landed page before its slot is refilled
  int copy = kBulk;
  int promotion = 128;  // box: the cache map's L2 promotion in bytes (0: none)
  int box_width = 128;  // box: bytes of a token row per box (64: 64-byte swizzle, 128: 128-byte swizzle)
  int dynamic = 0;      // bulk / box: 0 static ranges, K > 0 chunks of K pages claimed from a grid-wide counter
  float evict_first = 0.f;  // > 0: that fraction of the page copies' lines L2 evict-first (1: FlashMLA's KV hint)
  int tail = 0;             // bulk / box: > 0 segments whose last pages other CTAs may steal (--tail)
  int tail_cost_ns = 0;     // --tail: spin per stolen run and per owner stolen from
  int tail_chunk = 1;       // --tail: pages per claim
};
int box_bytes(const Options& o) { return 64 * o.box_width; }

// Shared-memory bytes of one slot: the page, or its boxes (a token row padded to whole 128-byte boxes).
int slot_bytes(const Options& o) {
  if (o.copy == kRows) return 64 * (o.page_bytes / 64 + 16);
  return o.copy == kBox ? (o.page_bytes / 64 + o.box_width - 1) / o.box_width * box_bytes(o) : o.page_bytes;
}
int slots(const Options& o) { return o.copy == kCpAsync ? 2 : o.stages; }

Status parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    auto num = [&](int lo, int hi, int* out) -> Status {
      const std::vector<int64_t> v = mla::bench::parse_int_list(argv[++i]);
      if (v.size() != 1 || v[0] < lo || v[0] > hi)
        return Status::invalid("bench stream", a + " wants an integer in " + std::to_string(lo) + ".." +
                                                   std::to_string(hi) + "; got '" + argv[i] + "'");
      *out = static_cast<int>(v[0]);
      return Status::ok();
    };
    if (a == "--page-bytes" && has) {
      MLA_TRY(num(16, 98304, &o->page_bytes));
      if (o->page_bytes % 16 != 0) return Status::invalid("bench stream", "--page-bytes must be a multiple of 16");
    } else if (a == "--pages" && has) {
      o->pages = mla::bench::parse_int_list(argv[++i]);
      for (int64_t p : o->pages)
        if (p < 1 || p > (int64_t(1) << 24))
          return Status::invalid("bench stream",
                                 "--pages wants counts in 1..16777216; got '" + std::string(argv[i]) + "'");
    } else if (a == "--math-ns" && has) {
      MLA_TRY(num(0, 100000, &o->math_ns));
    } else if (a == "--ctas" && has) {
      MLA_TRY(num(1, 1024, &o->ctas));
    } else if (a == "--stages" && has) {
      MLA_TRY(num(1, kMaxStages, &o->stages));
    } else if (a == "--reps" && has) {
      MLA_TRY(num(1, 100000, &o->reps));
    } else if (a == "--copy" && has) {
      const std::string v = argv[++i];
      if (v == "bulk") o->copy = kBulk;
      else if (v == "box") o->copy = kBox;
      else if (v == "cpasync") o->copy = kCpAsync;
      else if (v == "rows") o->copy = kRows;
      else return Status::invalid("bench stream", "--copy wants bulk, box, cpasync or rows; got '" + v + "'");
    } else if (a == "--promotion" && has) {
      MLA_TRY(num(0, 256, &o->promotion));
      if (o->promotion != 0 && o->promotion != 64 && o->promotion != 128 && o->promotion != 256)
        return Status::invalid("bench stream", "--promotion wants 0, 64, 128 or 256");
    } else if (a == "--evict-first" && has) {
      const std::string v = argv[++i];
      char* end = nullptr;
      const float f = std::strtof(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(f > 0.f && f <= 1.f))
        return Status::invalid("bench stream", "--evict-first wants a fraction in (0, 1]; got '" + v + "'");
      o->evict_first = f;
    } else if (a == "--dynamic" && has) {
      MLA_TRY(num(0, 4096, &o->dynamic));
    } else if (a == "--tail" && has) {
      MLA_TRY(num(0, 1024, &o->tail));
    } else if (a == "--tail-chunk" && has) {
      MLA_TRY(num(1, 1024, &o->tail_chunk));
    } else if (a == "--tail-cost" && has) {
      MLA_TRY(num(0, 100000, &o->tail_cost_ns));
    } else if (a == "--box-bytes" && has) {
      MLA_TRY(num(64, 128, &o->box_width));
      if (o->box_width != 64 && o->box_width != 128)
        return Status::invalid("bench stream", "--box-bytes wants 64 or 128");
    } else {
      return Status::invalid(
          "bench stream",
          "usage: [--page-bytes B] [--pages N[,N...]] [--ctas C] [--stages S] "
          "[--reps R] [--copy bulk|box|cpasync|rows] [--promotion 0|64|128|256] [--box-bytes 64|128] [--math-ns N] "
          "[--dynamic K] [--evict-first F] [--tail S] [--tail-cost NS] [--tail-chunk K]; got '" +
              a + "'");
    }
  }
  if (o->page_bytes % 64 != 0) return Status::invalid("bench stream", "--page-bytes must hold 64 whole tokens");
  if (o->evict_first > 0.f && o->copy == kCpAsync)
    return Status::invalid("bench stream", "--evict-first applies to --copy bulk, box and rows only");
  if (o->tail > 0 && (o->dynamic > 0 || o->copy == kRows || o->copy == kCpAsync))
    return Status::invalid("bench stream", "--tail applies to --copy bulk and box with static ranges (no --dynamic)");
  if (o->tail > o->ctas)
    return Status::invalid("bench stream", "--tail S needs at least S CTAs (" + std::to_string(o->ctas) + " given)");
  for (int64_t p : o->pages)
    if (o->tail > 0 && p % o->tail != 0)
      return Status::invalid("bench stream",
                             "--tail S needs page counts that are multiples of S; got " + std::to_string(p));
  if (o->copy == kRows && (o->dynamic > 0 || (o->page_bytes / 64) % 16 != 0))
    return Status::invalid("bench stream", "--copy rows wants static ranges and token rows of a multiple of 16 bytes");
  // 227 KB per CTA on sm_90, less the slots' mbarriers.
  if (size_t(slots(*o)) * slot_bytes(*o) + 8 * kMaxStages > 227 * 1024)
    return Status::invalid("bench stream", "the stages (" + std::to_string(slots(*o)) + " x " +
                                               std::to_string(slot_bytes(*o)) +
                                               " bytes) must fit 227 KB of shared memory");
  return Status::ok();
}

Status run(const Options& o) {
  cudaStream_t s;
  MLA_CUDA_TRY("bench stream", cudaStreamCreate(&s));
  const int64_t max_pages = *std::max_element(o.pages.begin(), o.pages.end());
  uint8_t *data = nullptr, *flush = nullptr;
  int32_t* order = nullptr;
  unsigned* sink = nullptr;
  unsigned long long* stamps = nullptr;
  int* counters = nullptr;
  mla::bench::L2Flusher read_flush;
  auto cleanup = [&] {
    cudaFree(data);
    cudaFree(flush);
    cudaFree(order);
    cudaFree(sink);
    cudaFree(stamps);
    cudaFree(counters);
    cudaStreamDestroy(s);
  };
  auto body = [&]() -> Status {
    MLA_CUDA_TRY("bench stream", cudaMalloc(&data, size_t(max_pages) * o.page_bytes));
    MLA_CUDA_TRY("bench stream", cudaMalloc(&flush, mla::bench::kMemsetFlushBytes));
    MLA_CUDA_TRY("bench stream", cudaMalloc(&order, size_t(max_pages) * 4));
    MLA_CUDA_TRY("bench stream", cudaMalloc(&sink, 4));
    MLA_CUDA_TRY("bench stream", cudaMalloc(&stamps, size_t(o.ctas) * 16));
    const size_t counter_bytes = 8 + 8 * size_t(o.tail);  // --dynamic's two counters, then --tail's words
    MLA_CUDA_TRY("bench stream", cudaMalloc(&counters, counter_bytes));
    MLA_CUDA_TRY("bench stream", cudaMemset(counters, 0, counter_bytes));
    MLA_CUDA_TRY("bench stream", cudaMemset(data, 0x3c, size_t(max_pages) * o.page_bytes));
    MLA_TRY(read_flush.init(mla::bench::kMemsetFlushBytes));
    const int smem = slots(o) * slot_bytes(o) + 8 * kMaxStages;
    const int threads = o.copy == kCpAsync ? 256 : 32;  // --tail: the 32 lanes scan for victims
    auto kernel = o.copy == kBulk ? stream_pages_kernel<kBulk>
                  : o.copy == kBox ? stream_pages_kernel<kBox>
                  : o.copy == kRows ? stream_pages_kernel<kRows>
                                    : stream_pages_kernel<kCpAsync>;
    MLA_CUDA_TRY("bench stream", cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUtensorMap map{};
    if (o.copy == kBox) {  // the cache as [pages * 64 tokens, token bytes] bytes, 64 x 128-byte boxes
      auto fn = mla::sm90::tensor_map_encode_fn();
      if (fn == nullptr) return Status::cuda("bench stream", "cuTensorMapEncodeTiled is not available");
      const cuuint64_t dims[2] = {static_cast<cuuint64_t>(o.page_bytes / 64), static_cast<cuuint64_t>(max_pages * 64)};
      const cuuint64_t strides[1] = {static_cast<cuuint64_t>(o.page_bytes / 64)};
      const cuuint32_t box[2] = {static_cast<cuuint32_t>(o.box_width), 64}, elem_strides[2] = {1, 1};
      const CUtensorMapL2promotion promo = o.promotion == 256  ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                           : o.promotion == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                                           : o.promotion == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                                                : CU_TENSOR_MAP_L2_PROMOTION_NONE;
      const CUresult r = fn(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, data, dims, strides, box, elem_strides,
                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                            o.box_width == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B, promo,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (r != CUDA_SUCCESS)
        return Status::cuda("bench stream", "cuTensorMapEncodeTiled failed: " + std::to_string(int(r)));
    }
    static const char* kCopyName[] = {"1D bulk copies", "2D TMA boxes", "cp.async 16 B x 256 threads",
                                      "1D bulk copies per token row (rows padded by 16 B)"};
    std::string math = o.math_ns > 0 ? std::to_string(o.math_ns) + " ns of spin per page" : std::string("no math");
    if (o.dynamic > 0 && o.copy != kCpAsync)
      math += ", chunks of " + std::to_string(o.dynamic) + " pages claimed dynamically";
    if (o.evict_first > 0.f) math += ", L2 evict-first fraction " + std::to_string(o.evict_first);
    if (o.tail > 0)
      math += ", " + std::to_string(o.tail) + " segments, tails stolen in claims of " + std::to_string(o.tail_chunk) +
              " pages at " + std::to_string(o.tail_cost_ns) + " ns a run";
    const std::string box_note = o.copy == kBox ? " of 64 x " + std::to_string(o.box_width) + " B (L2 promotion " +
                                                      std::to_string(o.promotion) + " B)"
                                                : std::string();
    std::printf("# bench_stream: %d-byte pages in random order, %s%s, %d CTAs x %d slots, %s; reps %d "
                "(median), one graph per call\n", o.page_bytes, kCopyName[o.copy], box_note.c_str(),
                o.ctas, slots(o), math.c_str(), o.reps);
    std::printf("| pages | MB | memset flush µs | TB/s | read flush µs | TB/s | memset - read µs | CTA ends (memset "
                "flush, µs after the first start): min / median / max | CTA ends (read flush) |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    for (int64_t n : o.pages) {
      std::vector<int32_t> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), std::mt19937_64(42 + n));
      MLA_CUDA_TRY("bench stream", cudaMemcpy(order, perm.data(), n * 4, cudaMemcpyHostToDevice));
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      MLA_CUDA_TRY("bench stream", cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      kernel<<<o.ctas, threads, smem, s>>>(map, data, order, static_cast<int>(n), o.page_bytes, slot_bytes(o), slots(o),
                                           o.math_ns, box_bytes(o), o.dynamic, o.evict_first, o.tail, o.tail_cost_ns,
                                           o.tail_chunk, counters, sink, stamps);
      MLA_CUDA_TRY("bench stream", cudaStreamEndCapture(s, &graph));
      MLA_CUDA_TRY("bench stream", cudaGraphInstantiate(&exec, graph, 0));
      cudaGraphDestroy(graph);
      // Flush 0: the anchors' memset (bench_decode's timing); 1: a read of as many bytes, L2 left clean.
      auto memset_flush = [&](int i) {
        return mla::cuda_status(cudaMemsetAsync(flush, i & 0xFF, mla::bench::kMemsetFlushBytes, s), "bench stream",
                                "flush memset");
      };
      auto clean_flush = [&](int) { return read_flush.flush(s); };
      double us[2];
      MLA_TRY(mla::bench::time_graph_median_us(exec, s, memset_flush, o.reps, &us[0]));
      MLA_TRY(mla::bench::time_graph_median_us(exec, s, clean_flush, o.reps, &us[1]));
      // One more call after each flush: the CTAs' start / end stamps (min / median / max end, us after the first
      // start).
      struct Ends {
        double min, med, max;
      };
      auto cta_ends = [&](auto flush, Ends* e) -> Status {
        MLA_TRY(flush(0));
        MLA_CUDA_TRY("bench stream", cudaGraphLaunch(exec, s));
        std::vector<unsigned long long> st(2 * size_t(o.ctas));
        MLA_CUDA_TRY("bench stream", cudaMemcpyAsync(st.data(), stamps, st.size() * 8, cudaMemcpyDeviceToHost, s));
        MLA_CUDA_TRY("bench stream", cudaStreamSynchronize(s));
        unsigned long long t0 = ~0ull;
        for (int c = 0; c < o.ctas; ++c) t0 = std::min(t0, st[2 * c]);
        std::vector<double> ends;
        for (int c = 0; c < o.ctas; ++c) ends.push_back((double(st[2 * c + 1]) - double(t0)) * 1e-3);
        std::sort(ends.begin(), ends.end());
        *e = {ends.front(), ends[ends.size() / 2], ends.back()};
        return Status::ok();
      };
      Ends em{}, er{};
      MLA_TRY(cta_ends(memset_flush, &em));
      MLA_TRY(cta_ends(clean_flush, &er));
      cudaGraphExecDestroy(exec);
      const double mb = double(n) * o.page_bytes * 1e-6;
      std::printf("| %lld | %.1f | %.1f | %.2f | %.1f | %.2f | %+.1f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f |\n",
                  static_cast<long long>(n), mb, us[0], mb / us[0], us[1], mb / us[1], us[0] - us[1], em.min, em.med,
                  em.max, er.min, er.med, er.max);
      std::fflush(stdout);
    }
    return Status::ok();
  };
  const Status st = body();
  cleanup();
  return st;
}

}  // namespace

int stream_bench_main(int argc, char** argv) {
  Options o;
  const Status parsed = parse(argc, argv, &o);
  const Status st = parsed.is_ok() ? run(o) : parsed;
  if (!st.is_ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}

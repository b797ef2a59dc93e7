#pragma once
// Tensor-memory-accelerator (cp.async.bulk.tensor) loads completing on mbarriers: one thread moves a
// whole 64 x 576 page as nine 64 x 64 boxes, each landing as one 128B-swizzled slab (the wgmma operand
// layout of wgmma.h), instead of 4608 sixteen-byte cp.async requests from 256 threads.
#include <cuda.h>

#include <cstdint>

namespace mla::sm90::decode {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes barrier initialization visible to the async proxy (the TMA unit) before first use.
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}

// One bounded wait (the hardware may return early): has phase `parity` of the mbarrier completed?
__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Non-blocking probe (test_wait never suspends the thread, unlike try_wait): has phase `parity` of the mbarrier
// completed? For decisions taken on whether data has already landed, not for waiting.
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

// Per-thread spin until phase `parity` completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// Spins until every lane of the warp saw phase `parity` complete, so the loop exits warp-uniformly. With the
// per-thread spin the exit may diverge as far as ptxas can tell: in the bf16 64-row kernel it then put a YIELD at
// the top of compute_scores_page's slab loop and WARPSYNC.ALLs before the uniform-datapath release (one between the
// slab's HGMMAs), 9 times per page; with this wait that kernel has neither (bench/decode/NOTES.md runs 18-19: h128
// b128 s8192 582 -> 551 us). The vote costs a VOTE.ALL per try (in the fp8_ds owner-converts kernel, +1.5-2 %).
__device__ __forceinline__ void mbar_wait_warp(uint32_t bar, uint32_t parity) {
  while (!__all_sync(0xffffffffu, mbar_try_wait(bar, parity))) {
  }
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// MLA_RC_ALL_ARRIVE (diagnostic, 0 in normal builds): each consumer thread arrives on the empty barriers itself, not
// lane 0 for its warp after __syncwarp (bar.warp.sync orders memory among its lanes; mbarrier.arrive is .release.cta),
// which racecheck does not take as ordering the other lanes: a report that vanishes under it is that model, not a
// missing order (session 66 c3 ran it in the fp8_ds TUs; the fp8 TUs compile with it, never run; the 16-bit kernels
// arrive per thread anyway).
#ifndef MLA_RC_ALL_ARRIVE
#define MLA_RC_ALL_ARRIVE 0
#endif
constexpr int kRcArrivalsPerWarp = MLA_RC_ALL_ARRIVE ? 32 : 1;

// A warp's one arrival (kRcArrivalsPerWarp in the barrier's count): lane 0 arrives once every lane got here, so a
// consumer warp releases a stage or slot it read with one arrival instead of 32. Users: the fp8 h16 / n32 and fp8_ds
// ws16 rings, and fp8_ds's 64-row stages (release_stage, mainloop_ws.cuh). One arrival per thread instead, with no
// __syncwarp, measured (session 67): fp8 h16 rows 4-9 +0.0..+0.26 %, rows 1 / 10 +1 %; fp8_ds ws16 noise; fp8_ds ws64
// +1.0..+1.6 % on its long h_q 128 rows. The 16-bit kernels release per thread (release_stage, Bars::release_page).
__device__ __forceinline__ void mbar_arrive_warp(uint32_t bar) {
  __syncwarp();
  if (MLA_RC_ALL_ARRIVE || (threadIdx.x & 31) == 0) mbar_arrive(bar);
}

// Named barriers (ids 1..15; 0 is __syncthreads): sync waits for `count` threads, arrive signals without
// waiting. An arrive -> sync pair orders the arriving threads' prior shared-memory writes before the
// syncing threads' later reads (producer/consumer hand-off between warpgroups).
__device__ __forceinline__ void named_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
// A named barrier that also ORs a predicate over its `count` threads (bar.red.or): each participant gets 1 if any
// of them passed `pred`, else 0, the same value in every thread (what a warpgroup-collective wgmma branch needs).
// It orders memory as bar.sync does. Returned as 0 / 1 in a register: the fp8 ws kernel shuffles it first.
__device__ __forceinline__ uint32_t named_sync_or(int id, int count, bool pred) {
  uint32_t any;
  asm volatile(
      "{\n.reg .pred pi, po;\nsetp.ne.u32 pi, %1, 0;\nbar.red.or.pred po, %2, %3, pi;\nselp.u32 %0, 1, 0, po;\n}\n"
      : "=r"(any)
      : "r"(static_cast<uint32_t>(pred)), "r"(id), "r"(count)
      : "memory");
  return any;
}

// Per-warpgroup register budget (sm_90a): the producer gives registers back, the consumers take them.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

// 1D bulk copy of `bytes` (a multiple of 16) contiguous bytes global -> shared, completing on `bar` (fp8_ds
// pages of the 256-thread kernel: one instruction per 41 KB page instead of 2624 cp.async).
__device__ __forceinline__ void bulk_load(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

// 2D tiled TMA load of box (c0 = column, c1 = row) of `map` into shared memory at dst.
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// 3D tiled TMA load of box (c0, c1, c2) of `map` into shared memory at dst (a KV page's slabs in one copy: the fp8
// 16-row kernel, decode_fp8/page_tma.cuh; the 16-bit 16-row tiles, pages.cuh TmaPages).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// The same copies with an L2 cache policy operand (createpolicy; ptx.h l2_evict_first_fraction).
// bulk_load_hint's one user is the fp8_ds 16-row kernel's raw page ring (decode_fp8ds/kernel_ws16.cuh): a slot is
// refilled after every consumer warp's lane 0 arrived on its empty barrier (after __syncwarp), which racecheck does not
// take as ordering the other lanes' reads (MLA_RC_ALL_ARRIVE=1 clears the report: bench/decode/NOTES.md "Session 66" 2).
__device__ __forceinline__ void bulk_load_hint(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar,
                                               uint64_t policy) {
  asm volatile(  // racecheck: hand-off (above)
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)  // racecheck: hand-off (above)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                 uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4}], "
      "[%2], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void tma_load_3d_hint(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                 int c2, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%3, %4, "
      "%5}], [%2], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
      : "memory");
}

}  // namespace mla::sm90::decode

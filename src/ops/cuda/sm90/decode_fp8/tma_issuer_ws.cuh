#pragma once
// The page and Q-tile TMA of the 64-row fp8 kernel's four-transposer form (kernel_ws.cuh, MLA_FP8_WS_TR_WARPS 4,
// session 55). No warp is left for a TMA thread of its own: with a 13th warp (416 threads) ptxas caps the launch at 128
// registers a thread, as for 512, and P.V's 128 accumulators need more (C7602); likely because sub-partition 0 then
// holds 4 warps and 4 x 128 is its 512 registers per lane. So lane 0 of transpose warp 0 issues the copies between its
// rounds. It polls (mbarrier test_wait, never a blocking wait): a copy whose gate is closed (the K stage's k_empty, a
// Q tile's q_empty) is tried again at the next poll, so the warp's own transpose never waits behind a gate (session 52
// c1 put a blocking issue between a warp's shares: +1.3..+15.5 %). The copies and their order are ws_producer's
// (kernel_ws.cuh).
//
// Registers: the transposers have 56, and the issuer's walk of the part (a PartCursor and three counters) on top of
// the transpose spilled 164 bytes, so that state lives in shared memory (IssuerState, in the barrier area) and only
// the next copy's gate stays in a register across the rounds.
// The next page's block-table entry comes by cp.async into IssuerState::next_page (session 70): held in a register,
// the load's result was moved right after the load (a phi of the issue loop), so an issuing poll waited out the load.
// That was not what makes the polls slow, though: warp 0's polls cost 2268 cycles a page before and 2246 after
// (per-warp phase sums, H100, row 17; the other warps' loop ~150), and the form still runs rows 13-18 +31..+78 %
// (bench/decode/NOTES.md "Session 70" 3).
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode_fp8/mainloop_ws.cuh"
#include "ops/cuda/sm90/decode_fp8/params.h"

namespace mla::sm90::decode_fp8 {

// In the 64-row kernel's barrier area (config_ws.h kWsBarrierBytes), after the mbarriers.
constexpr int kIssuerStateOffset = 128;
struct IssuerState {
  decode::PartCursor c;  // the next page to copy (its `page` field unused: PolledTmaIssuer::page)
  int j;                 // its index in the part
  int seg;               // the newest segment whose Q tile was issued (-1: none)
  int need_q;            // the next page starts a segment whose Q tile is not issued yet
  int next_page;         // the next page's physical page (cp.async from the block table, or the plan's hint)
};

static_assert(kIssuerStateOffset + sizeof(IssuerState) <= kWsBarrierBytes, "the issuer's state fits the barrier area");

template <int kKStages, class Bars>
struct PolledTmaIssuer {
  static constexpr uint32_t kOpen = 0, kDone = ~0u;
  IssuerState* st;        // shared memory
  uint32_t gate = kOpen;  // the next copy's gate: mbarrier address | phase parity (bit 0), or kOpen / kDone

  __device__ explicit PolledTmaIssuer(IssuerState* state) : st(state) {}
  // The page of cursor c into st->next_page without waiting for it: the plan's hint as a plain store, else a 4-byte
  // cp.async of the block-table entry (next_page() waits for it). c.page is left unset.
  __device__ __forceinline__ void fetch_next_page(const decode::DecodeKernelParams& p, const decode::PartCursor& c) {
    if (!c.valid()) return;
    if (c.hint >= 0) {
      st->next_page = c.hint;
      return;
    }
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(decode::smem_u32(&st->next_page)),
                 "l"(c.page_entry(p))
                 : "memory");
    decode::cp_async_commit();
  }
  // The page fetch_next_page asked for (long landed, unless two copies are issued in one poll).
  __device__ __forceinline__ int next_page() const {
    decode::cp_async_wait<0>();
    return *static_cast<volatile int*>(&st->next_page);
  }
  // One thread (the issuer), before its first poll.
  __device__ void start(const decode::DecodeKernelParams& p) {
    IssuerState s;
    s.c.init_part(p);
    s.c.page = 0;
    s.j = 0;
    s.seg = -1;
    s.need_q = 1;
    s.next_page = 0;
    *st = s;
    fetch_next_page(p, s.c);
  }
  // One thread: issues every copy whose gate is open, in order, and returns at the first closed gate.
  __device__ __forceinline__ void poll(const Fp8DecodeParams& fp, const Bars& bars, uint32_t s_q_tile, uint32_t s_k0,
                                       int tile_row0) {
    if (gate == kDone) return;
    if (gate != kOpen && !decode::mbar_test(gate & ~1u, gate & 1u)) return;
    const decode::DecodeKernelParams& p = fp.d;
    IssuerState s;  // (every field but next_page, which a cp.async may still be writing)
    s.c = st->c;
    s.j = st->j;
    s.seg = st->seg;
    s.need_q = st->need_q;
    for (;;) {
      if (s.need_q) {
        ++s.seg;
        issue_tile_tma(&p.tmap_q, s.c.b * p.rows + tile_row0, s_q_tile, bars.q_full());
        s.need_q = 0;
      } else {
        const int stage = s.j % kKStages;
        issue_k_page(p, s.c, next_page(), s_k0 + stage * kSlabTileBytes, bars.k_full(stage));
        s.need_q = s.c.last_of_sequence();
        s.c.advance(p);
        fetch_next_page(p, s.c);
        ++s.j;
        if (!s.c.valid()) {
          gate = kDone;
          break;
        }
      }
      // The next copy's gate: both consumers released the last Q tile / the page kKStages back freed the K stage.
      if (s.need_q) {
        if (s.seg < 0) continue;
        gate = bars.q_empty() | static_cast<uint32_t>(s.seg & 1);
      } else {
        if (s.j < kKStages) continue;
        gate = bars.k_empty(s.j % kKStages) | phase(s.j - kKStages, kKStages);
      }
      if (!decode::mbar_test(gate & ~1u, gate & 1u)) break;
    }
    st->c = s.c;
    st->j = s.j;
    st->seg = s.seg;
    st->need_q = s.need_q;
  }
};

}  // namespace mla::sm90::decode_fp8

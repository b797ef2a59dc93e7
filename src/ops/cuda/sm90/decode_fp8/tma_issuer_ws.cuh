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
// the next copy's gate and the prefetched page number stay in registers across the rounds.
#include <cstdint>

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
};

static_assert(kIssuerStateOffset + sizeof(IssuerState) <= kWsBarrierBytes, "the issuer's state fits the barrier area");

template <int kKStages, class Bars>
struct PolledTmaIssuer {
  static constexpr uint32_t kOpen = 0, kDone = ~0u;
  IssuerState* st;        // shared memory
  uint32_t gate = kOpen;  // the next copy's gate: mbarrier address | phase parity (bit 0), or kOpen / kDone
  int page = 0;           // the next page's physical page (its block-table load in flight between polls)

  __device__ explicit PolledTmaIssuer(IssuerState* state) : st(state) {}
  // One thread (the issuer), before its first poll.
  __device__ void start(const decode::DecodeKernelParams& p) {
    IssuerState s;
    s.c.init_part(p);
    s.c.fetch_page(p);
    page = s.c.page;
    s.c.page = 0;  // (a constant store: the smem copy does not wait for the load)
    s.j = 0;
    s.seg = -1;
    s.need_q = 1;
    *st = s;
  }
  // One thread: issues every copy whose gate is open, in order, and returns at the first closed gate.
  __device__ __forceinline__ void poll(const Fp8DecodeParams& fp, const Bars& bars, uint32_t s_q_tile, uint32_t s_k0,
                                       int tile_row0) {
    if (gate == kDone) return;
    if (gate != kOpen && !decode::mbar_test(gate & ~1u, gate & 1u)) return;
    const decode::DecodeKernelParams& p = fp.d;
    IssuerState s = *st;
    for (;;) {
      if (s.need_q) {
        ++s.seg;
        issue_tile_tma(&p.tmap_q, s.c.b * p.rows + tile_row0, s_q_tile, bars.q_full());
        s.need_q = 0;
      } else {
        const int stage = s.j % kKStages;
        issue_k_page(p, s.c, page, s_k0 + stage * kSlabTileBytes, bars.k_full(stage));
        s.need_q = s.c.last_of_sequence();
        s.c.advance(p);
        s.c.fetch_page(p);
        page = s.c.page;
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
    s.c.page = 0;
    *st = s;
  }
};

}  // namespace mla::sm90::decode_fp8

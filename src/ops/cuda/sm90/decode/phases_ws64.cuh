#pragma once
// The phases of the 16-bit / fp8_ds 64-row kernel (kernel_ws.cuh) for the per-phase clock sums of phase_sums.cuh
// (-DMLA_DECODE_PHASES builds only; empty otherwise). scripts/ws_phases_summary.py --kernel ws64 names them.
#include "ops/cuda/sm90/decode/phase_sums.cuh"

namespace mla::sm90::decode {

// Consumer phases of an own page j, in kernel order; each mark adds the cycles since the previous mark.
enum Ws64Phase : int {
  kP64PWait = 0,  // top of the page -> P_{j-1} from the other warpgroup
  kP64PvIssue1,   // O rescaled to m_{j-1}, P_{j-1} V_{j-1} issued
  kP64Switch,     // sequence switch: P_{j-1} V_{j-1} waited for, the previous segment written
  kP64QWait,      // Q of the segment (and, on a sequence's last page of a 16-bit format, its tail keys zeroed)
  kP64S,          // compute_scores_page: P_{j-1} V_{j-1} waited for and page j - 1's stage released (before or after
                  // S's first slab, whichever comes first), the slab waits, S_j's wgmma and their wait
  kP64Release,    // Q release
  kP64Softmax,    // mask, row max, exp2, P_j stored (and packed for the own P.V), proxy fence
  kP64Signal,     // P_j signalled
  kP64OwnPv,      // own P_j V_j: rescale, issue, wait (16-bit formats: P from registers; fp8_ds: a warpgroup barrier,
                  // then P from shared memory)
  kP64Epilogue,   // stage release, or the segment's epilogue
  kP64Between,    // the end of own page j -> the top of the next own page (the other warpgroup's page, the loop)
  kP64Count
};
static_assert(kP64Count <= kConsumerPhaseSlots, "one line of consumer sums");
// Producer thread (TMA) phases of page j: the Q slot (at a segment's start) and stage waits, the page's TMA issue, the
// loop. (fp8_ds pages come through the converting producer, producer_ws_fp8ds.cuh, which has no marks: no producer
// line for that format.)
enum Ws64ProdPhase : int { kP64ProdEmptyWait = 0, kP64ProdIssue, kP64ProdLoop };

}  // namespace mla::sm90::decode

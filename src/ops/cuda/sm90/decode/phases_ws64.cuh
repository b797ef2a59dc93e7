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
  kP64QWait,      // Q of the segment (and, on a sequence's last page, its tail keys zeroed)
  kP64S,          // S_j: slab waits, 36 wgmma, their wait (and the release of page j - 1's stage once its P.V is done)
  kP64Release,    // Q release
  kP64Softmax,    // mask, row max, exp2, P_j stored, proxy fence
  kP64Signal,     // P_j signalled
  kP64OwnPv,      // P_j V_j from registers: rescale, issue, wait
  kP64Epilogue,   // stage release, or the segment's epilogue
  kP64Between,    // the end of own page j -> the top of the next own page (the other warpgroup's page, the loop)
  kP64Count
};
static_assert(kP64Count <= kConsumerPhaseSlots, "one line of consumer sums");
// Producer thread (TMA) phases of page j.
enum Ws64ProdPhase : int { kP64ProdEmptyWait = 0, kP64ProdIssue, kP64ProdLoop };

}  // namespace mla::sm90::decode

#pragma once
// The phases of the 64-row fp8 kernel (kernel_ws.cuh) for the per-phase clock sums of ../decode/phase_sums.cuh
// (-DMLA_DECODE_PHASES builds only; empty otherwise). scripts/ws_phases_summary.py --kernel fp8 names them.
// Measurements and what they showed: bench/decode/NOTES_plan.md "Session 19".
#include "ops/cuda/sm90/decode/phase_sums.cuh"

namespace mla::sm90::decode_fp8 {

// Consumer phases of an own page j, in kernel order; each mark adds the cycles since the previous mark.
enum WsPhase : int {
  kPhKWait = 0,  // top of the page -> page j landed (the segment's Q acquire, then the k_full wait)
  kPhSIssue,     // S_j issued (18 wgmma: the warpgroup is held in issue while the tensor pipe takes them)
  kPhPWait,      // P_{j-1} from the other warpgroup
  kPhSTail,      // S_j waited for
  kPhRescale,    // O rescaled to m_{j-1}
  kPhVtWait1,    // V^T_{j-1} ready
  kPhPvIssue1,   // P_{j-1} V_{j-1} issued
  kPhRelease,    // K stage and Q releases
  kPhSoftmax,    // mask, row max, exp2, P_j stored, proxy fence
  kPhVote,       // warpgroup vote (did a max move) and P_j signalled
  kPhVtWait2,    // V^T_j ready (when a max moved: P_{j-1} V_{j-1} waited for and O rescaled first)
  kPhPvIssue2,   // P_j V_j issued
  kPhPvWait1,    // P_{j-1} V_{j-1} done
  kPhDrain,      // P_j V_j done
  kPhBetween,    // the end of own page j -> the top of the next own page: the epilogue when page j ended its segment,
                 // the other warpgroup's page, the loop
  kPhSwitch,     // sequence switch: the previous segment's last page and epilogue
  kPhCount
};
static_assert(kPhCount == decode::kConsumerPhaseSlots, "one line of consumer sums");
// The scorer-split kernel's (kernel_ws3.cuh) phases: the scorer's sums print as consumer "wg 0" (slots 0-8),
// accumulator 0's as "wg 1" (slots 9-15), the transposers' as the producer line (WsTrPhase).
enum Ws3Phase : int {
  kPh3Top = 0,      // loop top, the segment's Q tile wait
  kPh3KWait,        // page j landed
  kPh3SIssue,       // S_j issued
  kPh3Signal,       // P_{j-1} signalled (deferred p_full)
  kPh3SWait,        // S_j done
  kPh3Release,      // K stage released, visible lengths
  kPh3PEmpty,       // P slot free
  kPh3Softmax,      // mask, row max, exp2, P and row sums stored
  kPh3Fence,        // proxy fence, loop bookkeeping
  kPh3AccPFull,     // accumulator: P_j signalled
  kPh3AccRescale,   // O rescaled
  kPh3AccVtWait,    // V^T_j ready
  kPh3AccPvIssue,   // P_j V_j issued
  kPh3AccPvWait,    // P_j V_j done
  kPh3AccRelease,   // V^T stage and P slot released
  kPh3AccLoop,      // epilogue, loop
};
static_assert(kPh3AccLoop == decode::kConsumerPhaseSlots - 1, "one line of consumer sums");
// V^T transposer phases of page j (thread 0 of the transposer warps, stored as the producer-side line).
enum WsTrPhase : int { kTrVtWait = 0, kTrKWait, kTrTranspose, kTrLoop };

}  // namespace mla::sm90::decode_fp8

#pragma once
// Where a page's time goes in the 64-row fp8 kernel (kernel_ws.cuh): per-phase SM-clock sums of each consumer
// warpgroup's own pages and of the V^T transposers' pages in CTAs 0, 33 and 65 of head tile 0, printed by a kernel
// launched behind every decode call. Compiled in only with -DMLA_FP8_WS_PHASES: a diagnostics build, whose bench times
// include that printer (~360 us per call) and are not the kernel's; the kernel itself keeps its wgmma pipelining (no
// spills, no serialization: checked with ptxas -v and the SASS). In a normal build every member is empty and the
// kernel's SASS is the same as without the marks. Average the printed lines with scripts/ws_phases_summary.py.
// Measurements and what they showed: bench/decode/NOTES_plan.md "Session 19".
#include <cstdint>
#ifdef MLA_FP8_WS_PHASES
#include <cstdio>
#endif

namespace mla::sm90::decode_fp8 {

// Consumer phases of an own page j, in kernel order; each mark adds the cycles since the previous mark.
enum WsPhase : int {
  kPhKWait = 0,     // top of the page -> page j landed (Q acquire, k_full wait)
  kPhSIssue,        // S_j issued (18 wgmma: the warp is held in issue while the tensor pipe works through them)
  kPhPWait,         // P_{j-1} from the other warpgroup
  kPhSTail,         // S_j waited for
  kPhRescale,       // O rescaled to m_{j-1}
  kPhVtWait1,       // V^T_{j-1} ready
  kPhPvIssue1,      // P_{j-1} V_{j-1} issued
  kPhRelease,       // K stage and Q releases
  kPhSoftmax,       // mask, row max, exp2, P_j stored, proxy fence
  kPhVote,          // warpgroup vote (did a max move) and P_j signalled
  kPhVtWait2,       // V^T_j ready (when a max moved: P_{j-1} V_{j-1} waited for and O rescaled first)
  kPhPvIssue2,      // P_j V_j issued
  kPhPvWait1,       // P_{j-1} V_{j-1} done
  kPhDrain,         // P_j V_j done
  kPhBetween,       // the end of own page j -> the top of the next own page (the other warpgroup's page, the loop)
  kPhSwitch,        // sequence switch: the previous segment's last page and epilogue
  kPhCount
};
static_assert(kPhCount == 16, "ws_phases_print_kernel prints 16 sums");
// Transposer phases of page j.
enum WsTrPhase : int { kTrVtWait = 0, kTrKWait, kTrTranspose, kTrLoop, kTrCount };

#ifdef MLA_FP8_WS_PHASES
// The sums of CTAs 0, 33 and 65 of head tile 0 (slot 0..2): [slot][role: consumer 0, consumer 1, transposer][phase],
// then the pages counted. Written with plain stores at the end of the decode kernel and printed by
// ws_phases_print_kernel, launched behind it (launch_impl_ws.cuh): a printf in the decode kernel itself, even in a
// function it calls, makes ptxas serialize every wgmma of the kernel (a WARPGROUP.DEPBAR after each one; C7510).
// One copy per translation unit (static): each instantiation file launches its own printer.
static __device__ uint32_t g_ws_phases[3][3][kPhCount + 1];
__device__ __forceinline__ int ws_phases_slot() {
  if (blockIdx.y != 0) return -1;
  return blockIdx.x == 0 ? 0 : blockIdx.x == 33 ? 1 : blockIdx.x == 65 ? 2 : -1;
}
template <int kN>
struct WsClockSums {
  uint32_t acc[kN] = {};
  uint32_t last;
  int pages = 0;
  __device__ WsClockSums() : last(now()) {}
  __device__ static uint32_t now() {
    uint32_t t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t));
    return t;
  }
  __device__ void mark(int i) {
    const uint32_t t = now();
    acc[i] += t - last;
    last = t;
  }
  __device__ void page() { ++pages; }
  __device__ void store(int role) const {
    const int slot = ws_phases_slot();
    if (slot < 0) return;
    for (int i = 0; i < kN; ++i) g_ws_phases[slot][role][i] = acc[i];
    g_ws_phases[slot][role][kPhCount] = static_cast<uint32_t>(pages);
  }
};
struct WsPhases : WsClockSums<kPhCount> {
  __device__ void print(int wg, int tid) const {
    if (tid == 0) store(wg);
  }
};
struct WsTrPhases : WsClockSums<kTrCount> {
  __device__ void print(int tw) const {
    if (tw == 0) store(2);
  }
};
// One thread: the lines of the last decode call, as "WSPH consumer cta C wg W pages N | sums per page ..." and
// "WSPH transposer cta C pages N | ...".
__global__ void ws_phases_print_kernel() {
  const int ctas[3] = {0, 33, 65};
  for (int slot = 0; slot < 3; ++slot) {
    for (int role = 0; role < 3; ++role) {
      const uint32_t* a = g_ws_phases[slot][role];
      const float n = a[kPhCount] > 0 ? a[kPhCount] : 1;
      if (role < 2) {
        printf("WSPH consumer cta %d wg %d pages %u | %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f "
               "%.0f %.0f %.0f\n",
               ctas[slot], role, a[kPhCount], a[0] / n, a[1] / n, a[2] / n, a[3] / n, a[4] / n, a[5] / n, a[6] / n,
               a[7] / n, a[8] / n, a[9] / n, a[10] / n, a[11] / n, a[12] / n, a[13] / n, a[14] / n, a[15] / n);
      } else {
        printf("WSPH transposer cta %d pages %u | %.0f %.0f %.0f %.0f\n", ctas[slot], a[kPhCount], a[0] / n,
               a[1] / n, a[2] / n, a[3] / n);
      }
    }
  }
}
#else
struct WsPhases {
  __device__ void mark(int) {}
  __device__ void page() {}
  __device__ void print(int, int) const {}
};
struct WsTrPhases {
  __device__ void mark(int) {}
  __device__ void page() {}
  __device__ void print(int) const {}
};
#endif

}  // namespace mla::sm90::decode_fp8

#pragma once
// Effective SM clock of a decode kernel under the bench's load (diagnostics; compiled in only with
// -DMLA_DECODE_CLOCK; the 64-row kernels of both families, the fp8 scorer-split kernel, the fp8 16-row and the 16-bit
// 16-row kernels). The phase
// sums (phase_sums.cuh) count SM cycles; whether a kernel's time is its cycles at 1980 MHz or fewer MHz under the
// card's power cap is what this answers (session 20: the h_q 128 rows run at 1625-1760 MHz in the bench's bursts).
// Thread 0 of every CTA stamps %clock64 and %globaltimer when the CTA starts (into g_clock_start, so no register is
// held across the kernel) and again when its consumer work ends; the CTA adds its cycles and ns to g_clock and moves
// the call's earliest start and latest end. clock_probe_fold_kernel, launched behind each decode call of such a
// build, folds the call's span into the sums and prints one line every kClockProbeCalls calls: MHz = cycles / ns over
// all CTAs; span = first CTA start to last CTA end, per call; CTA = the mean CTA's duration. CTAs of a few us read
// high (the globaltimer moves in steps). The fold kernel sits between the decode and the combine kernel, so such a
// build's bench times are a little longer. A normal build has empty functions and no launch (SASS unchanged).
// Build: cmake -S . -B build-clock -G Ninja -DCMAKE_CUDA_FLAGS="-DMLA_DECODE_CLOCK"; ninja -C build-clock bench_decode
#include <cuda_runtime_api.h>

#include <cstdint>
#ifdef MLA_DECODE_CLOCK
#include <cstdio>
#endif

namespace mla::sm90::decode {

// The kernel a probe line names (CLOCK <name> ...), one per launcher.
enum ClockProbeKernel : int {
  kClockFp8Ws = 0, kClockWs64, kClockFp8H16, kClock16BitN16, kClockFp8Ws3, kClock16BitN16Ws, kClockFp8N32
};

#ifdef MLA_DECODE_CLOCK
constexpr int kClockProbeCalls = 16;   // calls per printed line
constexpr int kClockProbeSlots = 4096;  // CTAs with a start slot (the rest are not counted)
struct ClockProbeSums {
  unsigned long long cycles, ns, ctas;    // over the CTAs of the calls since the last line
  unsigned long long span_ns, calls;      // over those calls
  unsigned long long call_start, call_end;  // this call's earliest CTA start, latest CTA end (ns)
};
// One copy per translation unit, like the fold kernel that reads it (each instantiation file launches its own).
static __device__ ClockProbeSums g_clock = {0, 0, 0, 0, 0, ~0ull, 0};
static __device__ unsigned long long g_clock_start[kClockProbeSlots][2];

__device__ __forceinline__ unsigned long long clock_probe_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ int clock_probe_slot() {
  const int i = blockIdx.y * gridDim.x + blockIdx.x;
  return i < kClockProbeSlots ? i : -1;
}
// Thread 0 of the CTA, at the kernel's start.
__device__ __forceinline__ void clock_probe_start() {
  const int i = clock_probe_slot();
  if (i < 0) return;
  g_clock_start[i][0] = clock64();
  g_clock_start[i][1] = clock_probe_ns();
}
// The same thread, once the CTA's consumer work is done (not inlined: keeps the kernel's registers as they are).
inline __device__ __noinline__ void clock_probe_stop() {
  const unsigned long long c = clock64(), t = clock_probe_ns();
  const int i = clock_probe_slot();
  if (i < 0) return;
  atomicAdd(&g_clock.cycles, c - g_clock_start[i][0]);
  atomicAdd(&g_clock.ns, t - g_clock_start[i][1]);
  atomicAdd(&g_clock.ctas, 1ull);
  atomicMin(&g_clock.call_start, g_clock_start[i][1]);
  atomicMax(&g_clock.call_end, t);
}
static __global__ void clock_probe_fold_kernel(ClockProbeKernel kernel) {
  ClockProbeSums& g = g_clock;
  if (g.call_end > g.call_start) {
    g.span_ns += g.call_end - g.call_start;
    ++g.calls;
  }
  g.call_start = ~0ull;
  g.call_end = 0;
  if (g.calls < kClockProbeCalls) return;
  const double ns = static_cast<double>(g.ns);
  const char* const names[] = {"fp8_ws", "ws64", "fp8_h16", "16bit_n16", "fp8_ws3", "16bit_n16ws", "fp8_n32"};
  const char* name = names[kernel];
  printf("CLOCK %s calls %llu ctas %llu | MHz %.0f | span us %.2f | CTA us %.2f\n", name, g.calls,
         g.ctas / g.calls, ns > 0 ? 1e3 * static_cast<double>(g.cycles) / ns : 0.0,
         1e-3 * static_cast<double>(g.span_ns) / static_cast<double>(g.calls),
         g.ctas > 0 ? 1e-3 * ns / static_cast<double>(g.ctas) : 0.0);
  g.cycles = g.ns = g.ctas = g.span_ns = g.calls = 0;
}
#endif

// Behind a decode launch on `stream`: the fold (and, every kClockProbeCalls calls, the printed line) in a clock build;
// nothing otherwise. Static, like the kernel and the sums: one per translation unit.
static inline void clock_probe_fold(cudaStream_t stream, ClockProbeKernel kernel) {
#ifdef MLA_DECODE_CLOCK
  clock_probe_fold_kernel<<<1, 1, 0, stream>>>(kernel);
#else
  (void)stream;
  (void)kernel;
#endif
}
#ifndef MLA_DECODE_CLOCK
__device__ __forceinline__ void clock_probe_start() {}
__device__ __forceinline__ void clock_probe_stop() {}
#endif

}  // namespace mla::sm90::decode

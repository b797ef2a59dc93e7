#pragma once
// Per-phase SM-clock sums of the 64-row warp-specialized decode kernels (diagnostics; decode/phases_ws64.cuh names
// the 16-bit kernel's phases, decode_fp8/phases_ws.cuh the fp8 kernel's). Compiled in only with -DMLA_DECODE_PHASES:
// every consumer thread (and one producer-side thread) adds the cycles since its previous mark to the phase it
// names and counts its pages; at the CTA's end lane 0 of warp 0 of each consumer warpgroup (of every consumer warp with
// -DMLA_DECODE_PHASES_PER_WARP too) and the producer-side thread store the sums of CTAs 0, 33 and 65 of head tile 0 with
// plain stores; phase_sums_print_kernel, launched behind the decode kernel (launch_impl*.cuh), prints them. Not a printf in
// the decode kernel: a printf anywhere in it, even in a function it calls, makes ptxas serialize every wgmma of the
// kernel (a WARPGROUP.DEPBAR after each; C7510). Such a build keeps the kernel's pipelining (checked in its SASS) but
// its bench times include the printer (~360 us per call from device printf). In a normal build every member is empty
// and the kernel's SASS is the same as without the marks. scripts/ws_phases_summary.py averages the printed lines.
// A phases build of the whole tree, in its own build directory:
//   cmake -S . -B build-phases -G Ninja -DCMAKE_CUDA_FLAGS="-DMLA_DECODE_PHASES"
//     (per-warp sums: -DCMAKE_CUDA_FLAGS="-DMLA_DECODE_PHASES -DMLA_DECODE_PHASES_PER_WARP")
//   ninja -C build-phases bench_decode
//   build-phases/bin/bench_decode --format fp8 --rows 10-18 --reps 30 | python3 scripts/ws_phases_summary.py
#include <cuda_runtime_api.h>

#include <cstdint>
#ifdef MLA_DECODE_PHASES
#include <cstdio>
#endif

namespace mla::sm90::decode {

constexpr int kConsumerPhaseSlots = 16;  // phases per consumer line
constexpr int kProducerPhaseSlots = 4;   // phases per producer-side line

#ifdef MLA_DECODE_PHASES
// [CTA slot 0..2][role][sums..., pages]. Roles: 0 / 1 warp 0 of consumer warpgroup 0 / 1, 2 the producer side (its
// first timing warp), and with MLA_DECODE_PHASES_PER_WARP 3 + 3 wg + warp - 1 for consumer warps 1..3 and 9 + w - 1
// for the producer side's timing warps w = 1..3 (the fp8 kernels' transpose warps after the first; session 55).
// (Numbering the producer first made ptxas spill more in the fp8 kernel's phases build; that build spills 44 bytes as
// it is, 60 in the 4-transpose-warp form: its times are a diagnostic build's.) One copy per translation unit: each
// instantiation file launches its own printer.
#ifdef MLA_DECODE_PHASES_PER_WARP
constexpr int kPhaseRoles = 12;
#else
constexpr int kPhaseRoles = 3;
#endif
static __device__ uint32_t g_phase_sums[3][kPhaseRoles][kConsumerPhaseSlots + 1];

// The sampled CTA of each slot (its blockIdx.x; head tile 0).
__device__ __forceinline__ constexpr int phase_sums_cta(int slot) { return slot == 0 ? 0 : slot == 1 ? 33 : 65; }
__device__ __forceinline__ int phase_sums_slot() {
  if (blockIdx.y != 0) return -1;
  for (int slot = 0; slot < 3; ++slot)
    if (static_cast<int>(blockIdx.x) == phase_sums_cta(slot)) return slot;
  return -1;
}

template <int kN>
struct PhaseSums {
  uint32_t acc[kN] = {};
  uint32_t last;
  int pages = 0;
  __device__ PhaseSums() : last(now()) {}
  __device__ static uint32_t now() {
    uint32_t t;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t));
    return t;
  }
  // Adds the cycles since the previous mark to phase i (a compile-time constant at every call site once inlined).
  __device__ void mark(int i) {
    const uint32_t t = now();
    acc[i] += t - last;
    last = t;
  }
  __device__ void page() { ++pages; }
  // A consumer warp's sums (warp 0 of each warpgroup; every warp with MLA_DECODE_PHASES_PER_WARP), stored by its lane 0.
  __device__ void store_consumer(int wg, int warp, int lane) const {
    if (lane != 0) return;
    if (warp == 0) {
      store(wg);
    } else if (kPhaseRoles > 3) {
      store(3 + 3 * wg + warp - 1);
    }
  }
  // The producer side's sums; call from its one timing thread.
  __device__ void store_producer() const { store(2); }
  // ... or from lane 0 of each of its timing warps w (0..3): w = 0 as store_producer, the others with
  // MLA_DECODE_PHASES_PER_WARP only.
  __device__ void store_producer_warp(int w) const {
    if (w == 0) {
      store(2);
    } else if (kPhaseRoles > 9) {
      store(9 + w - 1);
    }
  }

 private:
  __device__ void store(int role) const {
    const int slot = phase_sums_slot();
    if (slot < 0) return;
    for (int i = 0; i < kN; ++i) g_phase_sums[slot][role][i] = acc[i];
    g_phase_sums[slot][role][kConsumerPhaseSlots] = static_cast<uint32_t>(pages);
  }
};
using ConsumerPhaseSums = PhaseSums<kConsumerPhaseSlots>;
using ProducerPhaseSums = PhaseSums<kProducerPhaseSlots>;

// One thread: "WSPH consumer cta C wg W warp K pages N | 16 sums per page" and "WSPH producer cta C pages N | 4 sums",
// then zeroes the slot: a sampled CTA with no work (an empty part) stores nothing, and must not print the previous
// call's sums again (it printed pages 0 instead, which the summary skips). Static, like the sums it prints: one per
// translation unit.
static __global__ void phase_sums_print_kernel() {
  for (int slot = 0; slot < 3; ++slot) {
    for (int role = 0; role < kPhaseRoles; ++role) {
      uint32_t* a = g_phase_sums[slot][role];
      const float n = a[kConsumerPhaseSlots] > 0 ? a[kConsumerPhaseSlots] : 1;
      if (role >= 9) {
        printf("WSPH producer cta %d warp %d pages %u | %.0f %.0f %.0f %.0f\n", phase_sums_cta(slot), role - 8,
               a[kConsumerPhaseSlots], a[0] / n, a[1] / n, a[2] / n, a[3] / n);
      } else if (role != 2) {
        const int wg = role < 2 ? role : (role - 3) / 3, warp = role < 2 ? 0 : (role - 3) % 3 + 1;
        printf("WSPH consumer cta %d wg %d warp %d pages %u | %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f "
               "%.0f %.0f %.0f %.0f\n",
               phase_sums_cta(slot), wg, warp, a[kConsumerPhaseSlots], a[0] / n, a[1] / n, a[2] / n,
               a[3] / n, a[4] / n, a[5] / n, a[6] / n, a[7] / n, a[8] / n, a[9] / n, a[10] / n, a[11] / n, a[12] / n,
               a[13] / n, a[14] / n, a[15] / n);
      } else {
        printf("WSPH producer cta %d pages %u | %.0f %.0f %.0f %.0f\n", phase_sums_cta(slot), a[kConsumerPhaseSlots],
               a[0] / n, a[1] / n, a[2] / n, a[3] / n);
      }
      for (int i = 0; i <= kConsumerPhaseSlots; ++i) a[i] = 0;
    }
  }
}
static_assert(kConsumerPhaseSlots == 16 && kProducerPhaseSlots == 4, "phase_sums_print_kernel prints 16 + 4 sums");
#else
template <int kN>
struct PhaseSums {
  __device__ void mark(int) {}
  __device__ void page() {}
  __device__ void store_consumer(int, int, int) const {}
  __device__ void store_producer() const {}
  __device__ void store_producer_warp(int) const {}
};
using ConsumerPhaseSums = PhaseSums<kConsumerPhaseSlots>;
using ProducerPhaseSums = PhaseSums<kProducerPhaseSlots>;
#endif

// Behind a 64-row warp-specialized decode launch on `stream`: the printer in a phases build, nothing otherwise. Static,
// like the kernel and the sums it prints: one per translation unit.
static inline void phase_sums_print(cudaStream_t stream) {
#ifdef MLA_DECODE_PHASES
  phase_sums_print_kernel<<<1, 1, 0, stream>>>();
#else
  (void)stream;
#endif
}

}  // namespace mla::sm90::decode

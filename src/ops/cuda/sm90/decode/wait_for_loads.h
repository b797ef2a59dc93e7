#pragma once
// A consumer's wait for its own shared-memory loads before it releases the stage they read.
#include <cstdint>

namespace mla::sm90::decode {

// Returns once every 32-bit word of `regs` (registers filled by shared-memory loads: ldmatrix, ld.shared) holds its
// loaded value, so the stage those loads read may be released. Why: ptxas issues an mbarrier arrive (SYNCS.ARRIVE)
// without waiting on the scoreboards of the loads before it (SASS: bench/decode/NOTES.md session 30 item 7), so a
// consumer that releases a stage right after its ldmatrix may still have reads of it queued when the producer's
// refill (a TMA write, async proxy) lands -- with 4-8 narrow CTAs reading each page the refill hits L2 and is fast.
// A branch on a value folded from every word must wait for all of them (in-order issue); its body runs only when the
// fold equals an arbitrary constant, and then does nothing. Where the registers feed a wgmma, releasing right after
// the wgmma is issued needs no wait (it issues only with its A registers loaded) and keeps the load latency hidden
// behind what comes before it: in the fp8 16-row kernel this wait before the P_full barrier cost 4-27 % (session 31).
template <class Regs>
__device__ __forceinline__ void wait_for_loads(const Regs& regs) {
  static_assert(sizeof(Regs) % 4 == 0, "wait_for_loads: registers are 32-bit words");
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&regs);
  uint32_t x = 0;
#pragma unroll
  for (int i = 0; i < int(sizeof(Regs) / 4); ++i) x ^= w[i];
  if (x == 0x9e3779b9u) asm volatile("nanosleep.u32 0;\n" ::: "memory");
}

}  // namespace mla::sm90::decode

#pragma once
// The FP8 tensor-core pieces: mma.sync m16n8k32 with e4m3 operands (fp32 accumulate), P -> e4m3 packing,
// and the byte permutes that turn ldmatrix.trans (16-bit transpose) output into K-major e4m3 V fragments.
//
// Fragment layouts (PTX ISA, mma.m16n8k32, 8-bit A/B; g = lane / 4, t = lane % 4):
//   A (16 x 32, row): a0 = row g,   k 4t..4t+3;  a1 = row g+8, k 4t..4t+3;
//                     a2 = row g,   k 16+4t..;   a3 = row g+8, k 16+4t..     (byte j = k offset j)
//   B (32 x 8, col):  b0 = col g,   k 4t..4t+3;  b1 = col g,   k 16+4t..
//   C (16 x 8):       c0, c1 = row g, cols 2t, 2t+1;  c2, c3 = row g+8, cols 2t, 2t+1.
#include <cuda_fp8.h>

#include <cstdint>

namespace mla::sm90::decode_fp8 {

__device__ __forceinline__ void mma_e4m3(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two probabilities -> two e4m3 codes (lo in the low byte): round to nearest even, satfinite. The same
// rounding as float_to_e4m3 on the host (P is in [0, 1], so saturation never triggers).
__device__ __forceinline__ uint16_t pack_e4m3x2(float lo, float hi) {
  return static_cast<uint16_t>(__nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3));
}

// ldmatrix.trans of an 8-key x 16-byte block returns, in lane (g, t), the bytes
//   [V[2t][2g], V[2t][2g+1], V[2t+1][2g], V[2t+1][2g+1]]     (keys 2t, 2t+1; dims 2g, 2g+1)
// For keys 0..7 in x and 8..15 in y, these select the B fragment of dim 2g (even) or 2g+1 (odd):
//   [x.b0, x.b2, y.b0, y.b2] = keys {2t, 2t+1, 8+2t, 9+2t} of dim 2g.
// The k order {2t, 2t+1, 8+2t, 9+2t} is the order P's A fragment is packed in (see mainloop.cuh), so the
// product sums matching keys; no shared-memory transpose of V is needed.
// Bulk prefetch of `bytes` contiguous global bytes into L2 (a hint: no shared memory, nothing to wait for).
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ uint32_t select_even(uint32_t x, uint32_t y) { return __byte_perm(x, y, 0x6420); }
__device__ __forceinline__ uint32_t select_odd(uint32_t x, uint32_t y) { return __byte_perm(x, y, 0x7531); }

}  // namespace mla::sm90::decode_fp8

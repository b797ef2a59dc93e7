#pragma once
// The N = 16 16-bit wgmma atoms of the 16-row kernels (decode/kernel_n16ws.cuh, decode_fp8ds/kernel_ws16.cuh): the 16
// query rows are N, keys or V dims M. Accumulators per warp w of the warpgroup in the mma.sync C layout: d[4j + 2h + e]
// = (M row 16w + g + 8h, N col 8j + 2t + e), lane = 4g + t. An A operand in registers has the mma.m16n8k16 A layout
// per warp: a0 = (row 16w + g, k 2t..2t+1), a1 = (row + 8, same k), a2 = (row, k 2t + 8..), a3 = (row + 8, k 2t + 8..).
// B (16 x 16) is K-major, 128B swizzle, from a shared-memory descriptor.
#include <cstdint>

namespace mla::sm90::decode {

// D (64 x 16) += A (64 x 16, smem desc, K-major) . B^T.
__device__ __forceinline__ void wgmma_m64n16k16_bf16_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_m64n16k16_f16_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D (64 x 16) += A (64 x 16, registers) . B^T. The registers of `a` must stay unchanged until the wgmma group that
// reads them has been waited for.
__device__ __forceinline__ void wgmma_m64n16k16_f16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
      "%12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_m64n16k16_bf16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
      "%12, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// The same, with the 16-bit type chosen at compile time (kF16: fp16, else bf16).
template <bool kF16>
__device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (kF16) wgmma_m64n16k16_f16_ss(d, desc_a, desc_b);
  else wgmma_m64n16k16_bf16_ss(d, desc_a, desc_b);
}
template <bool kF16>
__device__ __forceinline__ void wgmma_m64n16k16_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (kF16) wgmma_m64n16k16_f16_rs(d, a, desc_b);
  else wgmma_m64n16k16_bf16_rs(d, a, desc_b);
}

}  // namespace mla::sm90::decode

#pragma once
// The N = 16 and N = 32 e4m3 wgmma atoms of the 16- and 32-row kernel (config_h16.h): the query rows are N, keys or
// V dims M. Accumulators per warp w of the warpgroup in the mma.sync C layout: d[4j + e] = (M row 16w + g, N col 8j +
// 2t + e), d[4j + 2 + e] = (M row 16w + g + 8, same col), j < N / 8. An A operand in registers has the mma.m16n8k32 A layout per warp:
// a0 = (row g, k 4t..4t+3), a1 = (row g + 8, k 4t..), a2 = (row g, k 16 + 4t..), a3 = (row g + 8, k 16 + 4t..).
#include <cstdint>

namespace mla::sm90::decode_fp8::h16 {

// D (64 x 16) += A (64 x 32, smem desc) . B (16 x 32, smem desc)^T; both K-major (8-bit wgmma has no transpose).
__device__ __forceinline__ void wgmma_m64n16k32_ss(float (&d)[8], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// D (64 x 16) += A (64 x 32, registers) . B (16 x 32, smem desc)^T. The registers of `a` must stay unchanged until
// the wgmma group that reads them has been waited for.
__device__ __forceinline__ void wgmma_m64n16k32_rs(float (&d)[8], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, "
      "%12, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// The same at N = 32 (d: 16 accumulators, j = 0..3).
__device__ __forceinline__ void wgmma_m64n32k32_ss(float (&d)[16], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}
__device__ __forceinline__ void wgmma_m64n32k32_rs(float (&d)[16], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// N = 16 RG (RG 16-row groups): the kernel's templated call sites.
template <int RG>
__device__ __forceinline__ void wgmma_nrows_ss(float (&d)[8 * RG], uint64_t desc_a, uint64_t desc_b) {
  if constexpr (RG == 1) wgmma_m64n16k32_ss(d, desc_a, desc_b);
  else wgmma_m64n32k32_ss(d, desc_a, desc_b);
}
template <int RG>
__device__ __forceinline__ void wgmma_nrows_rs(float (&d)[8 * RG], const uint32_t (&a)[4], uint64_t desc_b) {
  if constexpr (RG == 1) wgmma_m64n16k32_rs(d, a, desc_b);
  else wgmma_m64n32k32_rs(d, a, desc_b);
}

}  // namespace mla::sm90::decode_fp8::h16

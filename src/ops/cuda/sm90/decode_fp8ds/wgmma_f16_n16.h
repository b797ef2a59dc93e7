#pragma once
// The N = 16 wgmma atoms of the warp-specialized fp8_ds kernel (config_ws16.h), A from registers, B (16 x 16,
// K-major, 128B swizzle) from a shared-memory descriptor. Per warp w of the warpgroup the A registers have the
// mma.m16n8k16 A layout: a0 = (row 16w + g, k 2t..2t+1), a1 = (row + 8, same k), a2 = (row, k 2t+8..2t+9),
// a3 = (row + 8, k 2t+8..); the accumulator d[4j + 2h + e] = (M row 16w + g + 8h, N col 8j + 2t + e).
// The registers of `a` must stay unchanged until the wgmma group that reads them has been waited for.
#include <cstdint>

namespace mla::sm90::decode_fp8ds::ws16 {

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
// Pins register values (A fragments) before this point, so the compiler does not sink their computation past the
// wgmma_fence (ptxas would then serialize the wgmmas).
template <int N>
__device__ __forceinline__ void pin(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

}  // namespace mla::sm90::decode_fp8ds::ws16

#pragma once
// 8-bit wgmma atoms of the warp-specialized 64-row kernel (kernel_ws.cuh), and S over a Q tile's five slabs and a
// page's four slabs and rope box (mainloop_ws.cuh issue_page_tma). Both operands come from
// shared memory through descriptors (../decode/wgmma.h make_smem_desc) and must be K-major: 8-bit wgmma
// has no transpose bits, so V reaches P.V as a transposed copy (transpose_ws.cuh). fp32 accumulators in
// the mma.sync C layout per warp (warp w of the warpgroup: rows 16w + g, 16w + g + 8; n8 tile j: d[4j..4j+3]).
#include <cstdint>

#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/config.h"

namespace mla::sm90::decode_fp8 {

using decode::wgmma_wait_group;

// S of one page: D (64 rows x 64 keys) += Q (64 x 32 bytes) . K (64 keys x 32 bytes)^T.
__device__ __forceinline__ void wgmma_m64n64k32_e4m3(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// S with Q from registers: D (64 x 64) += A (64 x 32, registers in the mma.m16n8k32 A layout per warp: a0 = (row g,
// k 4t..4t+3), a1 = (row g + 8, ...), a2 = (row g, k 16 + 4t..), a3 = (row g + 8, k 16 + 4t..)) . K (64 x 32)^T.
// Only K is read from shared memory (2 KB per step instead of 4). `a` must stay unchanged until the group is waited for.
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(1));
}

// P.V for one warpgroup's 256 output columns: D (64 x 256) += P (64 x 32 keys) . V^T (256 dims x 32 keys)^T.
__device__ __forceinline__ void wgmma_m64n256k32_e4m3(float (&d)[128], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// Half of P.V for one warpgroup: D (64 x 128) += P (64 x 32 keys) . V^T (128 dims x 32 keys)^T. The scorer-split
// kernel (kernel_ws3.cuh) issues two per k32 step instead of one m64n256k32: its launch of 512 threads caps the
// kernel at 128 registers, under the ~154 ptxas asks of a 128-register accumulator operand (C7602), whatever
// setmaxnreg gives the accumulator warpgroups.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(1));
}

// Descriptor offset (16-byte units) of k32 step s (0..17) in the slab layout: 4 steps per 128-dim slab, the last two in
// the fifth slab's first 64 bytes.
__host__ __device__ constexpr int slab_step_desc(int s) {
  return (s < 16 ? (s / 4) * (kSlabBytes >> 4) + 2 * (s % 4) : 4 * (kSlabBytes >> 4) + 2 * (s - 16));
}

// K's rope dims in a page's K stage (mainloop_ws.cuh issue_page_tma): a 64-row box of 64-byte rows at the start of slab
// kRopeSlab, in the 64-byte-swizzle K-major layout (descriptor layout type 2; 8-row groups 512 bytes apart). Steps 16
// and 17 read it at +0 / +32 bytes (rope_desc(s_k) + 2 * (s - 16)). The Q tile keeps the 128-byte slab 4 (its TMA,
// once a segment, is issue_tile_tma's five boxes).
__device__ __forceinline__ uint64_t rope_desc(uint32_t s_k) {
  constexpr uint64_t kLayoutMask = 3ull << 62, kSwizzle64B = 2ull << 62;  // make_smem_desc writes type 1 (128B)
  return (decode::make_smem_desc(s_k + kRopeSlab * kSlabBytes, 16, 8 * 64) & ~kLayoutMask) | kSwizzle64B;
}
// The B (K) descriptor of k32 step s: slab_step_desc's steps in slabs 0-3, the rope box for steps 16 and 17.
__device__ __forceinline__ uint64_t k_step_desc(uint64_t db, uint64_t dr, int s) {
  return s < 16 ? db + slab_step_desc(s) : dr + 2 * (s - 16);
}

// The last R k32 steps' Q fragments of this thread (warp w of the warpgroup: rows 16w .. 16w + 15 of the Q tile), for
// scores_qreg: one ldmatrix.x4 per step (8 x 8 b16 matrices: rows +0..7 / +8..15 x bytes 32s .. +15 / +16 .. +31).
template <int R>
__device__ __forceinline__ void load_q_frags(uint32_t (&qf)[R > 0 ? R : 1][4], uint32_t s_q_tile, int warp, int lane) {
  const int row = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int s = kDimQK / 32 - R + i;
    decode::ldmatrix_x4(qf[i], s_q_tile + slab_offset(row, 2 * s + (lane >> 4)));
  }
}

// scores_over_slabs<32, false> with the last R steps' A (Q) from registers (qf, load_q_frags): issued and committed
// as one group, not waited for.
template <int R>
__device__ __forceinline__ void scores_qreg(float (&d)[32], const uint32_t (&qf)[R > 0 ? R : 1][4], uint32_t s_q_tile,
                                            uint32_t s_k) {
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  decode::fence_operands(d);
  decode::wgmma_fence();
  const uint64_t da = decode::make_smem_desc(s_q_tile, 16, 1024);
  const uint64_t db = decode::make_smem_desc(s_k, 16, 1024), dr = rope_desc(s_k);
  constexpr int kSteps = kDimQK / 32;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s < kSteps - R) {
      wgmma_m64n64k32_e4m3(d, da + slab_step_desc(s), k_step_desc(db, dr, s));
    } else {
      wgmma_m64n64k32_e4m3_rs(d, qf[s - (kSteps - R)], k_step_desc(db, dr, s));
    }
  }
  decode::wgmma_commit();
}

// S (64 rows x N / 2 keys, fp32 fragments) = Q . K^T over a Q tile and a page in the slab layout (config.h):
// 4 full slabs of 4 k32 steps (+32 bytes per step inside a 128-byte swizzled row), then 2 steps over dims 512..575:
// Q's in the first 64 bytes of its fifth slab's rows, K's in the page's rope box (rope_desc). m64n64k32: the whole
// page. kWait = false: issued and committed as one group, not waited for (kernel_ws.cuh waits later).
template <int N, bool kWait = true>
__device__ __forceinline__ void scores_over_slabs(float (&d)[N], uint32_t s_q_tile, uint32_t s_k) {
  static_assert(N == 32, "m64n64k32");
  auto atom = [&](uint64_t da, uint64_t db) { wgmma_m64n64k32_e4m3(d, da, db); };
#pragma unroll
  for (int i = 0; i < N; ++i) d[i] = 0.f;
  decode::fence_operands(d);
  decode::wgmma_fence();
  uint64_t da = decode::make_smem_desc(s_q_tile, 16, 1024);
  uint64_t db = decode::make_smem_desc(s_k, 16, 1024);
  const uint64_t dr = rope_desc(s_k);
#pragma unroll
  for (int slab = 0; slab < kDimQK / 128; ++slab) {
#pragma unroll
    for (int k = 0; k < 4; ++k) atom(da + 2 * k, db + 2 * k);
    da += kSlabBytes >> 4;
    db += kSlabBytes >> 4;
  }
  static_assert(kDimQK % 128 == 64, "the fifth slab holds 64 bytes: two k32 steps");
  atom(da, dr);
  atom(da + 2, dr + 2);
  decode::wgmma_commit();
  if constexpr (kWait) {
    decode::wgmma_wait_all();
    decode::fence_operands(d);
  }
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Element traits: what changes between KV formats. A format supplies the MMA atoms for its 16-bit
// operand type (mma.sync m16n8k16 and the wgmma atoms, fp32 accumulate) and the float -> operand packing used for P
// and for the output. Adding a format (e.g. an fp8 path that dequantizes into bf16 tiles) means a new
// traits struct plus its loader; the mainloop, softmax and epilogue stay as they are.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "mla/core/kv_format.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/wgmma.h"

namespace mla::sm90::decode {

struct Bf16Traits {
  static constexpr KvFormat kFormat = KvFormat::kBf16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  // D += A (16x16 row) * B (16x8 col), fp32 accumulate.
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma_bf16(d, a, b0, b1);
  }
  // wgmma atoms of the 64-row variant: S slice (64 x 32 keys) and O slice (64 x 256, V MN-major).
  __device__ __forceinline__ static void wgmma_qk(float (&d)[16], uint64_t a, uint64_t b) { wgmma_m64n32k16_bf16(d, a, b); }
  __device__ __forceinline__ static void wgmma_pv(float (&d)[128], uint64_t a, uint64_t b) {
    wgmma_m64n256k16_bf16_tb(d, a, b);
  }
  // Warp-specialized variant: S of a whole page (64 x 64 keys) per warpgroup.
  __device__ __forceinline__ static void wgmma_qk64(float (&d)[32], uint64_t a, uint64_t b) { wgmma_m64n64k16_bf16(d, a, b); }
  // ... and the owner's own P.V with P from registers (wgmma.h: A fragment layout).
  __device__ __forceinline__ static void wgmma_pv_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n256k16_bf16_rs_tb(d, a, b);
  }
};

// fp8_ds KV: pages arrive raw (e4m3 latent, fp32 tile scales, bf16 RoPE) and are dequantized to bf16 in
// shared memory, in the layout the bf16 kernels read (pages.cuh for the 256-thread kernel,
// producer_ws_fp8ds.cuh for the warp-specialized one). From there on the math is the bf16 format's: same
// MMA atoms, P and the output rounded to bf16.
struct Fp8DsTraits : Bf16Traits {
  static constexpr KvFormat kFormat = KvFormat::kFp8Ds;
};

struct Fp16Traits {
  static constexpr KvFormat kFormat = KvFormat::kFp16;
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static void wgmma_qk(float (&d)[16], uint64_t a, uint64_t b) { wgmma_m64n32k16_fp16(d, a, b); }
  __device__ __forceinline__ static void wgmma_pv(float (&d)[128], uint64_t a, uint64_t b) {
    wgmma_m64n256k16_fp16_tb(d, a, b);
  }
  __device__ __forceinline__ static void wgmma_qk64(float (&d)[32], uint64_t a, uint64_t b) { wgmma_m64n64k16_f16(d, a, b); }
  __device__ __forceinline__ static void wgmma_pv_rs(float (&d)[128], const uint32_t (&a)[4], uint64_t b) {
    wgmma_m64n256k16_fp16_rs_tb(d, a, b);
  }
};

}  // namespace mla::sm90::decode

#pragma once
// Thin PTX wrappers used by the decode kernels, and by the model's grouped GEMM and prefill attention (sm_80+
// instructions that are still the cheapest way to move a swizzled tile through shared memory into mma.sync operands).
#include <cstdint>

namespace mla::sm90::decode {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte asynchronous copy global -> shared; src_bytes 0 writes zeros (tokens past the sequence end:
// the cache slots there are garbage, possibly NaN, and 0 * NaN would poison P.V).
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
// 16 zero bytes to shared memory at `dst` (a 32-bit shared address: no generic pointer kept live for the rare store).
__device__ __forceinline__ void st_shared_zero16(uint32_t dst) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0) : "memory");
}
// An L2 cache policy for the hinted copies of tma.h (bulk_load_hint, tma_load_2d_hint): a fraction of the lines
// evict-first (they go first when L2 needs room), the rest evict-unchanged; fraction 1 is FlashMLA's dense-decode KV
// hint. The fp8 16-row kernel loads short parts with it (config.h kKvEvictFirstPartBytes), the fp8_ds one every part;
// bench_stream --evict-first F prices it on bare streams (bench/decode/NOTES_plan.md sessions 14-15).
__device__ __forceinline__ uint64_t l2_evict_first_fraction(float fraction) {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.L2::evict_unchanged.b64 %0, %1;\n" : "=l"(policy) : "f"(fraction));
  return policy;
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Bulk prefetch of `bytes` contiguous bytes into L2 (no shared memory, no completion to wait for): puts
// pages beyond the two shared-memory stages in flight from DRAM.
__device__ __forceinline__ void prefetch_l2_bulk(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D += A (16x16 row) * B (16x8 col), bf16 in, fp32 accumulate (mma.sync m16n8k16; fragment layouts in the PTX ISA).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x as one MUFU.EX2, subnormal results flushed to 0 (exp2f adds a range check and two multiplies per value to
// produce them). Every softmax that uses it takes x = (s - m) * scale_log2 <= 0 (<= 8 under fp8's lazy running max,
// mla/ops/decode_running_max.h): a flushed P is below 2^-126, far
// under any P operand's resolution (16-bit, e4m3) next to the row's largest term (>= 1) and nothing in an fp32 row sum
// >= 1; exp2(-inf) stays 0 for masked keys.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The end of a segment and the merges (epilogues, fused merge, combine): e^x, ln x and 1 / x as one MUFU each
// (session 84). expf / logf / a division compile to range reductions, Newton steps and slow-path branches (~20
// instructions and a branch each), which sit on a batch-1 call's critical path: the last piece's merge of every
// row. Their inputs there: e^x of x = lse_k - lse_max <= 0 (a result below 2^-126 flushes to 0, nothing next to the
// row's largest weight 1); ln x and 1 / x of a row sum >= 1. The approximations' errors (ex2: 2 ulp, plus |x| 2^-24
// from the product; lg2: 2^-22 absolute; rcp: 1 ulp) are far under a bf16 output's 2^-9 and the lse tests' 1e-5.
__device__ __forceinline__ float exp_ftz(float x) { return ex2_ftz(x * 1.44269504088896341f); }
__device__ __forceinline__ float ln_approx(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y * 0.693147180559945309f;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace mla::sm90::decode

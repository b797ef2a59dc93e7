// grouped_gemm for block_m 128 on Hopper's warpgroup MMA: 128 x 256 tiles, two warpgroups of 128 threads,
// each computing 64 rows x 256 columns with wgmma.mma_async m64n256k16 (bf16 in, fp32 accumulate) straight
// from shared memory. Both operands are K-major in the canonical 128B-swizzle layout, which is exactly the
// 128-byte-row XOR swizzle the cp.async loader writes (grouped_gemm_common.cuh) on 1024-byte-aligned
// tiles, so the loader (row gather, zero fill, gate/up interleave) and the epilogue (its fragments have the
// mma.sync C layout) are the mma.sync kernel's.
//
// Pipeline (4 stages of 48 KB): all 256 threads issue cp.async for k-tile kt + 2 while the tensor cores
// work on kt and kt - 1: after issuing kt's four wgmma a warpgroup waits until at most one group (kt's) is in
// flight, so once every thread passed the next barrier no warpgroup reads stage kt - 1 any more and it can
// be refilled. cp.async data is made visible to the async proxy (fence.proxy.async) before the barrier.
#include <string>

#include "grouped_gemm_common.cuh"
#include "mla/core/cuda_check.h"

namespace mla::cuda::grouped {
namespace {

constexpr const char* kOp = "grouped_gemm";
constexpr int kBM = 128, kBN = 256, kStages = 4, kThreads = 256;
constexpr int kStageBytes = (kBM + kBN) * kRowBytes;            // 48 KB
constexpr int kSmemBytes = kStages * kStageBytes + 1024;       // + alignment slack for the 1024-byte atoms
constexpr int kAChunks = kBM * 8 / kThreads, kBChunks = kBN * 8 / kThreads;

// K-major 128B-swizzle descriptor: start address, leading offset unused (16), 1024 bytes between 8-row groups.
__device__ __forceinline__ uint64_t desc_k_major(uint32_t addr) {
  uint64_t d = static_cast<uint64_t>((addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>(16 >> 4) << 16;
  d |= static_cast<uint64_t>(1024 >> 4) << 32;
  d |= static_cast<uint64_t>(1) << 62;
  return d;
}

__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accumulator accesses across the asynchronous MMA window.
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x 256] += A[64 x 16] · B[256 x 16]ᵀ, both from shared memory, K-major (no transpose).
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t a, uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(a), "l"(b), "r"(1));
}

__global__ void __launch_bounds__(kThreads, 1) grouped_gemm_wgmma_kernel(const __grid_constant__ GroupedKernelParams p) {
  const int expert = p.tiles[2 * blockIdx.y];
  if (expert < 0) return;
  const int row0 = p.tiles[2 * blockIdx.y + 1];
  const int row_end = min(row0 + kBM, p.offsets[expert + 1]);
  extern __shared__ uint8_t smem_wg[];
  const uint32_t s_base = (smem_addr(smem_wg) + 1023u) & ~1023u;
  const int tid = threadIdx.x, lane = tid % 32, wg = tid / 128, warp = (tid % 128) / 32;

  const __nv_bfloat16* a_src[kAChunks];
  bool a_ok[kAChunks];
#pragma unroll
  for (int i = 0; i < kAChunks; ++i) {
    const int c = tid + i * kThreads, gr = row0 + c / 8;
    const int64_t sr = gr < row_end ? (p.a_rows ? int64_t(p.a_rows[gr]) : int64_t(gr)) : -1;
    a_ok[i] = sr >= 0 && sr < p.m_a;
    a_src[i] = p.a + (a_ok[i] ? sr * p.lda : 0) + (c % 8) * 8;
  }
  const __nv_bfloat16* b_src[kBChunks];
  bool b_ok[kBChunks];
  const __nv_bfloat16* w_e = p.w + int64_t(expert) * p.N * p.K;
#pragma unroll
  for (int i = 0; i < kBChunks; ++i) {
    const int c = tid + i * kThreads;
    const int wrow = b_tile_row(p, blockIdx.x, kBN, c / 8, &b_ok[i]);
    b_src[i] = w_e + (b_ok[i] ? int64_t(wrow) * p.K : 0) + (c % 8) * 8;
  }
  auto load_stage = [&](int stage, int kt) {
    const uint32_t sa = s_base + stage * kStageBytes, sb = sa + kBM * kRowBytes;
    const int k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < kAChunks; ++i) {
      const int c = tid + i * kThreads;
      const bool ok = a_ok[i] && k0 + (c % 8) * 8 < p.K;
      cp_async_16(sa + swz(c / 8, c % 8), ok ? a_src[i] + k0 : p.a, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < kBChunks; ++i) {
      const int c = tid + i * kThreads;
      const bool ok = b_ok[i] && k0 + (c % 8) * 8 < p.K;
      cp_async_16(sb + swz(c / 8, c % 8), ok ? b_src[i] + k0 : p.w, ok ? 16 : 0);
    }
  };

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  const int KT = (p.K + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < kStages - 2; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<kStages - 3>();  // this thread's copies of k-tile kt landed
    fence_proxy_async();            // ... and are visible to wgmma's async-proxy reads after the barrier
    __syncthreads();                // everyone's; and every warpgroup is done with k-tile kt - 2
    const int nk = kt + kStages - 2;
    if (nk < KT) load_stage(nk % kStages, nk);
    cp_async_commit();
    const uint32_t sa = s_base + (kt % kStages) * kStageBytes, sb = sa + kBM * kRowBytes;
    const uint64_t da = desc_k_major(sa + wg * 64 * kRowBytes), db = desc_k_major(sb);
    fence_acc(acc);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k) wgmma_m64n256k16(acc, da + 2 * k, db + 2 * k);  // +32 bytes per k16
    wgmma_commit();
    wgmma_wait<1>();
    fence_acc(acc);
  }
  wgmma_wait<0>();
  fence_acc(acc);
  cp_async_wait<0>();

  // acc[4 t + e]: n8 fragment t in the mma.sync C layout of warp `warp`'s 16 rows of this warpgroup's 64.
  const float(&frag)[32][4] = reinterpret_cast<const float(&)[32][4]>(acc);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = row0 + wg * 64 + warp * 16 + (lane >> 2) + 8 * h;
    if (gr < row_end) store_rows<32>(p, frag, gr, h, blockIdx.x, kBN, lane);
  }
}

}  // namespace

Status launch_wgmma_128x256(const GroupedKernelParams& kp, int64_t max_tiles, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(grouped_gemm_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  MLA_CUDA_TRY(kOp, attr);
  if (max_tiles > 65535) return Status::unsupported(kOp, std::to_string(max_tiles) + " m-tiles (grid y <= 65535)");
  const int64_t n_tiles = (kp.N + kBN - 1) / kBN;
  grouped_gemm_wgmma_kernel<<<dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(max_tiles)), kThreads,
                              kSmemBytes, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda::grouped

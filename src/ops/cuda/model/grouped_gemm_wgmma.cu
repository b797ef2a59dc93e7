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

// K-major 128B-swizzle descriptor: leading offset unused (16), 1024 bytes between 8-row groups.
__device__ __forceinline__ uint64_t desc_k_major(uint32_t addr) { return make_smem_desc(addr, 16, 1024); }

__global__ void __launch_bounds__(kThreads, 1)
    grouped_gemm_wgmma_kernel(const __grid_constant__ GroupedKernelParams p) {
  const int expert = p.tiles[2 * blockIdx.y];
  if (expert < 0) return;
  const int row0 = p.tiles[2 * blockIdx.y + 1];
  const int row_end = min(row0 + kBM, p.offsets[expert + 1]);
  extern __shared__ uint8_t smem_wg[];
  const uint32_t s_base = (smem_u32(smem_wg) + 1023u) & ~1023u;
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
    fence_operands(acc);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kBK / 16; ++k) wgmma_m64n256k16_bf16(acc, da + 2 * k, db + 2 * k);  // +32 bytes per k16
    wgmma_commit();
    wgmma_wait_group<1>();
    fence_operands(acc);
  }
  wgmma_wait_group<0>();
  fence_operands(acc);
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

// grouped_gemm on sm_90: mma.sync m16n8k16 (bf16 in, fp32 accumulate), ldmatrix from XOR-swizzled
// shared tiles (128-byte rows, 16-byte chunk c of row r at chunk c ^ (r & 7): ldmatrix's eight row reads
// and cp.async's eight chunk writes each hit eight distinct bank groups), and a STAGES-deep cp.async ring.
//
// Grid (N tiles, max_tiles): blockIdx.y picks an entry of moe_align's tile list, (expert, first row); an
// entry past the list's end ((-1, -1)) exits at once. So the launch depends on t only and is capturable.
// blockIdx.x (N tiles) is the fast index: the CTAs resident together share their A rows in L2, and the
// m-tiles of one expert follow one another, so its weights are read from HBM about once.
//
// A rows are gathered on load (a_rows, moe_align's perm): the sorted copy of the activations is never
// written. Rows past the tile's expert end, columns past N and k past K are zero-filled (cp.async src-size 0)
// and never stored.
//
// kSiluMul: shared-memory row r of the B tile holds weight row (r / 8 odd ? N/2 : 0) + n0 + (r / 16) · 8 + r % 8,
// i.e. 8-row groups of gate and up alternate, so the accumulators of n8 fragments 2q and 2q + 1 hold the same
// output columns' gate and up values in the same registers of the same thread: SiLU·mul is a per-register
// epilogue, and the gate|up GEMM writes I columns instead of 2I.
//
// Tile shapes (grouped_gemm_block_m picks the height by rows per expert):
//   16 × 64,   4 warps (1 × 4), 8 stages: decode; few rows per expert, weight streaming; 80 KB smem, 2 CTAs/SM
//   32 × 64,   4 warps (1 × 4), 8 stages: decode batches of ~10–30 rows per expert (b128–b256): one tile per
//              expert where 16 rows would need two (weights read twice) and 64 would quadruple the MMA work; 96 KB
//   64 × 128,  4 warps (2 × 2), 4 stages: tens of rows per expert; 96 KB, 2 CTAs/SM
//   128 × 256 on wgmma (grouped_gemm_wgmma.cu): prefill, compute bound; mma.sync measured ~310 TFLOP/s there
//   128 × 128, 8 warps (2 × 4), 3 stages on mma.sync: the same with MLA_GROUPED_GEMM_MMA_SYNC=1
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>

#include "grouped_gemm_common.cuh"
#include "mla/core/cuda_check.h"
#include "mla/ops/grouped_gemm.h"

namespace mla::cuda {
namespace {

using namespace grouped;

constexpr const char* kOp = "grouped_gemm";

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, int MIN_BLOCKS>
struct Cfg {
  static constexpr int kBM = BM, kBN = BN, kStages = STAGES, kMinBlocks = MIN_BLOCKS;
  static constexpr int kWarpsN = WARPS_N;
  static constexpr int kThreads = WARPS_M * WARPS_N * 32;
  static constexpr int kWTM = BM / WARPS_M, kWTN = BN / WARPS_N;
  static constexpr int kMI = kWTM / 16, kNI = kWTN / 8;
  static constexpr int kStageBytes = (BM + BN) * kRowBytes;
  static constexpr int kSmemBytes = STAGES * kStageBytes;
  static constexpr int kAChunks = BM * 8 / kThreads, kBChunks = BN * 8 / kThreads;
  static_assert(kWTM % 16 == 0 && kWTN % 16 == 0, "warp tile: 16-row A fragments, B loaded 16 n-rows at a time");
  static_assert(BM * 8 % kThreads == 0 && BN * 8 % kThreads == 0, "whole chunks per thread");
};

using CfgDecode = Cfg<16, 64, 1, 4, 8, 2>;
using CfgDecode32 = Cfg<32, 64, 1, 4, 8, 2>;
using CfgMid = Cfg<64, 128, 2, 2, 4, 2>;
using CfgPrefill = Cfg<128, 128, 2, 4, 3, 2>;

template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    grouped_gemm_kernel(const __grid_constant__ GroupedKernelParams p) {
  const int expert = p.tiles[2 * blockIdx.y];
  if (expert < 0) return;
  const int row0 = p.tiles[2 * blockIdx.y + 1];
  const int row_end = min(row0 + C::kBM, p.offsets[expert + 1]);
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t s_base = smem_u32(smem);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp / C::kWarpsN, wn = warp % C::kWarpsN;

  // This thread's load chunks: fixed rows (global pointers at k = 0) and 16-byte columns.
  const __nv_bfloat16* a_src[C::kAChunks];
  bool a_ok[C::kAChunks];
#pragma unroll
  for (int i = 0; i < C::kAChunks; ++i) {
    const int c = tid + i * C::kThreads, r = c / 8;
    const int gr = row0 + r;
    int64_t sr = gr < row_end ? (p.a_rows ? int64_t(p.a_rows[gr]) : int64_t(gr)) : -1;
    a_ok[i] = sr >= 0 && sr < p.m_a;
    a_src[i] = p.a + (a_ok[i] ? sr * p.lda : 0) + (c % 8) * 8;
  }
  const __nv_bfloat16* b_src[C::kBChunks];
  bool b_ok[C::kBChunks];
  const __nv_bfloat16* w_e = p.w + int64_t(expert) * p.N * p.K;
#pragma unroll
  for (int i = 0; i < C::kBChunks; ++i) {
    const int c = tid + i * C::kThreads;
    const int wrow = b_tile_row(p, blockIdx.x, C::kBN, c / 8, &b_ok[i]);
    b_src[i] = w_e + (b_ok[i] ? int64_t(wrow) * p.K : 0) + (c % 8) * 8;
  }

  auto load_stage = [&](int stage, int kt) {
    const uint32_t sa = s_base + stage * C::kStageBytes, sb = sa + C::kBM * kRowBytes;
    const int k0 = kt * kBK;
#pragma unroll
    for (int i = 0; i < C::kAChunks; ++i) {
      const int c = tid + i * C::kThreads;
      const bool ok = a_ok[i] && k0 + (c % 8) * 8 < p.K;
      cp_async_16(sa + swz(c / 8, c % 8), ok ? a_src[i] + k0 : p.a, ok ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < C::kBChunks; ++i) {
      const int c = tid + i * C::kThreads;
      const bool ok = b_ok[i] && k0 + (c % 8) * 8 < p.K;
      cp_async_16(sb + swz(c / 8, c % 8), ok ? b_src[i] + k0 : p.w, ok ? 16 : 0);
    }
  };

  float acc[C::kMI][C::kNI][4];
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int ni = 0; ni < C::kNI; ++ni)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[mi][ni][q] = 0.f;

  const int KT = (p.K + kBK - 1) / kBK;
#pragma unroll
  for (int s = 0; s < C::kStages - 1; ++s) {
    if (s < KT) load_stage(s, s);
    cp_async_commit();
  }
  for (int kt = 0; kt < KT; ++kt) {
    cp_async_wait<C::kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; stage kt - 1 is free for the prefetch below
    const int nk = kt + C::kStages - 1;
    if (nk < KT) load_stage(nk % C::kStages, nk);
    cp_async_commit();
    const uint32_t sa = s_base + (kt % C::kStages) * C::kStageBytes, sb = sa + C::kBM * kRowBytes;
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      uint32_t af[C::kMI][4], bfr[C::kNI][2];
#pragma unroll
      for (int mi = 0; mi < C::kMI; ++mi) {
        const int r = wm * C::kWTM + mi * 16 + (lane & 15);
        ldmatrix_x4(af[mi], sa + swz(r, kk * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int nj = 0; nj < C::kNI / 2; ++nj) {
        const int r = wn * C::kWTN + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
        uint32_t t4[4];
        ldmatrix_x4(t4, sb + swz(r, kk * 2 + ((lane >> 3) & 1)));
        bfr[2 * nj][0] = t4[0], bfr[2 * nj][1] = t4[1], bfr[2 * nj + 1][0] = t4[2], bfr[2 * nj + 1][1] = t4[3];
      }
#pragma unroll
      for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
        for (int ni = 0; ni < C::kNI; ++ni) mma_bf16(acc[mi][ni], af[mi], bfr[ni][0], bfr[ni][1]);
    }
  }
  cp_async_wait<0>();

  // Epilogue: warp (wm, wn) holds rows wm · WTM + 16 mi + lane / 4 (+ 8) and columns wn · WTN + 8 ni + ...;
  // its fragments of one mi are a contiguous run of the tile's n8 fragments starting at wn · WTN / 8.
#pragma unroll
  for (int mi = 0; mi < C::kMI; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int gr = row0 + wm * C::kWTM + mi * 16 + (lane >> 2) + 8 * h;
      if (gr < row_end) store_rows<C::kNI>(p, acc[mi], gr, h, blockIdx.x * C::kWarpsN + wn, C::kWTN, lane);
    }
}

template <class C>
Status launch(const GroupedKernelParams& kp, int64_t max_tiles, cudaStream_t stream) {
  // Above 48 KB of dynamic shared memory needs the opt-in, once per instantiation (not a stream operation,
  // so a first call inside a graph capture is fine too).
  static const cudaError_t attr =
      cudaFuncSetAttribute(grouped_gemm_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmemBytes);
  MLA_CUDA_TRY(kOp, attr);
  const int64_t n_tiles = (kp.N + C::kBN - 1) / C::kBN;
  if (max_tiles > 65535) return Status::unsupported(kOp, std::to_string(max_tiles) + " m-tiles (grid y <= 65535)");
  grouped_gemm_kernel<C><<<dim3(static_cast<unsigned>(n_tiles), static_cast<unsigned>(max_tiles)), C::kThreads,
                           C::kSmemBytes, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

// MLA_GROUPED_GEMM_MMA_SYNC=1 runs block_m 128 on the mma.sync kernel instead of wgmma (comparison, and a
// fallback); read per call so one process can time both.
bool mma_sync_forced() {
  const char* e = std::getenv("MLA_GROUPED_GEMM_MMA_SYNC");
  return e && e[0] == '1';
}

}  // namespace

Status grouped_gemm(const GroupedGemmParams& p, Stream stream) {
  MLA_TRY(validate_grouped_gemm(p));
  const int64_t N = p.w.shape[1], K = p.w.shape[2];
  if (N > (int64_t{1} << 30) || K > (int64_t{1} << 30) || p.out.shape[0] > (int64_t{1} << 30))
    return Status::unsupported(kOp, "dimensions beyond int32: w " + p.w.str() + ", out " + p.out.str());
  const GroupedKernelParams kp{.a = p.a.ptr<const __nv_bfloat16>(),
                               .a_rows = p.a_rows.defined() ? p.a_rows.ptr<const int32_t>() : nullptr,
                               .w = p.w.ptr<const __nv_bfloat16>(),
                               .offsets = p.expert_offsets.ptr<const int32_t>(),
                               .tiles = p.tiles.ptr<const int32_t>(),
                               .out = p.out.ptr<__nv_bfloat16>(),
                               .lda = p.a.stride[0],
                               .ldo = p.out.stride[0],
                               .m_a = p.a.shape[0],
                               .N = static_cast<int>(N),
                               .K = static_cast<int>(K),
                               .silu = p.epilogue == GroupedEpilogue::kSiluMul};
  const int64_t max_tiles = p.tiles.shape[0];
  if (max_tiles == 0) return Status::ok();
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  switch (p.block_m) {
    case 16: return launch<CfgDecode>(kp, max_tiles, s);
    case 32: return launch<CfgDecode32>(kp, max_tiles, s);
    case 64: return launch<CfgMid>(kp, max_tiles, s);
    default: return mma_sync_forced() ? launch<CfgPrefill>(kp, max_tiles, s) : launch_wgmma_128x256(kp, max_tiles, s);
  }
}

}  // namespace mla::cuda

// moe_align on the GPU: one 1024-thread block, two passes over the ids, one token per thread (its k ids
// loaded together, repeats checked in registers).
//   Pass 1 counts each expert's valid entries (one shared atomic per distinct expert per warp and slot,
//   found with __match_any_sync); a block scan gives the expert offsets and the tile list.
//   Pass 2 walks the tokens in chunks of 1024: token tid of the chunk sets bit lane of word warp of its
//   experts' 1024-bit masks (the __match_any_sync peers mask is exactly the warp's word); a per-expert scan
//   of the words' popcounts gives each word's prefix; an entry's rank among its expert's entries of the
//   chunk is prefix + popcount of the lower lanes. Ranks therefore follow token order (a token has each
//   expert at most once): a stable sort without any serial loop. O(t · k / 1024) steps for one block:
//   decode a few µs; 16k-token prefill tens of µs against milliseconds of GEMMs.
#include "mla/ops/moe_align.h"

#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "moe_align";
constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxExperts = 256;
constexpr int kMaxK = 16;
constexpr unsigned kFull = 0xFFFFFFFFu;

struct AlignKernelParams {
  const int32_t* ids;  // [t, k]
  int32_t* offsets;    // [E + 1]
  int32_t* perm;       // [t · k]
  int32_t* src;        // [t · k]
  int32_t* tiles;      // [max_tiles, 2]
  int32_t* error;      // [1]
  int64_t t;
  int k, num_experts, block_m, max_tiles;
};

// Token i's experts, -1 for an out-of-range id or a repeat of an earlier slot (and for i >= t).
__device__ __forceinline__ void load_token(const AlignKernelParams& p, int64_t i, int (&e)[kMaxK]) {
#pragma unroll
  for (int j = 0; j < kMaxK; ++j) e[j] = j < p.k && i < p.t ? p.ids[i * p.k + j] : -1;
#pragma unroll
  for (int j = 0; j < kMaxK; ++j) {
    bool ok = e[j] >= 0 && e[j] < p.num_experts;
#pragma unroll
    for (int q = 0; q < j; ++q) ok &= e[q] != e[j] || e[q] < 0;  // a repeat of a valid earlier id
    // An earlier invalid slot holding the same out-of-range value does not matter: e[j] is invalid too.
    if (!ok) e[j] = -1;
  }
}

// Exclusive scan of one value per thread over the first kMaxExperts threads (the others pass 0);
// returns the thread's exclusive prefix and the total in *total. All threads must call it.
__device__ int block_exclusive_scan(int v, int* s_warp, int* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(kFull, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31 && warp < kMaxExperts / 32) s_warp[warp] = x;
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < kMaxExperts / 32; ++w) {
    if (w < warp) before += s_warp[w];
    all += s_warp[w];
  }
  __syncthreads();  // s_warp is reused by the next scan
  *total = all;
  return before + x - v;
}

__global__ void __launch_bounds__(kThreads) moe_align_kernel(const __grid_constant__ AlignKernelParams p) {
  __shared__ int s_count[kMaxExperts];
  __shared__ int s_base[kMaxExperts];  // first row of each expert's entries in the current chunk
  __shared__ int s_tot[kMaxExperts];   // each expert's entries in the current chunk
  __shared__ int s_warp[kMaxExperts / 32];
  extern __shared__ uint32_t s_dyn[];
  uint32_t* s_bits = s_dyn;                                              // [E][kWarps] token masks
  uint16_t* s_pre = reinterpret_cast<uint16_t*>(s_dyn + p.num_experts * kWarps);  // [E][kWarps] prefixes
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, E = p.num_experts;
  if (tid < kMaxExperts) s_count[tid] = 0;
  __syncthreads();

  // Pass 1: counts.
  bool bad = false;
  int e[kMaxK];
  for (int64_t i0 = 0; i0 < p.t; i0 += kThreads) {
    const int64_t i = i0 + tid;
    load_token(p, i, e);
#pragma unroll
    for (int j = 0; j < kMaxK; ++j) {
      if (j >= p.k) break;  // uniform
      bad |= i < p.t && e[j] < 0;
      const unsigned peers = __match_any_sync(kFull, e[j]);
      if (e[j] >= 0 && lane == __ffs(peers) - 1) atomicAdd(&s_count[e[j]], __popc(peers));
    }
  }
  if (__syncthreads_or(bad) && tid == 0) *p.error = 1;

  // Offsets and the tile list.
  const int cnt = tid < E ? s_count[tid] : 0;
  const int ntiles = (cnt + p.block_m - 1) / p.block_m;
  int total_rows = 0, total_tiles = 0;
  const int first_row = block_exclusive_scan(cnt, s_warp, &total_rows);
  const int first_tile = block_exclusive_scan(ntiles, s_warp, &total_tiles);
  if (tid < E) {
    p.offsets[tid] = first_row;
    s_base[tid] = first_row;
    for (int j = 0; j < ntiles; ++j) {
      p.tiles[2 * (first_tile + j)] = tid;
      p.tiles[2 * (first_tile + j) + 1] = first_row + j * p.block_m;
    }
  }
  if (tid == 0) p.offsets[E] = total_rows;
  for (int j = total_tiles + tid; j < p.max_tiles; j += kThreads) p.tiles[2 * j] = -1, p.tiles[2 * j + 1] = -1;
  for (int64_t r = total_rows + tid; r < p.t * p.k; r += kThreads) p.perm[r] = -1;

  // Pass 2: placement, 1024 tokens at a time.
  const unsigned lower = (1u << lane) - 1u;
  for (int64_t c0 = 0; c0 < p.t; c0 += kThreads) {
    for (int w = tid; w < E * kWarps; w += kThreads) s_bits[w] = 0;
    __syncthreads();
    const int64_t i = c0 + tid;
    load_token(p, i, e);
#pragma unroll
    for (int j = 0; j < kMaxK; ++j) {
      if (j >= p.k) break;
      const unsigned peers = __match_any_sync(kFull, e[j]);
      if (e[j] >= 0 && lane == __ffs(peers) - 1) atomicOr(&s_bits[e[j] * kWarps + warp], peers);
    }
    __syncthreads();
    for (int x = warp; x < E; x += kWarps) {  // warp per expert, lane per word: exclusive scan of popcounts
      const int c = __popc(s_bits[x * kWarps + lane]);
      int incl = c;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += y;
      }
      s_pre[x * kWarps + lane] = static_cast<uint16_t>(incl - c);
      if (lane == 31) s_tot[x] = incl;
    }
    __syncthreads();
    if (i < p.t) {
#pragma unroll
      for (int j = 0; j < kMaxK; ++j) {
        if (j >= p.k) break;
        if (e[j] < 0) {
          p.src[i * p.k + j] = -1;
          continue;
        }
        const int w = e[j] * kWarps + warp;
        const int row = s_base[e[j]] + s_pre[w] + __popc(s_bits[w] & lower);
        p.perm[row] = static_cast<int32_t>(i);
        p.src[i * p.k + j] = row;
      }
    }
    __syncthreads();  // every read of this chunk's masks, prefixes and bases before they change
    if (tid < E) s_base[tid] += s_tot[tid];
  }
}

size_t dyn_smem_bytes(int num_experts) { return size_t(num_experts) * kWarps * (sizeof(uint32_t) + sizeof(uint16_t)); }

}  // namespace

Status moe_align(const MoeAlignParams& p, Stream stream) {
  MLA_TRY(validate_moe_align(p));
  const int64_t t = p.topk_ids.shape[0], k = p.topk_ids.shape[1];
  const AlignKernelParams kp{.ids = p.topk_ids.ptr<const int32_t>(),
                             .offsets = p.expert_offsets.ptr<int32_t>(),
                             .perm = p.perm.ptr<int32_t>(),
                             .src = p.src.ptr<int32_t>(),
                             .tiles = p.tiles.ptr<int32_t>(),
                             .error = p.error.ptr<int32_t>(),
                             .t = t,
                             .k = static_cast<int>(k),
                             .num_experts = p.num_experts,
                             .block_m = p.block_m,
                             .max_tiles = static_cast<int>(moe_align_max_tiles(t * k, p.num_experts, p.block_m))};
  // Up to 48 KB of masks and prefixes (E = 256) plus 3 KB static: past the default limit, so opt in
  // once (not a stream operation: fine during a graph capture).
  static const cudaError_t attr = cudaFuncSetAttribute(moe_align_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(dyn_smem_bytes(kMaxExperts)));
  MLA_CUDA_TRY(kOp, attr);
  // t == 0 still writes the offsets (all zero) and an empty tile list: the GEMMs after it read them.
  moe_align_kernel<<<1, kThreads, dyn_smem_bytes(p.num_experts), reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

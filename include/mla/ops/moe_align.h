#pragma once
// moe_align: sorts a MoE layer's (token, slot) pairs by expert on the device, so the routed experts can
// run as one grouped GEMM with no host round trip (graph-capturable: launch shapes depend on t only).
//
//   n = t · k entries, entry i = (token i / k, slot i % k), expert e_i = topk_ids[i]
//   valid(i)          : 0 <= e_i < E and e_i differs from every earlier slot of the same token
//   m_e               : the number of valid entries of expert e
//   expert_offsets[e] : Σ_{e' < e} m_e'   (e = 0..E; expert_offsets[E] = valid entries)
//   sorted rows       : expert-major, tokens ascending within an expert (entry order: a stable counting sort,
//                       the order the host sort of the first CUDA MoE produced)
//   perm[row]         : the token of sorted row `row`; -1 for rows >= expert_offsets[E]
//   src[i]            : the sorted row of entry i; -1 for an invalid entry
//   tiles[j]          : (expert, first sorted row) of the j-th block_m-row tile, experts ascending, then rows;
//                       (-1, -1) for j >= Σ ceil(m_e / block_m), up to moe_align_max_tiles entries
//   error[0]          : set to 1 (never cleared by the kernel) when some entry is invalid
//
// Invalid ids are recorded, not clamped: clamping would silently route a token to the wrong expert (and
// could give one token the same expert twice). An invalid entry gets no row and src -1, which moe_combine
// skips, so the layer stays memory-safe and the caller learns of it from the sticky flag outside a graph
// (our router gives an out-of-range id only for NaN logits).
#include <cstdint>

#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

struct MoeAlignParams {
  TensorView topk_ids;        // [t, k] int32, contiguous; k <= 16
  int num_experts = 0;        // E, 1..256
  int block_m = 0;            // rows per grouped-GEMM tile (grouped_gemm_block_m); 16 | 32 | 64 | 128
  TensorView expert_offsets;  // [E + 1] int32, contiguous
  TensorView perm;            // [t · k] int32, contiguous
  TensorView src;             // [t, k] int32, contiguous
  TensorView tiles;           // [moe_align_max_tiles(t · k, E, block_m), 2] int32, contiguous
  TensorView error;           // [1] int32; the caller zeroes it once, the op only ever sets it to 1
};

// The tile list's fixed length: Σ_e ceil(m_e / bm) <= Σ_e (m_e / bm + 1) over the non-empty experts, at most
// ceil(n / bm) + min(E, n) of them, and never more than n (every tile holds a row).
inline int64_t moe_align_max_tiles(int64_t n, int64_t num_experts, int64_t block_m) {
  const int64_t bound = (n + block_m - 1) / block_m + (num_experts < n ? num_experts : n);
  return bound < n ? bound : n;
}

Status validate_moe_align(const MoeAlignParams& p);

namespace ref {
Status moe_align(const MoeAlignParams& p);  // host pointers
}  // namespace ref

namespace cuda {
// Device pointers; one 1024-thread block (two passes over the ids: count, then place); no allocation.
Status moe_align(const MoeAlignParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

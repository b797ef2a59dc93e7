#pragma once
// grouped_gemm: every routed expert's linear layer over its own rows, in one launch (MoE, DESIGN.md §4).
//
//   rows of expert e : the sorted rows [expert_offsets[e], expert_offsets[e + 1]) (moe_align)
//   A row of row r   : a[a_rows[r]] when a_rows is given (the gather fused into the load), else a[r]
//   kStore   : out[r, j] = bf16( Σ_q A[r, q] · w[e, j, q] )                      j < N
//   kSiluMul : g = bf16(Σ_q A[r, q] · w[e, j, q]), u = bf16(Σ_q A[r, q] · w[e, N/2 + j, q])
//              out[r, j] = bf16( silu(g) · u ), silu(x) = x / (1 + exp(-x))        j < N/2
//              (w[e] is an expert's gate_proj rows stacked over its up_proj rows; g and u are rounded to
//              bf16 first, as the separate GEMMs + silu_mul did, so both paths agree to one rounding)
// Products in fp32 (bf16 inputs), one rounding to bf16 at the end. Rows past expert_offsets[E] are not
// written.
#include <cstdint>

#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

enum class GroupedEpilogue { kStore, kSiluMul };

struct GroupedGemmParams {
  TensorView a;               // [m_a, K] bf16, unit column stride, row stride >= K and % 8 == 0; K % 8 == 0
  TensorView a_rows;          // optional [n_rows] int32 in [0, m_a) (moe_align's perm); rank 0: identity;
                              // an index outside [0, m_a) reads a row of zeros
  TensorView w;               // [E, N, K] bf16, contiguous (nn.Linear weights back to back); N % 8 == 0
                              // (kSiluMul: N % 16 == 0)
  TensorView expert_offsets;  // [E + 1] int32 (moe_align), non-decreasing, offsets[E] <= n_rows
  TensorView tiles;           // [max_tiles, 2] int32 (moe_align with the same block_m)
  int block_m = 0;            // grouped_gemm_block_m(n_rows, E)
  GroupedEpilogue epilogue = GroupedEpilogue::kStore;
  TensorView out;             // [n_rows, N | N/2] bf16, unit column stride, row stride % 8 == 0
};

// The tile height the CUDA kernel runs for n_rows sorted rows over E experts (moe_align must use the same):
// 16 while an expert averages a few rows (decode: weight-bandwidth bound, MMA work wasted on empty rows is
// cheap only while the tile is short), 32 up to ~24 rows (decode b128–b256: one tile per expert), 64 up to
// ~48 rows, 128 beyond (prefill: compute bound).
// MLA_MOE_BLOCK_M=16|32|64|128 in the environment overrides the rule, =legacy runs the rule before 32-row
// tiles existed (read per call, so a benchmark can compare them in one process); any other value is an error.
Status grouped_gemm_block_m(int64_t n_rows, int64_t num_experts, int* block_m);

Status validate_grouped_gemm(const GroupedGemmParams& p);

namespace ref {
// Host pointers; reads only expert_offsets (not the tile list); float accumulation.
Status grouped_gemm(const GroupedGemmParams& p);
}  // namespace ref

namespace cuda {
// Device pointers; mma.sync m16n8k16 with ldmatrix and a multi-stage cp.async pipeline; grid fixed by
// (N tiles, tiles.shape[0]), each CTA reads its (expert, first row) from `tiles`; no allocation.
Status grouped_gemm(const GroupedGemmParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

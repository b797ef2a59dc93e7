#pragma once
// prefill_attention: causal variable-length attention of MLA's expanded (prefill) form, d_qk = 192
// (128 nope + 64 rope), d_v = 128, one K/V head per query head. The rope part of K is shared by all
// heads (it is the latent row's k_pe), so K arrives as two views and nothing is repacked.
//
// Sequence b: queries q rows [q_start, q_start + q_len), keys/values rows [k_start, k_start + k_len),
// q_len <= k_len; the queries are the LAST q_len positions of the k_len (a chunk continuing a cached
// prefix), so query i sees keys j <= k_len - q_len + i:
//
//   s[i, j]   = scale · (q[i, h, :128] · k_nope[j, h, :] + q[i, h, 128:] · k_pe[j, :])
//   out[i, h] = Σ_j softmax_j(s[i, :]) · v[j, h, :]       lse[h, i] = log Σ_j exp(s[i, j])
//
// Float accumulation. The kernel rounds P to bf16 for the P·V MMA (2^-9 relative noise per weight,
// averaging out over keys); the reference keeps P in float.
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

constexpr int kPrefillDimNope = 128;
constexpr int kPrefillDimRope = 64;
constexpr int kPrefillDimQK = kPrefillDimNope + kPrefillDimRope;  // 192
constexpr int kPrefillDimV = 128;
constexpr int kPrefillSeqFields = 4;  // per sequence: q_start, q_len, k_start, k_len

struct PrefillAttentionParams {
  TensorView q;       // [tq, h, 192] bf16: strides (row >= h·192 (any multiple of 8), 192, 1)
  TensorView k_nope;  // [tk, h, 128] bf16: strides (row, head (>= 128, multiple of 8), 1)
  TensorView k_pe;    // [tk, 64] bf16, row stride a multiple of 8: shared by every head
  TensorView v;       // [tk, h, 128] bf16: strides (row, head (multiple of 8), 1)
  TensorView out;     // [tq, h, 128] bf16: strides (row, 128, 1); rows of no sequence are not written
  TensorView lse;     // [h, tq] fp32, contiguous; optional (rank 0: not written)
  TensorView seqs;    // [b, 4] int32 contiguous: q_start, q_len, k_start, k_len (0 <= q_len <= k_len)
  int max_q_len = 0;  // >= every q_len (sizes the grid; the kernel reads lengths from `seqs`)
  float softmax_scale = 0.f;
};

// Shapes, dtypes, strides, alignment; sequence ranges when `seqs` is host memory (the reference).
Status validate_prefill_attention(const PrefillAttentionParams& p);

namespace ref {
// Host pointers; float math (the kernel's oracle).
Status prefill_attention(const PrefillAttentionParams& p);
}  // namespace ref

namespace cuda {
// Device pointers. One CTA per (64-query tile, head, sequence), 4 warps of 16 query rows, mma.sync
// m16n8k16 bf16 with fp32 accumulation, 64-key tiles through shared memory, online softmax, causal
// tiles skipped. No allocation, graph-capturable.
Status prefill_attention(const PrefillAttentionParams& p, Stream stream);
}  // namespace cuda

}  // namespace mla

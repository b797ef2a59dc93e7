#pragma once
// mla_decode: paged Multi-head Latent Attention decode (DESIGN.md §4).
//
//   scores[b, i, h, t] = softmax_scale * q[b, i, h, :576] . K[b, t, :576]      (t < visible(b, i))
//   out[b, i, h, :]    = softmax_t(scores) @ K[b, t, :512]                   (V = the latent part of K)
//   lse[b, h, i]       = log sum_t exp(scores[b, i, h, t])
//
// visible(b, i) = seqlen[b] when not causal, seqlen[b] - s_q + 1 + i when causal (the s_q new tokens are
// the last s_q keys). A row that sees no key gets out = 0 and lse = -inf. For the fp8 format, q and K are
// e4m3 codes and the scores use the dequantized values (q * q_scale, K * k_scale).
#include "mla/core/env_knob.h"
#include "mla/core/kv_format.h"
#include "mla/core/status.h"
#include "mla/core/tensor.h"
#include "mla/ops/plan_decode.h"

namespace mla {

struct MlaDecodeParams {
  TensorView q;            // [b, s_q, h_q, 576] bf16 (bf16, fp8_ds) | fp16 (fp16) | e4m3 (fp8: satfinite(q / q_scale))
  TensorView kv_cache;     // [num_pages, 64, 576] bf16 | fp16 | e4m3, or uint8 [num_pages, 64, 656] for fp8_ds
  TensorView block_table;  // [b, max_pages] int32; entries past a sequence's last page are never read
  TensorView seqlens;      // [b] int32, keys per sequence (the s_q new tokens included), >= 0
  TensorView out;          // [b, s_q, h_q, 512]  fp16 for the fp16 format, bf16 otherwise
  TensorView lse;          // [b, h_q, s_q] fp32, natural log
  KvFormat format = KvFormat::kBf16;
  float softmax_scale = 0.f;  // usually 1/sqrt(192) times the YaRN mscale^2 correction
  bool causal = false;        // only meaningful for s_q > 1
  float q_scale = 1.f;        // fp8 only: q was stored as satfinite(q / q_scale)
  float k_scale = 1.f;        // fp8 only: the cache stores satfinite(k / k_scale)
};

// Host-side validation shared by every backend: dtypes, ranks, shapes, contiguity, head count, page size,
// null pointers, scales. Data-dependent checks (a seqlen that needs more pages than the block table
// row has) happen where the data is readable: in the reference, and in the CUDA launcher when the plan
// geometry was made from the step's host seqlens (DecodePlanGeometry::host_max_seq_pages).
Status validate_mla_decode(const MlaDecodeParams& p);

// How the reference rounds P before P·V, mirroring the MMA operand type of the kernel for each format
// (bf16 for bf16/fp8_ds, fp16 for fp16, e4m3 for fp8). kNone keeps P in float: the exact-math mode that
// tests compare against a float64 oracle.
enum class PRounding { kFormatDefault, kNone };

// How the reference adds up the fp8 format's two products (S = q . K over 576 dims, O += P V over a page's keys):
// kFloat, in float (the mma.sync kernels, whose e4m3 products Hopper's compiler runs at float precision); kWgmmaE4m3,
// as Hopper's e4m3 wgmma does (src/ops/ref/wgmma_e4m3_sum.h: per k32 step the terms aligned to the largest and cut to
// 14 bits, the sum kept to 13 mantissa bits; the accumulator cut too where A comes from registers), with the wgmma
// kernels' float softmax arithmetic (raw scores, exp2 of fma, lse = m * scale + log l). Only the fp8 format reads it.
enum class Fp8MmaSum { kFloat, kWgmmaE4m3 };

struct MlaDecodeRefOptions {
  PRounding p_rounding = PRounding::kFormatDefault;
  Fp8MmaSum fp8_mma_sum = Fp8MmaSum::kFloat;
  // kWgmmaE4m3: the wgmma form of each product. s_register_steps: S's last k32 steps whose A (Q) comes from
  // registers (the 64-row kernels' kQRegSteps: 6 or 8; 0 all from shared memory); pv_register_a: P.V's A from
  // registers (the 16-row kernel's V^T fragments; the 64-row kernels' P.V is all shared memory).
  int s_register_steps = 0;
  bool pv_register_a = false;
  // Split partials (mla_decode_split's o_accum) rounded to bf16 values, as the fp8 64-row kernels store them.
  bool bf16_partials = false;
};

namespace ref {
// Unsplit reference: every (b, i, h) row walks its keys in 64-token blocks with the online softmax a
// kernel uses (running max, rescale per block, P rounded per `opts`), float accumulation.
Status mla_decode(const MlaDecodeParams& p, const MlaDecodeRefOptions& opts = {});

// Split-KV reference: runs each part of `plan` as a kernel CTA would (partials into o_accum / lse_accum),
// writes sequences with one split directly, then combines the rest. Equals mla_decode up to float
// rounding (and P-rounding noise for formats that round P).
// o_accum: host fp32 [max_splits, s_q * h_q, 512]; lse_accum: host fp32 [max_splits, s_q * h_q].
Status mla_decode_split(const MlaDecodeParams& p, const DecodePlanView& plan, float* o_accum, float* lse_accum,
                        const MlaDecodeRefOptions& opts = {});
}  // namespace ref

namespace cuda {
// The Hopper kernel (sm_90a): split-KV decode per `plan` (from cuda::plan_decode for this step), partial
// results in `workspace` (decode_workspace_bytes(g) bytes, device), then combine. No allocation, no host
// synchronization: capturable in a CUDA graph. All pointers in `p` are device pointers.
Status mla_decode(const MlaDecodeParams& p, const DecodePlanGeometry& g, const DecodePlanView& plan, void* workspace,
                  size_t workspace_bytes, Stream stream);

// MLA_DECODE_MERGE (tests and benchmarks), read by mla_decode on every call: who merges the split sequences.
// index 0 (auto, or unset): the decode kernel where the call passes the plan's merge_counters; 1 (combine): the
// combine grid even then; 2 (fused): the decode kernel, an error without counters.
EnvKnob decode_merge_knob();
}  // namespace cuda

}  // namespace mla

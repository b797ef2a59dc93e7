// How one row of split partials is merged, by the combine kernels (combine.cu, the only includer): a row of up to
// kFewSplits splits by one group of threads (combine_few_group in the one-CTA-per-item grid, combine_few_online in the
// list kernel), more by column chunks (combine_many), a row with no keys by store_empty_row. Each merges the
// normalized partials weighted by exp(lse_k - lse_max) and stores the row through merge_store.cuh. The grids, which
// rows a CTA merges and when it waits for the decode kernel, are combine.cu's.
// The partials are in the accumulator-following column order of partials.h (each 16-column group holds its pairs of
// logical columns permuted): every reader loads float2 / float4 of that order and writes each pair to its logical
// column (partial_pair_col); the merge itself is per column and does not care.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mla/core/mla_shapes.h"
#include "mla/ops/decode_combine_grid.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/merge_store.cuh"
#include "ops/cuda/sm90/decode/partials.h"
#include "ops/cuda/sm90/decode/row_end.cuh"  // merge_weight, row_inv, row_lse
#include "ops/cuda/sm90/decode/traits.h"

namespace mla::sm90::decode {

constexpr int kCombineThreads = kCombineGridThreads;  // the grid's wave (kCombineWaveCtas) counts 4 of these a SM

// Up to this many splits a row is merged by one group of threads over all of them (combine_few_group /
// combine_few_online); more go through combine_many's column chunks.
constexpr int kFewSplits = kCombineFewSplits;
// On its smallest grids (8 column chunks: rows x batch <= 66) the one-CTA-per-item grid (combine_direct_kernel)
// merges rows of up to this many splits in one group of the CTA's threads (combine_few_group, two load batches of 8
// for 9-16; ptxas: 64 registers, no spills). Batch-1 h_q 16 steps of 10-16 one-page pieces (s640-s1024) through
// combine_many's 8 column chunks were 1.0-1.7 us slower (bench/decode/NOTES.md, sessions 34-35).
constexpr int kDirectFewSplits = kCombineDirectFewSplits;
static_assert(kCombineThreads / 8 % 8 == 0, "few-split groups (<= 8 a CTA) step pairs by whole 16-column groups");
static_assert(2 * kCombineThreads == kDimV, "combine_few_group: one float2 per thread and split for GROUPS 1");

// The result of a row with no keys (seqlen 0, no splits): out 0, lse -inf. Thread t of a group of
// kCombineThreads / J threads writes the column pairs t + G j, as the few-split merges do.
template <class Traits, int J>
__device__ __forceinline__ void store_empty_row(const DecodeKernelParams& p, int b, int row, int t) {
  constexpr int G = kCombineThreads / J;
#pragma unroll
  for (int j = 0; j < J; ++j) store_pair<Traits>(p, b, row, 2 * (t + G * j), make_float2(0.f, 0.f));
  if (t == 0) store_lse(p, b, row, -INFINITY);
}

// Shared memory of combine_many (every thread's running max, sum and weighted sum), declared by the kernels.
struct CombineSmem {
  float m[kCombineThreads], s[kCombineThreads];
  float4 acc[kCombineThreads];
};

static_assert(kDimV == kCombineGridColumns, "decode_combine_many_chunks counts split lanes of this row width");
constexpr int kLog2Quads = 7;  // log2(kDimV / 4)

// Many splits: this CTA merges partials offsets [chunk * cw, (chunk + 1) * cw) of one row, cw = 512 / chunks
// (whole 16-column groups: the same logical columns). Thread t owns float4 lane t % q4 (q4 = cw / 4) of
// splits t / q4, t / q4 + S, ... (S = 256 / q4 split lanes), eight loads in flight, and loads each split's lse
// together with its partial, keeping its own running (max, sum, weighted sum) rescaled as each batch of eight
// arrives; the S split lanes then meet in shared memory with their maxima. One memory round trip per batch and
// one barrier: the batch-1 rows are latency-bound (ncu P7: 4-9 us per combine for <= 17 MB of partials). Against
// a first pass over the lse values, a barrier, then the partials (C1, same call): -0.9 to -1.5 us on every b1
// s4096 / s8192 row.
template <class Traits, class PT>
__device__ __forceinline__ void combine_many(const DecodeKernelParams& p, int b, int row, int first, int n,
                                             int chunk, int chunks, CombineSmem& sm) {
  constexpr int KB = kCombineManyBatch;
  const float* lse_k = p.lse_accum + static_cast<int64_t>(first) * p.rows + row;
  // chunks is a power of two (decode_combine_grid doubles it; decode_combine_many_chunks too): shifts, not the
  // ~25-instruction integer divisions of a run-time divisor, on this latency-bound path after the wait.
  static_assert(kDimV / 4 == (1 << kLog2Quads), "a row is 2^kLog2Quads float4 lanes");
  const int sh = __ffs(chunks) - 1;
  const int q4 = (kDimV / 4) >> sh, lanes = (kCombineThreads / (kDimV / 4)) << sh;
  const int f = threadIdx.x & (q4 - 1), sl = threadIdx.x >> (kLog2Quads - sh);
  const int off = chunk * (kDimV >> sh) + 4 * f;  // partials offset (partials.h), not a column
  const PT* src = reinterpret_cast<const PT*>(p.o_accum) + (static_cast<int64_t>(first) * p.rows + row) * kDimV + off;
  const int64_t stride = static_cast<int64_t>(p.rows) * kDimV;
  float m = -INFINITY, s = 0.f;  // running max of this thread's splits and sum of exp(lse - m)
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);  // sum of exp(lse - m) * partial
  for (int k0 = sl; k0 < n; k0 += KB * lanes) {
    float4 v[KB];
    float l[KB];
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const int k = min(k0 + j * lanes, n - 1);  // past n: repeat the last split, masked below
      v[j] = PartialValue<PT>::ld4(src + k * stride);
      l[j] = lse_k[static_cast<int64_t>(k) * p.rows];
    }
    float mb = m;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      if (k0 + j * lanes >= n) l[j] = -INFINITY;
      mb = fmaxf(mb, l[j]);
    }
    if (mb == -INFINITY) continue;  // no visible key so far (then s and acc are still 0)
    const float r = merge_weight(m, mb);
    s *= r;
    acc.x *= r;
    acc.y *= r;
    acc.z *= r;
    acc.w *= r;
#pragma unroll
    for (int j = 0; j < KB; ++j) {
      const float w = merge_weight(l[j], mb);  // l = -inf (masked or empty split): 0
      s += w;
      acc.x += w * v[j].x;
      acc.y += w * v[j].y;
      acc.z += w * v[j].z;
      acc.w += w * v[j].w;
    }
    m = mb;
  }
  sm.m[threadIdx.x] = m;
  sm.s[threadIdx.x] = s;
  sm.acc[threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.x < q4) {
    float mx = -INFINITY;
    for (int j = 0; j < lanes; ++j) mx = fmaxf(mx, sm.m[threadIdx.x + j * q4]);
    const bool empty = mx == -INFINITY;  // no visible key in any split
    float sum = 0.f;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!empty) {
      for (int j = 0; j < lanes; ++j) {
        const int i = threadIdx.x + j * q4;
        const float e = merge_weight(sm.m[i], mx);
        sum += sm.s[i] * e;
        o.x += sm.acc[i].x * e;
        o.y += sm.acc[i].y * e;
        o.z += sm.acc[i].z * e;
        o.w += sm.acc[i].w * e;
      }
    }
    const float inv = row_inv(!empty, sum);
    store_partial_quad<Traits>(p, b, row, off, make_float4(o.x * inv, o.y * inv, o.z * inv, o.w * inv));
    if (threadIdx.x == 0 && chunk == 0) store_lse(p, b, row, row_lse(!empty, sum, mx));
  }
}

// Few splits, GROUPS items at once: the CTA's threads form GROUPS groups of G = 256 / GROUPS, group g
// merges item g of the batch, its thread t owning the float2 pairs t, t + G, ... of the partials (GROUPS of
// them, consecutive threads on consecutive 8 bytes; each written to its logical columns, partial_pair_col: the
// pairs 2 G j apart are whole 16-column groups apart, G >= 32).
// Loads go out in batches of KB splits x GROUPS pairs (8 loads in flight per thread at GROUPS 1) with indices past n
// repeating the last split at weight 0. GROUPS == 1 is the whole CTA on one row, the latency-bound batch-1
// case; GROUPS == 8 (one warp per row) serves a CTA with many items to merge (h_q 128 · b32: ~8 rows of two
// splits per CTA), whose rows then overlap instead of running one after the other.
// The first load batch of partials is issued with the lse loads, before the weights are computed from them (it
// does not depend on them), so a row of up to KB splits costs one memory round trip after the decode instead of
// two. Session 7 run 2 (NOTES_plan.md), with the item read before the wait too: -0.6 to -1.1 us on every row the
// one-row-per-CTA grid serves (h16 b1 / b32, h128 b1; fp8 and bf16). Only that grid calls this (GROUPS 1); the
// list kernel merges its few-split rows with combine_few_online (the same early loads there, with w[] live
// beside them, spilled 148 bytes at GROUPS 8).
// MAX_N: the most splits a row it merges may have (w[] holds their weights).
template <class Traits, class PT, int GROUPS, int MAX_N>
__device__ __forceinline__ void combine_few_group(const DecodeKernelParams& p, int b, int row, int first, int n,
                                                  int t) {
  constexpr int G = kCombineThreads / GROUPS, J = GROUPS;
  constexpr int KB = 16 / J < kFewSplits ? 16 / J : kFewSplits;  // 8 splits a load batch: rows of <= 8 as before
  static_assert(MAX_N % KB == 0, "whole load batches");
  if (n == 0) {  // seqlen 0: no keys
    store_empty_row<Traits, J>(p, b, row, t);
    return;
  }
  const float* lse_k = p.lse_accum + static_cast<int64_t>(first) * p.rows + row;
  const PT* src = reinterpret_cast<const PT*>(p.o_accum) + (static_cast<int64_t>(first) * p.rows + row) * kDimV + 2 * t;
  const int64_t stride = static_cast<int64_t>(p.rows) * kDimV;
  float2 v0[KB][J];  // batch 0 of the partials, loaded before the weights
#pragma unroll
  for (int kk = 0; kk < KB; ++kk)
#pragma unroll
    for (int j = 0; j < J; ++j) v0[kk][j] = PartialValue<PT>::ld2(src + min(kk, n - 1) * stride + 2 * G * j);
  float w[MAX_N];
#pragma unroll
  for (int k = 0; k < MAX_N; ++k) w[k] = lse_k[static_cast<int64_t>(k < n ? k : n - 1) * p.rows];
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < MAX_N; ++k) mx = fmaxf(mx, w[k]);
  const bool empty = mx == -INFINITY;  // no visible key in any split
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < MAX_N; ++k) {
    w[k] = empty || k >= n ? 0.f : merge_weight(w[k], mx);
    sum += w[k];
  }
  const float inv = row_inv(!empty, sum);
  float2 acc[J];
#pragma unroll
  for (int j = 0; j < J; ++j) acc[j] = make_float2(0.f, 0.f);
#pragma unroll
  for (int k0 = 0; k0 < MAX_N; k0 += KB) {
    if (k0 >= n) break;
    float2 v[KB][J];
#pragma unroll
    for (int kk = 0; kk < KB; ++kk)
#pragma unroll
      for (int j = 0; j < J; ++j)
        v[kk][j] = k0 == 0 ? v0[kk][j] : PartialValue<PT>::ld2(src + min(k0 + kk, n - 1) * stride + 2 * G * j);
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
      const float wk = w[k0 + kk] * inv;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        acc[j].x += wk * v[kk][j].x;
        acc[j].y += wk * v[kk][j].y;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < J; ++j) store_pair<Traits>(p, b, row, partial_pair_col(2 * t) + 2 * G * j, acc[j]);
  if (t == 0) store_lse(p, b, row, row_lse(!empty, sum, mx));
}

// Few splits in the list kernel, GROUPS items at once (groups and column pairs as combine_few_group): each load
// batch of KB splits brings its lse values and its partials together (the partials' addresses need only first /
// n, which the list carries), and the group keeps a running (max, sum, weighted sum) rescaled per batch as
// combine_many does, so a row of up to KB splits (h_q 128 · b32: 2) costs one memory round trip after the wait,
// and no w[kFewSplits] array is live beside the partials (ptxas: GROUPS 8 / 4 no spills, 2 / 1 16 / 4 bytes).
// Session 7 comb2 runs 1 / 2 (NOTES_plan.md), with the lists built before the wait: -0.8 to -1.8 us on h_q 128 b32.
// The inputs come in registers (FewArgs, copied out of the __grid_constant__ params by the list kernel): read
// through a reference to p, every generic output store may alias p, so ptxas reloaded p.out and p.rows before each
// store (a load -> address -> store chain per store, 8 per row at GROUPS 8); now the stores go back to back from one
// base, and ptxas spills nothing in any GROUPS (it spilled 4-20 bytes at GROUPS 1 / 2 before). Session 10 merge
// run 3 (NOTES_plan.md), compile-time A/B in one call, 4 passes: h_q 128 b32 s512 / s4096 / s8192 bf16 -3.85 /
// -2.4 / -0.5 us, fp8 -2.0 / -1.75 / -1.7; the combine alone (ncu, bf16 s4096) 10.56 -> 9.92 us. Loading every
// partial before the lse math instead (in registers, or staged by cp.async in shared memory) was 3-8 us slower
// (runs 2: spills of 80-144 bytes, 42 KB of shared memory per CTA): with 32 warps per SM the per-warp lse ->
// partials chain is hidden by the other warps.
template <class PT>
struct FewArgs {
  const PT* o_accum;       // [max_splits, rows, 512] fp32 or bf16 (PartialValue, partials.h), partials.h column order
  const float* lse_accum;  // [max_splits, rows] fp32
  uint16_t* out;           // [b, rows, 512] 16-bit
  float* lse;              // [b, h_q, s_q]
  int rows, h_q, s_q;
};

template <class Traits, class PT, int GROUPS>
__device__ __forceinline__ void combine_few_online(const FewArgs<PT>& a, int b, int row, int first, int n, int t) {
  constexpr int G = kCombineThreads / GROUPS, J = GROUPS;
  constexpr int KB = 16 / J < kFewSplits ? 16 / J : kFewSplits;
  uint16_t* o = a.out + (static_cast<int64_t>(b) * a.rows + row) * kDimV;
  float* lse_out = a.lse + (static_cast<int64_t>(b) * a.h_q + row % a.h_q) * a.s_q + row / a.h_q;
  if (n == 0) {  // seqlen 0: no keys (out 0, lse -inf)
#pragma unroll
    for (int j = 0; j < J; ++j) *reinterpret_cast<uint32_t*>(o + 2 * (t + G * j)) = Traits::pack(0.f, 0.f);
    if (t == 0) *lse_out = -INFINITY;
    return;
  }
  const float* lse_k = a.lse_accum + static_cast<int64_t>(first) * a.rows + row;
  const PT* src = a.o_accum + (static_cast<int64_t>(first) * a.rows + row) * kDimV + 2 * t;
  const int64_t stride = static_cast<int64_t>(a.rows) * kDimV;
  float m = -INFINITY, s = 0.f;  // running max of the lse values so far and sum of exp(lse - m)
  float2 acc[J];                 // sum of exp(lse - m) * partial
#pragma unroll
  for (int j = 0; j < J; ++j) acc[j] = make_float2(0.f, 0.f);
  for (int k0 = 0; k0 < n; k0 += KB) {
    float2 v[KB][J];
    float l[KB];
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
      const int k = min(k0 + kk, n - 1);  // past n: repeat the last split, masked below
      l[kk] = lse_k[static_cast<int64_t>(k) * a.rows];
#pragma unroll
      for (int j = 0; j < J; ++j) v[kk][j] = PartialValue<PT>::ld2(src + k * stride + 2 * G * j);
    }
    float mb = m;
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
      if (k0 + kk >= n) l[kk] = -INFINITY;
      mb = fmaxf(mb, l[kk]);
    }
    if (mb == -INFINITY) continue;  // no visible key so far (s and acc still 0)
    const float r = merge_weight(m, mb);
    s *= r;
#pragma unroll
    for (int j = 0; j < J; ++j) {
      acc[j].x *= r;
      acc[j].y *= r;
    }
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
      const float w = merge_weight(l[kk], mb);  // l = -inf (masked or empty split): 0
      s += w;
#pragma unroll
      for (int j = 0; j < J; ++j) {
        acc[j].x += w * v[kk][j].x;
        acc[j].y += w * v[kk][j].y;
      }
    }
    m = mb;
  }
  const bool empty = m == -INFINITY;  // no visible key in any split
  const float inv = row_inv(!empty, s);
#pragma unroll
  for (int j = 0; j < J; ++j)
    *reinterpret_cast<uint32_t*>(o + partial_pair_col(2 * t) + 2 * G * j) =
        Traits::pack(acc[j].x * inv, acc[j].y * inv);
  if (t == 0) *lse_out = row_lse(!empty, s, m);
}

}  // namespace mla::sm90::decode

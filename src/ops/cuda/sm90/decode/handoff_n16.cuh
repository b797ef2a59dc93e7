#pragma once
// The softmax bookkeeping and the scorer -> accumulator hand-off shared by the three 16-row wgmma decode kernels
// (decode/kernel_n16ws.cuh, decode_fp8/kernel_h16.cuh, decode_fp8ds/kernel_ws16.cuh). All put the 64 keys (or V
// dims) in the wgmma M and the 16 query rows in N, so a thread's m64n16 accumulator d[4j + 2h + e] is (M row 16w + g + 8h, query row
// 8j + 2t + e): its 4 query rows are row_of(r, t), r = 2j + e, each held by the 8 lanes g = 0..7 of a quad column,
// in d[i] and d[i + 2] with i = 4(r >> 1) + (r & 1). Exchange buffers are per P buffer (`buf`, page parity):
//   red   float [2][16 rows][4 warps]  the scorer warps' row maxima of a page
//   lsum  float [2][16 rows][4 warps]  the scorer warps' row sums at a segment end
//   mfin  float [2][16 rows]           the row max at a segment end
// Inline functions only: the kernels compile to the same code as with these lines written in place.
#include <cstdint>

#include "mla/ops/decode_running_max.h"
#include "mla/ops/plan_decode.h"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode/smem_n16.h"
#include "ops/cuda/sm90/decode/tma.h"

namespace mla::sm90::decode::n16 {

// Kernel entry: lets the dependent combine grid be scheduled as SMs free up (it waits on griddepcontrol.wait
// before reading any result) and puts the cursor on this CTA's plan part; false for an empty part (more CTAs
// than work).
__device__ __forceinline__ bool begin_part(const DecodeKernelParams& p, PartCursor& c) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  return c.init_part(p);
}

// The page ring's mbarriers: full[s] at base + 8s completes on one arrival plus the page's bytes; empty[s] at
// base + 8(kStages + s) on one arrival per consumer warp. init() by thread 0 before the CTA barrier; the caller
// fences the inits (mbar_init_fence) after any barriers of its own.
template <int kStages>
struct RingBars {
  uint32_t base;
  __device__ uint32_t full(int s) const { return base + 8 * s; }
  __device__ uint32_t empty(int s) const { return base + 8 * (kStages + s); }
  __device__ void init(int consumer_warps) const {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);
      mbar_init(empty(s), consumer_warps * kRcArrivalsPerWarp);  // kRcArrivalsPerWarp: tma.h
    }
  }
};
// The page ring plus the Q slots' q_full barriers at base + 8 (2 kStages + q), one arrival plus the tile's bytes.
template <int kStages, int kQSlots>
struct RingQBars : RingBars<kStages> {
  __device__ uint32_t q_full(int q) const { return this->base + 8 * (2 * kStages + q); }
};

// First query row of this CTA's head tile among a sequence's s_q * h_q rows: tiles of 16 * kRowBoxes rows along
// grid.y. The 16- and 32-row kernels run a single tile (h_q 16 / 32) or narrow tiles (16 rows of h_q 64 / 128 in steps
// with few pages, decode_plan_narrow_tiles); every row index they store or load from global memory is offset by it.
template <int kRowBoxes = 1>
__device__ __forceinline__ int tile_row0() {
  return static_cast<int>(blockIdx.y) * 16 * kRowBoxes;
}

// Q tiles, run by scorer thread 0: the n-th sequence the part visits (empty ones are skipped as the part cursor skips
// them) into slot n % kQSlots as kSlabs x kRowBoxes boxes of 16 rows x kSlabCols elements (128 bytes, 128B swizzle)
// through p.tmap_q, completing on q_full[slot]; box k of a slab holds the tile's rows 16k .. 16k + 15, 2048 bytes
// into it (kRowBoxes 2: the fp8 kernel's 32-row tiles). The scorer issues sequences 0 and 1 up front and n + 2 once
// all its warps are past n's last S, so the Q tile never waits for the page stream's producer.
template <int kSlabs, int kSlabCols, int kQSlabBytes, int kQSlots, int kRowBoxes = 1>
struct QLoader {
  static_assert(kQSlabBytes == kRowBoxes * 2048, "a slab holds kRowBoxes boxes of 16 rows x 128 bytes");
  PartCursor c;  // the first sequence whose Q tile is not issued yet
  int n = 0;
  // Sequences 0 and 1 of the part, before the scorer's first page.
  template <class Bars>
  __device__ __forceinline__ void start(const DecodeKernelParams& p, const Bars& bars, uint32_t s_q0) {
    static_assert(kQSlots == 2, "sequences 0 and 1 up front, n + 2 after n");
    issue(p, bars, s_q0);
    issue(p, bars, s_q0);
  }
  template <class Bars>
  __device__ __forceinline__ void issue(const DecodeKernelParams& p, const Bars& bars, uint32_t s_q0) {
    if (!c.valid()) return;
    const int slot = n % kQSlots;
    const uint32_t dst = s_q0 + slot * kSlabs * kQSlabBytes;
    mbar_expect_tx(bars.q_full(slot), kSlabs * kQSlabBytes);
#pragma unroll
    for (int slab = 0; slab < kSlabs; ++slab)
#pragma unroll
      for (int k = 0; k < kRowBoxes; ++k)
        tma_load_2d(dst + slab * kQSlabBytes + k * 2048, &p.tmap_q, bars.q_full(slot), slab * kSlabCols,
                    c.b * p.rows + tile_row0<kRowBoxes>() + 16 * k);
    ++n;
    c.blk = c.hi - 1;  // the sequence's last block: advance() settles on the next non-empty sequence
    c.advance(p);
  }
};

// A scorer thread's running max (raw scores) and its share of the running sum, for rows r = 2j + e, at a sequence's
// start.
__device__ __forceinline__ void reset_rows(float (&m)[4], float (&l)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) m[r] = -INFINITY, l[r] = 0.f;
}
struct ScorerState {
  float m[4];
  float l[4];
  __device__ __forceinline__ void reset() { reset_rows(m, l); }
};

// Parity of the phase that use number n (0, 1, ...) of a ring slot completes, in a ring of `slots`.
__device__ __forceinline__ uint32_t phase_of(int n, int slots) { return static_cast<uint32_t>(n / slots) & 1u; }

__device__ __forceinline__ int row_of(int r, int t) { return 8 * (r >> 1) + 2 * t + (r & 1); }
__device__ __forceinline__ int elem_of(int r) { return 4 * (r >> 1) + (r & 1); }

// Scorer, after S^T: masks keys at or past `limit` (page-local; key 16w + g + 8h of s[4j + 2h + e]) to -inf and
// returns the warp's max (its 16 keys) of one of this quad column's 4 rows: row r = warp_max_row(g) of lane g (lanes
// g and g + 4 hold the same one). 4 shuffles instead of 12: each round of the butterfly over the 8 lanes g sends the
// partner the half of the rows the lane gives up and keeps the other half (after xor 4, g bit 0, a lane holds 2 rows;
// after xor 8, g bit 1, one; xor 16 completes it). The max is exact, so this is the 12-shuffle form's result to the
// bit; H200 (NOTES_fp8.md session 10, fp8s runs 1-2): −0.1…−0.35 µs on b32 / b128 rows alone.
__device__ __forceinline__ int warp_max_row(int g) { return 2 * (g & 1) + ((g >> 1) & 1); }
__device__ __forceinline__ float mask_and_warp_max(float (&s)[8], int limit, int w, int g) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (16 * w + g + 8 * h >= limit) {
#pragma unroll
      for (int j = 0; j < 2; ++j) s[4 * j + 2 * h] = s[4 * j + 2 * h + 1] = -INFINITY;
    }
  }
  float v[4];  // [r = 2j + e]
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) v[2 * j + e] = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
  const bool b0 = g & 1, b1 = g & 2;
  // Round 1: g bit 0 clear keeps rows 0, 1 and sends 2, 3; set keeps 2, 3.
  const float k0 = b0 ? v[2] : v[0], k1 = b0 ? v[3] : v[1];
  const float u0 = fmaxf(k0, __shfl_xor_sync(0xffffffffu, b0 ? v[0] : v[2], 4));
  const float u1 = fmaxf(k1, __shfl_xor_sync(0xffffffffu, b0 ? v[1] : v[3], 4));
  // Round 2: g bit 1 clear keeps row 2 b0 (u0), set keeps 2 b0 + 1 (u1).
  const float x = fmaxf(b1 ? u1 : u0, __shfl_xor_sync(0xffffffffu, b1 ? u0 : u1, 8));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
}

// Scorer: this warp's row maxima (the same in all 8 lanes of a row) into red[row][w], written by lanes g == 0.
__device__ __forceinline__ void store_row_max(float* red, const float (&mx)[4], int w, int g, int t) {
  if (g == 0) {
#pragma unroll
    for (int r = 0; r < 4; ++r) red[row_of(r, t) * 4 + w] = mx[r];
  }
}

// Scorer, after the exchange barrier: the running row max over the 4 warps' page maxima, the rescale alpha of
// the previous partial sums and m * scale_log2 (subtracted inside exp2).
// kExactOne (the fp8 and 16-bit 16-row kernels): alpha = 1 exactly where the row's max did not move. Computed, it is
// exp2(m s - m_new s), and ptxas may fuse that into an FFMA whose result is the rounding error of m_new s, not 0, so
// alpha comes out 1 + a few ulp; their accumulators skip the O rescale when every alpha of a warp is 1.
// kFtzExp (the fp8 and 16-bit 16-row kernels): the exps as ex2.approx.ftz. exp2f is the same MUFU.EX2 plus a compare, a halving
// and a squaring per call for results below 2^-126 (12 per page on the scorer's path); those results round to 0 in an
// e4m3 P and vanish in a row sum >= 1, so the fp8 kernel's outputs are the same to the bit (NOTES_fp8.md session 10,
// fp8s); a 16-bit P loses values below 2^-126 that bf16 could hold, < 2^-126 against a row sum >= 1.
template <bool kFtzExp>
__device__ __forceinline__ float exp2_sel(float x) {
  if constexpr (kFtzExp) return ex2_ftz(x);  // ptx.h
  else return exp2f(x);
}

// slack_log2 (a constant): the fp8 kernel's lazy running max (mla/ops/decode_running_max.h); 0 keeps the exact max in
// the expression these kernels had before it (the same value as decode_running_max's exact form, kept so the 16-bit
// and fp8_ds 16-row kernels compile as they were measured).
template <bool kExactOne = false, bool kFtzExp = false>
__device__ __forceinline__ void update_row_max(const float* red, float (&m)[4], float (&alpha)[4], float (&m_scaled)[4],
                                               float scale_log2, int t, float slack_log2 = 0.f) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const float4 v = *reinterpret_cast<const float4*>(red + row_of(r, t) * 4);
    const float m_new = slack_log2 > 0.f
                            ? decode_running_max(m[r], fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)), scale_log2, slack_log2)
                            : fmaxf(fmaxf(m[r], fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
    // A row that has seen no key yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
    m_scaled[r] = m_new == -INFINITY ? 0.f : m_new * scale_log2;
    alpha[r] = exp2_sel<kFtzExp>(m[r] * scale_log2 - m_scaled[r]);
    if (kExactOne && m_new == m[r]) alpha[r] = 1.f;
    m[r] = m_new;
  }
}

// Scorer: P = exp2(S scale_log2 - m_scaled) and the running row sums of the unrounded P.
template <bool kFtzExp = false>
__device__ __forceinline__ void exp_and_row_sums(const float (&s)[8], float (&pr)[8], float (&l)[4], const float (&alpha)[4],
                                                 const float (&m_scaled)[4], float scale_log2) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int i = elem_of(r);
    pr[i] = exp2_sel<kFtzExp>(fmaf(s[i], scale_log2, -m_scaled[r]));
    pr[i + 2] = exp2_sel<kFtzExp>(fmaf(s[i + 2], scale_log2, -m_scaled[r]));
    l[r] = l[r] * alpha[r] + (pr[i] + pr[i + 2]);
  }
}

// Scorer, at a segment end: the row sums over the warp's 8 lanes of a row into lsum[buf][row][w], the row max
// into mfin[buf][row] (warp 0).
__device__ __forceinline__ void publish_segment_totals(const float (&l)[4], const float (&m)[4], float* s_lsum,
                                                       float* s_mfin, int buf, int w, int g, int t) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float lr = l[r];
    lr += __shfl_xor_sync(0xffffffffu, lr, 4);
    lr += __shfl_xor_sync(0xffffffffu, lr, 8);
    lr += __shfl_xor_sync(0xffffffffu, lr, 16);
    const int row = row_of(r, t);
    // racecheck: hand-off (the scorer's segment totals, read by the accumulator after the P_full named barrier)
    if (g == 0) s_lsum[(buf * 16 + row) * 4 + w] = lr;
    if (g == 0 && w == 0) s_mfin[buf * 16 + row] = m[r];
  }
}

// Accumulator, at a segment end: the row totals, read before P_empty[buf] lets the scorer overwrite them.
__device__ __forceinline__ void read_segment_totals(const float* s_lsum, const float* s_mfin, int buf, int t,
                                                    float (&lsum)[4], float (&mfin)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row_of(r, t);
    // racecheck: hand-off (read after the P_full named barrier)
    const float4 v = *reinterpret_cast<const float4*>(s_lsum + (buf * 16 + row) * 4);
    lsum[r] = (v.x + v.y) + (v.z + v.w);
    mfin[r] = s_mfin[buf * 16 + row];
  }
}

// The accumulator side of a 16-row kernel's hand-off: the scorer's exchange buffers (read-only here; row group 0's at
// the layout's offsets) and the part's first sequence and its split (for segment_dest).
struct AccExchange {
  const float* alpha;  // [2][16] per row group
  const float* lsum;   // [2][16][4]
  const float* mfin;   // [2][16]
  int first_batch, first_split;
};
__device__ __forceinline__ AccExchange acc_exchange(const DecodeKernelParams& p, const uint8_t* smem,
                                                    const SmemLayoutN16& L) {
  const int32_t* rec = part_record(p);
  return {reinterpret_cast<const float*>(smem + L.alpha_offset), reinterpret_cast<const float*>(smem + L.lsum_offset),
          reinterpret_cast<const float*>(smem + L.mfin_offset), rec[kPartBeginBatch], rec[kPartFirstSplit]};
}

// Where a segment of sequence b goes: straight to out (n_splits 1) or into partial slot `slot` (this part's split
// of b: first_split for the part's first sequence, 0 for the others, which the part starts).
struct SegmentDest {
  int n_splits, slot;
};
__device__ __forceinline__ SegmentDest segment_dest(const DecodeKernelParams& p, int b, int first_batch, int first_split) {
  return {p.split_offsets[b + 1] - p.split_offsets[b], p.split_offsets[b] + (b == first_batch ? first_split : 0)};
}

}  // namespace mla::sm90::decode::n16

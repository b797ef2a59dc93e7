#pragma once
// How Hopper's e4m3 wgmma adds up, one k32 step D = A B + C of one output element, for the reference
// (MlaDecodeRefOptions::fp8_mma_sum, mla/ops/mla_decode.h).
//
// The model: the step's 32 products (exact: e4m3 x e4m3 has 8 significant bits) and the accumulator C are aligned to
// the largest exponent among them, e (largest magnitude in [2^e, 2^(e+1))); each product is truncated toward zero to a
// multiple of 2^(e-13), i.e. the largest keeps 14 bits; they add up with C, and D keeps 13 mantissa bits (e8m13,
// truncated). C itself is cut like the products only where the wgmma takes its A operand from registers (RS form); with
// both operands in shared memory (SS form) it joins whole. The DeepSeek-V3 report describes the alignment and the 14
// bits; SageAttention2 the 13-bit accumulator; the SS / RS difference is this repository's fit (session 62).
// Measured (session 62, bench/decode/NOTES.md; bench/decode/repro/fp8_acc_emulation.cpp, fp8_model_vs_n1.cpp): over
// the worst lse rows of the 67 DeepSeek-like cases of session 61's n1 (H200), the model gives each row's lse error as
// measured to 2-3 digits (64 of 67 within 0.3 %); k16 steps come near (0.82-1.10), while 13 or 15 bits, C left out of
// the alignment, or floored terms are off by 0.3-0.7x or 1.2-30x, and float sums miss the errors entirely. Cutting C in
// every step or in none each miss one of three one-key rows that the SS / RS rule fits. On the data of three cases of
// one class, the split reference with the model stands off float sums by what n1's kernels did (out rel_l2, max_abs and
// its element, worst row and lse to 3-4 digits).
// Not exact (session 63, H100, one-key sequences of 11 configs, every kernel family): the model matches 78-89 % of the
// kernels' scores to the unit, and C cut in every step matches 1-4 % more in every config, so the SS / RS rule is not
// what the hardware does; the misses are mostly a few units. Against it the fp8 suite's errors drop 3-13x from float
// sums (out rel_l2 max 7.6e-3, lse 9.2e-4 over 439 cases), which its limits use (tests/gpu/test_mla_decode_fp8.cu).
//
// Cost (this machine, one core, session 63): a score 0.49 us (four keys side by side; 0.88 before session 63) against a
// float dot product's 0.27, one key's P.V row 0.20 us (0.87) against 0.04; session 62 measured the decode reference ~4x
// longer with the model than with float sums (2 cores: b128 h_q 16 at 4096 keys 5.8 s against 1.5). What session 63
// changed (the same bits, NaN as NaN: 80000 scores and 3 M P.V columns with NaNs, and fp8_model_vs_n1's output, compared
// against the form before; a NaN result's sign bit may differ, as GCC's order of the adds decides which NaN survives)
// is only how GCC compiles it: wgmma_e4m3_trunc and the P.V passes below. Every value here fits a float exactly: the
// scaled terms are integers below 2^14 and at most 33 of them add up (< 2^20).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mla::ref {

// D's 13 mantissa bits: the low 10 of a float's 23 cleared (sign and magnitude: toward zero). NaN stays NaN.
inline float wgmma_e4m3_keep13(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0xFFFFFC00u;
  std::memcpy(&x, &u, 4);
  return x;
}

// The same for a sum held in a double, returned as the float it then is (13 of the double's 52 mantissa bits kept).
inline float wgmma_e4m3_keep13(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  u &= ~((uint64_t{1} << 39) - 1);
  std::memcpy(&x, &u, 8);
  return static_cast<float>(x);
}

// t truncated toward zero, for the scaled terms (|t| < 2^14): a conversion pair (std::trunc is a call before SSE4.1).
// Anything of 2^31 or more in magnitude (NaN) is zeroed first, so the conversion is defined; the callers carry NaN
// through on the side (x * 0 is NaN only for NaN, the terms are never infinite). The zeroing is an AND with a mask
// from an integer compare of the exponent field: with a conditional instead (a float compare and a select, as before
// session 63) GCC vectorized none of the loops around it (the conversion may trap, so it is not speculated past a
// branch), and S took 0.88 us a score, P.V 0.87 us a key row (this machine, one core).
inline float wgmma_e4m3_trunc(float t) {
  uint32_t u;
  std::memcpy(&u, &t, 4);
  u &= 0u - static_cast<uint32_t>((u & 0x7F800000u) < (158u << 23));  // biased exponent < 158: |t| < 2^31
  std::memcpy(&t, &u, 4);
  return static_cast<float>(static_cast<int32_t>(t));
}

// 2^(13 - e) and 2^(e - 13) for the largest magnitude `top` > 0 of a step, top in [2^e, 2^(e+1)): built from top's
// exponent field (ilogb and ldexp cost more than the step's 32 products), ldexp only for tops below 2^-113.
inline void wgmma_e4m3_scales(float top, float* scale, float* ulp) {
  uint32_t u;
  std::memcpy(&u, &top, 4);
  const uint32_t biased = (u >> 23) & 0xFFu;  // e + 127
  if (biased >= 14u && biased <= 254u) {
    const uint32_t s = (267u - biased) << 23, q = (biased - 13u) << 23;
    std::memcpy(scale, &s, 4);
    std::memcpy(ulp, &q, 4);
    return;
  }
  const int e = std::ilogb(top);
  *scale = std::ldexp(1.f, 13 - e);
  *ulp = std::ldexp(1.f, e - 13);
}

// C plus a step's terms, kept to 13 mantissa bits: sum_ulps (an integer count of ulp, exact in a float) plus C, in a
// double (C's 14 bits and the sum's 20 fit its 53 unless C is 2^30 times smaller than the step's largest term, where
// C cannot move the cut result).
inline float wgmma_e4m3_finish(float c, float sum_ulps, float ulp) {
  return wgmma_e4m3_keep13(double(c) + double(sum_ulps) * double(ulp));
}

// One step for one output element: c plus the n (<= 32) products in prods; cut_c: C cut with the products (RS form).
inline float wgmma_e4m3_step(float c, const float* prods, int n, bool cut_c) {
  float top = std::fabs(c), nan = c * 0.f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(prods[i]);
    top = a > top ? a : top;
    nan += prods[i] * 0.f;
  }
  if (!(top > 0.f)) return c + nan;  // every term zero
  float scale, ulp;
  wgmma_e4m3_scales(top, &scale, &ulp);
  float sum = cut_c ? wgmma_e4m3_trunc(c * scale) : 0.f;
  for (int i = 0; i < n; ++i) sum += wgmma_e4m3_trunc(prods[i] * scale);
  return wgmma_e4m3_finish(cut_c ? 0.f : c, sum, ulp) + nan;
}

// A full step of 32 products, in 8 lanes: the maximum and the (exact, integer) sum do not depend on the order, so
// lane-wise partials give the same result as wgmma_e4m3_step, in a form the compiler vectorizes.
inline float wgmma_e4m3_step32(float c, const float* prods, bool cut_c) {
  constexpr int kLanes = 8;
  float top[kLanes], nan[kLanes], sum[kLanes];
  for (int j = 0; j < kLanes; ++j) {
    top[j] = 0.f;
    nan[j] = 0.f;
  }
  for (int i = 0; i < 32; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float a = std::fabs(prods[i + j]);
      top[j] = a > top[j] ? a : top[j];
      nan[j] += prods[i + j] * 0.f;
    }
  float t = std::fabs(c), bad = c * 0.f;
  for (int j = 0; j < kLanes; ++j) {
    t = top[j] > t ? top[j] : t;
    bad += nan[j];
  }
  if (!(t > 0.f)) return c + bad;
  float scale, ulp;
  wgmma_e4m3_scales(t, &scale, &ulp);
  for (int j = 0; j < kLanes; ++j) sum[j] = 0.f;
  for (int i = 0; i < 32; i += kLanes)
    for (int j = 0; j < kLanes; ++j) sum[j] += wgmma_e4m3_trunc(prods[i + j] * scale);
  float total = cut_c ? wgmma_e4m3_trunc(c * scale) : 0.f;
  for (int j = 0; j < kLanes; ++j) total += sum[j];
  return wgmma_e4m3_finish(cut_c ? 0.f : c, total, ulp) + bad;
}

// The 576-dim scores of e4m3 values q . k[n], n < kN, in the kernels' 18 k32 steps, dims in order; steps from rs_from
// on take Q from registers (RS form: the 64-row kernels' last 6 or 8 steps, config_ws.h kQRegSteps; 18: none). Each
// score is a chain of 18 dependent steps; kN of them side by side overlap their latencies (4: 0.49 us a score against
// 0.60 one by one, this machine).
template <int kN>
inline void wgmma_e4m3_dot576_n(const float* q, const float* const* k, int rs_from, float* out) {
  float acc[kN] = {}, prods[kN][32];
  for (int k0 = 0; k0 < 576; k0 += 32) {
    for (int n = 0; n < kN; ++n)
      for (int i = 0; i < 32; ++i) prods[n][i] = q[k0 + i] * k[n][k0 + i];
    for (int n = 0; n < kN; ++n) acc[n] = wgmma_e4m3_step32(acc[n], prods[n], k0 / 32 >= rs_from);
  }
  for (int n = 0; n < kN; ++n) out[n] = acc[n];
}
inline float wgmma_e4m3_dot576(const float* q, const float* k, int rs_from = 18) {
  float s;
  wgmma_e4m3_dot576_n<1>(q, &k, rs_from, &s);
  return s;
}

// P.V's two passes over one key's terms p v[d] (wgmma_e4m3_pv_step): each column's largest magnitude (and NaN), then its
// terms cut to the column's grid. Loops of their own with restrict-qualified arrays, so they vectorize without a check
// of the arrays' overlap per key.
inline void wgmma_e4m3_pv_top(float* __restrict top, float* __restrict nan, float p, const float* __restrict v,
                              int n_cols) {
  for (int d = 0; d < n_cols; ++d) {
    const float x = p * v[d], a = std::fabs(x);
    top[d] = a > top[d] ? a : top[d];
    nan[d] += x * 0.f;
  }
}
inline void wgmma_e4m3_pv_add(float* __restrict sum, const float* __restrict scale, float p, const float* __restrict v,
                              int n_cols) {
  for (int d = 0; d < n_cols; ++d) sum[d] += wgmma_e4m3_trunc(p * v[d] * scale[d]);
}

// One P.V step of a row: o[d] = step(o[d], p[t] * v[t][d] for t < n) for d < n_cols, n <= 32 keys; cut_c: the RS form
// (the 16-row kernel's P.V takes V^T from registers; the 64-row kernels' P.V is SS). Keys with p 0 (masked, or P
// underflowed) add no term, whatever their V holds. scratch: 3 x n_cols floats, apart from o and every v[t] (the passes
// take them as restrict-qualified arrays).
inline void wgmma_e4m3_pv_step(float* o, const float* p, const float* const* v, int n, int n_cols, bool cut_c,
                               float* scratch) {
  float *scale = scratch, *nan = scratch + n_cols, *sum = scratch + 2 * n_cols;
  for (int d = 0; d < n_cols; ++d) {
    scale[d] = std::fabs(o[d]);  // the column's largest magnitude first, its scale below
    nan[d] = o[d] * 0.f;
  }
  for (int t = 0; t < n; ++t)
    if (p[t] != 0.f) wgmma_e4m3_pv_top(scale, nan, p[t], v[t], n_cols);
  for (int d = 0; d < n_cols; ++d) {
    float ulp = 0.f;  // a column of zero terms: scale 0, its sum 0, o unchanged
    if (scale[d] > 0.f) wgmma_e4m3_scales(scale[d], &scale[d], &ulp);
    sum[d] = cut_c ? wgmma_e4m3_trunc(o[d] * scale[d]) : 0.f;
  }
  for (int t = 0; t < n; ++t)
    if (p[t] != 0.f) wgmma_e4m3_pv_add(sum, scale, p[t], v[t], n_cols);
  for (int d = 0; d < n_cols; ++d) {
    const float ulp = scale[d] > 0.f ? 1.f / scale[d] : 0.f;  // a power of two: exact
    o[d] = wgmma_e4m3_finish(cut_c ? 0.f : o[d], sum[d], ulp) + nan[d];
  }
}

}  // namespace mla::ref

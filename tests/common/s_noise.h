#pragma once
// How far each output of an fp8 decode can move under the noise of its scores, per output element.
//
// The fp8 kernels take S = Q K^T on e4m3 wgmma, whose partial sums keep ~14 bits (Hopper's FP8 MMA; the DeepSeek-V3
// report): each score is off by ~eps x M_t, M_t = sum_d |q_d k_td|, the magnitude its partial sums run through, not
// |S_t|. On N(0, 1) data M_t is ~15 x |S_t| and a logit moves by a few 1e-3 nats, nothing next to a P flip. On data
// with outlier channels (DeepSeek-like: q x 3-10 and k_pe x 10-100 on a few channels) a row's logits reach hundreds of
// nats, and a row carried by two keys of nearly equal logits swings between their V rows. Session 61's n1 failed on
// such a row (fp8_b32_h32_sq2_causal_rand1_2048_s3_ds_ws3, seed 1796448581257790, row 1491: two keys at 335.7 / 335.0
// nats, M_t ~500 nats, weights 0.65 / 0.35): the kernel's row was 0.45 off the reference exactly along v1 - v2, i.e. a
// logit difference 1.15 nats off, 1.6e-3 of M. That was the wgmma's sums (session 62, bench/decode/NOTES.md): the
// reference's model of them (src/ops/ref/wgmma_e4m3_sum.h), which reproduces the suite's lse errors to 2-3 digits,
// moves the two keys by -0.44 / +0.47 nats and that row by 0.39 of its norm (n1: 0.45). The fp8 suite now compares the
// wgmma kernels against that model, so this noise leaves the comparison; this header stays the diagnosis of what is
// left when a case fails (independent errors per key, which over-states the output's noise). test_mla_decode_fp8.cu
// prints the eps a failed case would need.
//
// To first order in the logits L_t (nats), out = sum_t w_t v_t with the softmax weights w, so
//   d out_d = sum_t w_t (v_td - out_d) dL_t,
// and with independent errors per key (each S_t is its own dot product) of standard deviation eps M_t (nats),
//   sigma_d = eps sqrt(sum_t (w_t M_t (v_td - out_d))^2),   sigma_lse = eps sqrt(sum_t (w_t M_t)^2).
// fp8_s_noise returns both per unit eps, from the exact softmax of the e4m3 codes (double sums).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "mla/core/fp8.h"
#include "mla/core/mla_shapes.h"
#include "common/decode_data.h"

namespace mla::test {

struct SNoise {
  std::vector<float> out;  // [b, s_q, h_q, 512] (out's layout): sigma_d per unit eps, in output units
  std::vector<float> lse;  // [b, s_q, h_q]: sigma_lse per unit eps, in nats
};

// h: fp8 data (e4m3 q and cache codes). Rows run on up to `threads` threads (the CPU time of one reference pass).
inline SNoise fp8_s_noise(const DecodeHostData& h, float softmax_scale, int threads = 0) {
  const DecodeShape& s = h.shape;
  const int rows = s.batch * s.s_q * s.h_q;
  SNoise r;
  r.out.assign(size_t(rows) * kDimV, 0.f);
  r.lse.assign(rows, 0.f);
  const float* lut = e4m3_decode_table();
  const double to_nats = double(softmax_scale) * s.q_scale * s.k_scale;
  auto one_row = [&](int row, std::vector<double>& L, std::vector<double>& M, std::vector<const uint8_t*>& tok) {
    const int b = row / (s.s_q * s.h_q), i = (row / s.h_q) % s.s_q;
    const int vis = s.visible_keys(b, i);
    if (vis == 0) return;
    const uint8_t* q = &h.q[size_t(row) * kDimQK];
    double qf[kDimQK];
    for (int d = 0; d < kDimQK; ++d) qf[d] = lut[q[d]];
    L.resize(vis);
    M.resize(vis);
    tok.resize(vis);
    double mx = -INFINITY;
    for (int t = 0; t < vis; ++t) {
      tok[t] = h.token(b, t);
      double dot = 0, mag = 0;
      for (int d = 0; d < kDimQK; ++d) {
        const double p = qf[d] * lut[tok[t][d]];
        dot += p;
        mag += std::fabs(p);
      }
      L[t] = dot * to_nats;
      M[t] = mag * to_nats;
      mx = std::max(mx, L[t]);
    }
    double z = 0;
    for (int t = 0; t < vis; ++t) z += (L[t] = std::exp(L[t] - mx));  // L becomes the unnormalised weight
    double o[kDimV] = {}, var[kDimV] = {}, var_lse = 0;
    for (int t = 0; t < vis; ++t) {
      const double w = L[t] / z;
      if (w < 1e-12) continue;  // below anything a bf16 output shows
      for (int d = 0; d < kDimV; ++d) o[d] += w * lut[tok[t][d]];
    }
    for (int t = 0; t < vis; ++t) {
      const double wm = L[t] / z * M[t];
      if (L[t] / z < 1e-12) continue;
      var_lse += wm * wm;
      for (int d = 0; d < kDimV; ++d) {
        const double dv = (lut[tok[t][d]] - o[d]) * wm;
        var[d] += dv * dv;
      }
    }
    for (int d = 0; d < kDimV; ++d) r.out[size_t(row) * kDimV + d] = float(std::sqrt(var[d]) * s.k_scale);
    r.lse[row] = float(std::sqrt(var_lse));
  };
  const int n = std::max(1, std::min(threads > 0 ? threads : int(std::thread::hardware_concurrency()), 16));
  std::vector<std::thread> pool;
  for (int w = 0; w < n; ++w)
    pool.emplace_back([&, w] {
      std::vector<double> L, M;
      std::vector<const uint8_t*> tok;
      for (int row = w; row < rows; row += n) one_row(row, L, M, tok);
    });
  for (auto& t : pool) t.join();
  return r;
}

// got(i) moved towards ref(i) by up to eps x sigma_i (nz.out): what of each difference score noise does not explain.
// Non-finite values pass through unchanged (the comparisons count them).
template <class GotFn, class RefFn>
std::vector<double> beyond_s_noise(size_t n, GotFn got, RefFn ref, const SNoise& nz, double eps) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    const double g = got(i), r = ref(i);
    if (!std::isfinite(g) || !std::isfinite(r)) {
      v[i] = g;
      continue;
    }
    const double d = g - r, allow = eps * nz.out[i];
    v[i] = r + (std::fabs(d) <= allow ? 0.0 : d - std::copysign(allow, d));
  }
  return v;
}

// The smallest eps (to ~1 %) at which passes(beyond_s_noise(..., eps)) holds; 0 if it holds at 0, inf if not at 1.
// passes must be monotone in eps (a larger allowance never fails what a smaller one passes).
template <class GotFn, class RefFn, class Pass>
double s_noise_eps_needed(size_t n, GotFn got, RefFn ref, const SNoise& nz, Pass passes) {
  if (passes(beyond_s_noise(n, got, ref, nz, 0.0))) return 0.0;
  double lo = 1e-7, hi = 1.0;
  if (!passes(beyond_s_noise(n, got, ref, nz, hi))) return INFINITY;
  while (hi / lo > 1.01) {
    const double mid = std::sqrt(lo * hi);
    (passes(beyond_s_noise(n, got, ref, nz, mid)) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace mla::test

#pragma once
// The per-(token, head) arithmetic of merge_attn_states, shared by the CPU reference and the kernel.
#include <cmath>
#include <cstdint>

#include "mla/core/fp8.h"  // float_bits
#include "mla/core/macros.h"

namespace mla::merge {

struct Weights {
  float wa = 0.f, wb = 0.f;  // out = out_a * wa + out_b * wb over the sides that are used
  float lse = 0.f;
  bool use_a = false, use_b = false;  // an empty side is never read (its out may be garbage or NaN)
};

MLA_HD_INLINE bool is_inf(float x) { return (float_bits(x) & 0x7FFFFFFFu) == 0x7F800000u; }

MLA_HD_INLINE Weights weights(float la, float lb) {
  const float kNegInf = -__builtin_huge_valf();
  Weights w;
  // +inf is how some backends mark an empty row; treat it like -inf (vLLM does the same).
  const bool a_empty = is_inf(la), b_empty = is_inf(lb);
  if (a_empty && b_empty) { w.lse = kNegInf; return w; }  // out = 0
  if (b_empty) { w.use_a = true; w.wa = 1.f; w.lse = la; return w; }
  if (a_empty) { w.use_b = true; w.wb = 1.f; w.lse = lb; return w; }
  // A NaN lse makes every comparison false: m is then NaN or the other value, exp(NaN) = NaN, and the NaN
  // reaches out and lse (it is not silently dropped).
  const float m = la > lb ? la : lb;
#if defined(__CUDA_ARCH__)
  const float ea = expf(la - m), eb = expf(lb - m);
  const float s = ea + eb;
  w.lse = m + logf(s);
#else
  const float ea = std::exp(la - m), eb = std::exp(lb - m);
  const float s = ea + eb;
  w.lse = m + std::log(s);
#endif
  w.wa = ea / s;
  w.wb = eb / s;
  w.use_a = w.use_b = true;
  return w;
}

MLA_HD_INLINE float combine(const Weights& w, float a, float b) {
  float o = 0.f;
  if (w.use_a) o = a * w.wa;
  if (w.use_b) o = w.use_a ? o + b * w.wb : b * w.wb;
  return o;
}

}  // namespace mla::merge

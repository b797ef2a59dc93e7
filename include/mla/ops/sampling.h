#pragma once
// sample_tokens: one token per logits row, chosen on the device, so a decode step returns [rows] int32
// instead of [rows, vocab] fp32. The rule, shared by the CUDA kernel and the CPU reference:
//
//   1. A row holding NaN or +inf → kSampleBadLogit; every logit -inf → kSampleAllNegInf (errors, not tokens).
//   2. Greedy (temperature <= 0, or top_k == 1): argmax, the lowest id winning ties -- bit for bit the
//      engine's host sampler (src/engine/sampler.cpp).
//   3. Candidates: top-k (0 < k < vocab) keeps the k largest logits, ties to the lower id. Top-p (< 1)
//      keeps, of those sorted by (logit desc, id asc), the shortest prefix whose mass reaches
//      ceil(top_p · total), mass measured in fixed point: w = round(exp((x − max) / T) · 2^40). Integer
//      sums are exact and order-free, so the cut is the same however the threads add (determinism: a
//      graph replay and an eager run agree), and 2^-40 per token is far below anything top-p resolves.
//   4. Gumbel-max over the candidates: argmax of (x − max) / T + G_i, G_i = −log(−log U_i), U_i a
//      counter-based uniform of (seed, draw_index, token id). That is an exact draw from softmax(x / T)
//      restricted to the candidates, with no normalisation pass and no per-request state: draw i of a
//      request depends only on (seed, i), never on the batch (so batched == single, and a preempted
//      request resumes with the same draws).
//
// The device draws are not the host sampler's (which walks a sorted CDF with one uniform per draw): the
// two samplers agree in distribution, not token for token, except greedy where they agree exactly.
// top-k / top-p are found as thresholds by a block-wide radix select over the row (no sort), 8 bits
// per pass, counting (top-k) or adding fixed-point mass (top-p).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "mla/core/macros.h"
#include "mla/core/status.h"
#include "mla/core/stream.h"
#include "mla/core/tensor.h"

namespace mla {

// One row's parameters: 32 bytes, copied to the device as they are.
struct SamplingRow {
  uint64_t seed = 0;
  int32_t draw_index = 0;   // tokens the request generated before this one
  float temperature = 0.f;  // <= 0 (or NaN): greedy
  int32_t top_k = 0;        // <= 0 or >= vocab: no top-k
  float top_p = 1.f;        // >= 1: no top-p; <= 0 keeps the single best candidate
  int32_t reserved[2] = {0, 0};
};
static_assert(sizeof(SamplingRow) == 32, "SamplingRow is copied to the device as raw bytes");

constexpr int32_t kSampleBadLogit = -1;   // the row holds NaN or +inf
constexpr int32_t kSampleAllNegInf = -2;  // every logit of the row is -inf
// Ids fit the radix select's 24-bit range, and the top-p total of 2^23 candidates of mass <= 2^40 each stays
// below 2^64 (2^24 equal logits would wrap it to 0).
constexpr int64_t kSampleMaxVocab = int64_t{1} << 23;

struct SampleParams {
  TensorView logits;                  // [rows, vocab] fp32, unit column stride, row stride >= vocab
  const SamplingRow* rows = nullptr;  // [rows]
  TensorView tokens;                  // [rows] int32 out: a token id, or kSampleBadLogit / kSampleAllNegInf
};

// Shapes, dtypes and pointers (the rows' contents are not read: on the device they cannot be).
Status validate_sample(const SampleParams& p);

namespace ref {
Status sample_tokens(const SampleParams& p);  // host pointers
}  // namespace ref

namespace cuda {
// Device pointers; one CTA per row; no allocation, no host synchronisation (graph-capturable).
Status sample_tokens(const SampleParams& p, Stream stream);
}  // namespace cuda

// ---- The per-element arithmetic both implementations share. ----
namespace sampling {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
constexpr double kMassScale = 1099511627776.0;  // 2^40: fixed-point unit of top-p mass

// splitmix64's finalizer (the engine's mix64).
MLA_HD_INLINE uint64_t mix64(uint64_t x) {
  x += kGamma;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// One key per (request, draw): the random stream of token ids for that draw is splitmix64 from it.
MLA_HD_INLINE uint64_t row_key(uint64_t seed, int32_t draw_index) {
  return mix64(mix64(seed) ^ mix64(uint64_t(uint32_t(draw_index)) ^ 0xD1B54A32D192ED03ull));
}
// Gumbel noise of token `id`. U's complement v = 1 − U is built from 32 random bits with full relative
// precision near 0 (where the winners' noise lives: large G), then G = −log(−log1p(−v)).
MLA_HD_INLINE float gumbel(uint64_t key, int32_t id) {
  const uint64_t bits = mix64(key + uint64_t(uint32_t(id)) * kGamma);
  float v = float(uint32_t(bits >> 32)) * 0x1p-32f + 0x1p-33f;  // (0, 1)
  v = fminf(v, 0x1.fffffep-1f);                                  // rounding must not reach 1
  return -logf(-log1pf(-v));
}
// (x − max) / T + g, rounded step by step on both sides (no fused multiply-add on the device), so the
// only host/device difference left is the ulp of logf / log1pf.
MLA_HD_INLINE float perturbed(float x, float max, float inv_t, float g) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(__fsub_rn(x, max), inv_t), g);
#else
  volatile float d = (x - max) * inv_t;  // volatile: no contraction into an FMA
  return d + g;
#endif
}
// Top-p mass of one candidate, in units of 2^-40 (exp of a value <= 0, so at most 2^40).
MLA_HD_INLINE uint64_t mass(float x, float max, float inv_t) {
#if defined(__CUDA_ARCH__)
  const float e = expf(__fmul_rn(__fsub_rn(x, max), inv_t));
#else
  volatile float d = (x - max) * inv_t;
  const float e = expf(d);
#endif
  return uint64_t(double(e) * kMassScale + 0.5);
}
// Monotone map float -> uint32 (−0 and +0 one key, as they compare equal); NaN never reaches it.
MLA_HD_INLINE uint32_t order_key(float x) {
  if (x == 0.f) x = 0.f;
  uint32_t b;
  memcpy(&b, &x, 4);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
// Temperatures under 1e-5 are greedy (SamplingParams::kGreedyTemperature): 1/T must stay a finite float.
MLA_HD_INLINE bool is_greedy(const SamplingRow& r) { return !(r.temperature >= 1e-5f) || r.top_k == 1; }
// ceil(top_p · total), at least 1 (the best candidate always stays).
MLA_HD_INLINE uint64_t top_p_target(float top_p, uint64_t total) {
  const double t = ceil(double(top_p) * double(total));
  return t < 1.0 ? 1 : (t >= double(total) ? total : uint64_t(t));
}

}  // namespace sampling
}  // namespace mla

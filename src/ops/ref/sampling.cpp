// sample_tokens, CPU reference: the rule of sampling.h written the plain way (sort, prefix, argmax), as the
// oracle for the kernel's radix-select thresholds.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "mla/ops/sampling.h"

namespace mla::ref {
namespace {

int32_t sample_row(const float* x, int32_t vocab, const SamplingRow& r, std::vector<int32_t>* ids) {
  float mx = -INFINITY;
  int32_t arg = -1;
  for (int32_t v = 0; v < vocab; ++v) {
    if (std::isnan(x[v]) || x[v] == INFINITY) return kSampleBadLogit;
    if (x[v] > mx) mx = x[v], arg = v;  // strict: the lowest id wins ties
  }
  if (arg < 0) return kSampleAllNegInf;
  if (sampling::is_greedy(r)) return arg;

  // Candidates in (logit desc, id asc) order; top-k keeps a prefix of it, top-p a shorter one.
  ids->resize(size_t(vocab));
  std::iota(ids->begin(), ids->end(), 0);
  std::stable_sort(ids->begin(), ids->end(), [x](int32_t a, int32_t b) { return x[a] > x[b]; });
  size_t n = size_t(vocab);
  if (r.top_k > 0 && r.top_k < vocab) n = size_t(r.top_k);
  const float inv_t = 1.0f / r.temperature;
  if (r.top_p < 1.0f) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) total += sampling::mass(x[(*ids)[i]], mx, inv_t);
    const uint64_t target = sampling::top_p_target(r.top_p, total);
    uint64_t kept = 0;
    size_t keep = 0;
    while (keep < n && kept < target) kept += sampling::mass(x[(*ids)[keep++]], mx, inv_t);
    n = keep;
  }
  const uint64_t key = sampling::row_key(r.seed, r.draw_index);
  float best = -INFINITY;
  int32_t tok = -1;
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = (*ids)[i];
    const float s = sampling::perturbed(x[v], mx, inv_t, sampling::gumbel(key, v));
    if (s > best || (s == best && v < tok) || tok < 0) best = s, tok = v;
  }
  return tok;
}

}  // namespace

Status sample_tokens(const SampleParams& p) {
  MLA_TRY(validate_sample(p));
  std::vector<int32_t> ids;
  const int64_t rows = p.logits.shape[0], vocab = p.logits.shape[1];
  for (int64_t r = 0; r < rows; ++r)
    p.tokens.ptr<int32_t>()[r] =
        sample_row(p.logits.ptr<const float>() + r * p.logits.stride[0], int32_t(vocab), p.rows[r], &ids);
  return Status::ok();
}

}  // namespace mla::ref

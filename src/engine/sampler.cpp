#include "mla/engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace mla::engine {

uint64_t mix64(uint64_t x) {
  // splitmix64's finalizer: a bijection with good avalanche, enough for sampling and fake logits.
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double uniform_draw(uint64_t seed, uint64_t draw_index) {
  const uint64_t bits = mix64(mix64(seed) ^ mix64(draw_index ^ 0xD1B54A32D192ED03ull));
  return double(bits >> 11) * 0x1.0p-53;  // 53 random bits: exactly representable, < 1
}

Status sample_row(const float* logits, int vocab, const SampleRequest& req, std::vector<int32_t>* scratch,
                  int32_t* token) {
  const char* op = "sample";
  float max_logit = -INFINITY;
  int32_t argmax = -1;
  for (int v = 0; v < vocab; ++v) {
    const float x = logits[v];
    if (std::isnan(x) || x == INFINITY)
      return Status::invalid(op, "logit " + std::to_string(v) + " is " + std::to_string(x));
    if (x > max_logit) max_logit = x, argmax = v;  // strict: the lowest id wins ties
  }
  if (argmax < 0) return Status::invalid(op, "every logit is -inf");
  const SamplingParams& p = *req.params;
  if (p.is_greedy() || p.top_k == 1) {
    *token = argmax;
    return Status::ok();
  }

  // Candidates, best first when truncation needs an order (ties: lower id first, so the order is total).
  std::vector<int32_t>& ids = *scratch;
  ids.resize(size_t(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t n = size_t(vocab);
  if (p.top_k > 0 && p.top_k < vocab) {
    n = size_t(p.top_k);
    std::partial_sort(ids.begin(), ids.begin() + std::ptrdiff_t(n), ids.end(), better);
  } else if (p.top_p < 1.0f) {
    std::sort(ids.begin(), ids.end(), better);
  }

  // Softmax of logits / T over the candidates, in double so tiny probabilities still add up.
  std::vector<double> weights(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    weights[i] = std::exp(double(logits[ids[i]] - max_logit) / double(p.temperature));
    total += weights[i];
  }
  // Top-p on the (top-k renormalized) distribution: the shortest prefix reaching the mass, at least one.
  if (p.top_p < 1.0f) {
    double kept = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || kept < double(p.top_p) * total)) kept += weights[keep++];
    n = keep;
    total = kept;
  }
  const double target = uniform_draw(req.seed, uint64_t(req.draw_index)) * total;
  double acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += weights[i];
    if (target < acc) {
      *token = ids[i];
      return Status::ok();
    }
  }
  *token = ids[n - 1];  // rounding left target == total: the last kept candidate
  return Status::ok();
}

Status sample(const Logits& logits, const std::vector<SampleRequest>& requests, std::vector<int32_t>* tokens) {
  if (int(requests.size()) != logits.num_rows || logits.vocab < 1 ||
      logits.data.size() != size_t(logits.num_rows) * size_t(logits.vocab)) {
    return Status::invalid("sample", "logits [" + std::to_string(logits.num_rows) + ", " +
                                         std::to_string(logits.vocab) + "] with " + std::to_string(logits.data.size()) +
                                         " values for " + std::to_string(requests.size()) + " requests");
  }
  tokens->assign(requests.size(), -1);
  std::vector<int32_t> scratch;
  for (size_t i = 0; i < requests.size(); ++i) {
    Status st = sample_row(logits.row(int(i)), logits.vocab, requests[i], &scratch, &(*tokens)[i]);
    if (!st.is_ok()) return Status::invalid("sample", "row " + std::to_string(i) + ": " + st.message());
  }
  return Status::ok();
}

}  // namespace mla::engine

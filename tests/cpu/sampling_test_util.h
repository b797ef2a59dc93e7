#pragma once
// Shared by the CPU (reference) and GPU sampling tests: the exact distribution a row's parameters define,
// computed independently of both samplers (double precision softmax over a sorted candidate list), and a
// chi-square goodness-of-fit check.
#include <algorithm>
#include <cstdint>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "mla/ops/sampling.h"

namespace mla::sampling_test {

// `n` copies of row `x` with their sampling rows: draw indices 0..n/4 of four seeds seed0..seed0+3, so the
// draws are independent samples of one law (what the distribution tests count).
struct RepeatedRow {
  std::vector<float> logits;      // [n, x.size()]
  std::vector<SamplingRow> rows;  // [n]
};
inline RepeatedRow repeat_row(const std::vector<float>& x, SamplingRow r, int n, uint64_t seed0) {
  RepeatedRow out;
  for (int i = 0; i < n; ++i) {
    out.logits.insert(out.logits.end(), x.begin(), x.end());
    r.seed = seed0 + uint64_t(i % 4), r.draw_index = i / 4;
    out.rows.push_back(r);
  }
  return out;
}

// p[v] for row `x` under `r` (top-k, then top-p on the renormalised top-k mass, softmax(x / T)).
inline std::vector<double> exact_distribution(const std::vector<float>& x, const SamplingRow& r) {
  const int V = int(x.size());
  std::vector<int> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return x[size_t(a)] > x[size_t(b)]; });
  size_t n = size_t(V);
  if (r.top_k > 0 && r.top_k < V) n = size_t(r.top_k);
  const double mx = x[size_t(ids[0])];
  std::vector<double> w(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += w[i] = std::exp((double(x[size_t(ids[i])]) - mx) / double(r.temperature));
  if (r.top_p < 1.0f) {
    double kept = 0;
    size_t keep = 0;
    while (keep < n && kept < double(r.top_p) * total) kept += w[keep++];
    n = keep, total = kept;
  }
  std::vector<double> p(size_t(V), 0.0);
  for (size_t i = 0; i < n; ++i) p[size_t(ids[i])] = w[i] / total;
  return p;
}

// Pearson's chi-square of `counts` against `p` (cells with p == 0 must be empty: a draw outside the
// support is reported, not scored). Returns "" when the fit is acceptable, else a description.
// Acceptable: chi2 below the Wilson-Hilferty quantile at z = 5 (a false alarm about once in 3.5 million runs;
// the seeds are fixed, so a pass is reproducible, and a real bias of a few percent still fails by far).
inline std::string chi_square_failure(const std::vector<long>& counts, const std::vector<double>& p) {
  long n = 0;
  for (long c : counts) n += c;
  double chi2 = 0;
  int cells = 0;
  // Cells expecting fewer than 5 draws are pooled into one: each would add a degree of freedom while
  // carrying almost no mass, and thousands of them (a long tail of tiny probabilities) raise the limit
  // enough to hide a bias of several percent on the tokens that matter.
  double pooled_e = 0;
  long pooled_c = 0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (p[v] == 0) {
      if (counts[v] != 0)
        return "token " + std::to_string(v) + " drawn " + std::to_string(counts[v]) + " times outside the support";
      continue;
    }
    const double e = p[v] * double(n);
    if (e < 5.0) {
      pooled_e += e, pooled_c += counts[v];
      continue;
    }
    chi2 += (double(counts[v]) - e) * (double(counts[v]) - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    chi2 += (double(pooled_c) - pooled_e) * (double(pooled_c) - pooled_e) / pooled_e;
    ++cells;
  }
  const double df = std::max(cells - 1, 1);
  const double z = 5.0, a = 2.0 / (9.0 * df);
  const double limit = df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
  if (chi2 <= limit) return "";
  return "chi2 " + std::to_string(chi2) + " > " + std::to_string(limit) + " (df " + std::to_string(int(df)) + ", n " +
         std::to_string(n) + ")";
}

}  // namespace mla::sampling_test

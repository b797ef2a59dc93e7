// DeepSeek-V2 MoE on the host: softmax router, greedy or group-limited top-k, routed + shared experts.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cpu_kernels.h"

namespace mla::model::cpu {

void route(const float* logits, const ModelConfig& c, int* experts, float* weights) {
  const int E = static_cast<int>(c.n_routed_experts), k = static_cast<int>(c.num_experts_per_tok);
  std::vector<float> s(logits, logits + E);
  const float mx = *std::max_element(s.begin(), s.end());
  float sum = 0;
  for (float& v : s) sum += (v = std::exp(v - mx));
  for (float& v : s) v /= sum;
  if (c.topk_method == TopkMethod::kGroupLimitedGreedy) {
    // Keep the topk_group groups with the highest best expert; the others' scores become 0.
    const int G = static_cast<int>(c.n_group), per = E / G;
    std::vector<float> best(static_cast<size_t>(G));
    for (int g = 0; g < G; ++g) best[g] = *std::max_element(s.begin() + g * per, s.begin() + (g + 1) * per);
    std::vector<int> order(static_cast<size_t>(G));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return best[a] > best[b]; });
    std::vector<bool> keep(static_cast<size_t>(G), false);
    for (int i = 0; i < c.topk_group; ++i) keep[order[i]] = true;
    for (int e = 0; e < E; ++e)
      if (!keep[e / per]) s[e] = 0.0f;
  }
  std::vector<int> order(static_cast<size_t>(E));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  float wsum = 0;
  for (int i = 0; i < k; ++i) {
    experts[i] = order[i];
    weights[i] = s[order[i]];
    wsum += weights[i];
  }
  // DeepSeek-V2: either renormalize the top-k weights or scale them, never both (V3 does both).
  for (int i = 0; i < k; ++i) {
    if (k > 1 && c.norm_topk_prob) weights[i] /= wsum + 1e-20f;
    else weights[i] *= static_cast<float>(c.routed_scaling_factor);
  }
}

void moe(const float* x, int64_t rows, const ModelConfig& c, const MoeWeights& w, float* out) {
  const int64_t H = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  // Router in fp32 (as the reference does, whatever the activation dtype).
  std::vector<float> logits(static_cast<size_t>(rows * E));
  linear(x, H, rows, w.gate, logits.data(), E);
  std::vector<int> ex(static_cast<size_t>(rows * k));
  std::vector<float> wt(ex.size());
  for (int64_t t = 0; t < rows; ++t) route(&logits[t * E], c, &ex[t * k], &wt[t * k]);
  if (c.n_shared_experts > 0) mlp(x, rows, H, w.shared, out);
  else std::fill(out, out + rows * H, 0.0f);
  // Group the tokens by expert, so each expert's weights are read once per step.
  std::vector<float> xin, yout(static_cast<size_t>(rows * H));
  for (int64_t e = 0; e < E; ++e) {
    std::vector<std::pair<int64_t, float>> hits;  // (token, routing weight)
    for (int64_t i = 0; i < rows * k; ++i)
      if (ex[i] == e) hits.push_back({i / k, wt[i]});
    if (hits.empty()) continue;
    const int64_t n = static_cast<int64_t>(hits.size());
    xin.resize(static_cast<size_t>(n * H));
    for (int64_t j = 0; j < n; ++j) std::copy(x + hits[j].first * H, x + (hits[j].first + 1) * H, &xin[j * H]);
    mlp(xin.data(), n, H, w.experts[static_cast<size_t>(e)], yout.data());
    for (int64_t j = 0; j < n; ++j)
      for (int64_t d = 0; d < H; ++d) out[hits[j].first * H + d] += hits[j].second * yout[j * H + d];
  }
}

}  // namespace mla::model::cpu

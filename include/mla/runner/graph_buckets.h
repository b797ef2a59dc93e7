#pragma once
// The batch sizes a decode-only step is padded to for its CUDA graph (CudaModelRunner captures one graph per size).
// One list serves the runner and `mlaserve plan decode`, which says what a replayed step of a given batch runs.
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mla::runner {

// sizes: the caller's buckets (CudaRunnerOptions::graph_batch_sizes), or empty for the defaults: 1 2 4 8 16 32 48 64
// 96 128 160 192 224 256, then every 64 up to max_num_seqs. Only buckets a step can fill are kept, cap =
// min(max_num_seqs, max_batch_tokens), and cap itself is always one. Sorted, unique.
inline std::vector<int> decode_graph_buckets(std::vector<int> sizes, int64_t max_num_seqs, int64_t max_batch_tokens) {
  if (sizes.empty()) {
    sizes = {1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 160, 192, 224, 256};
    for (int64_t b = 320; b <= max_num_seqs; b += 64) sizes.push_back(static_cast<int>(b));
  }
  const int64_t cap = std::min<int64_t>(max_num_seqs, max_batch_tokens);
  std::vector<int> out;
  for (int b : sizes)
    if (b >= 1 && b <= cap) out.push_back(b);
  if (out.empty() || out.back() < cap) out.push_back(static_cast<int>(cap));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The bucket a decode-only step of `batch` sequences pads to: the smallest one >= batch, or 0 past the largest (such
// a step runs eagerly).
inline int decode_graph_bucket(const std::vector<int>& buckets, int batch) {
  const auto it = std::lower_bound(buckets.begin(), buckets.end(), batch);
  return it == buckets.end() ? 0 : *it;
}

}  // namespace mla::runner

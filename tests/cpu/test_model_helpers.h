#pragma once
// Building a CPU model and running prompts through it, for the model tests.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mla/loader/weights_loader.h"
#include "mla/model/cpu_backend.h"
#include "mla/model/deepseek_v2.h"

namespace mla::test {

inline std::unique_ptr<model::CpuBackend> dummy_backend(const model::ModelConfig& c, DType dtype, uint64_t seed = 1) {
  model::ModelWeights w;
  Status s = loader::make_dummy_weights(c, seed, dtype, &w);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::unique_ptr<model::CpuBackend> be;
  s = model::CpuBackend::create(std::move(w), &be);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return be;
}

// Runs one step and returns its logits [t · vocab] as a host vector.
inline std::vector<float> step(model::CpuBackend& be, const model::ForwardBatch& b) {
  model::DeepseekV2 m(&be);
  TensorView logits;
  Status s = m.forward(b, &logits);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return {};
  return std::vector<float>(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
}

// Prefill of tokens [from, to) of `ids` as one chunk of sequence `seq`.
inline model::ForwardBatch chunk(const std::vector<int32_t>& ids, size_t from, size_t to, int64_t seq = 0,
                                 model::AttnPath path = model::AttnPath::kAuto) {
  model::ForwardBatch b;
  b.token_ids.assign(ids.begin() + static_cast<std::ptrdiff_t>(from), ids.begin() + static_cast<std::ptrdiff_t>(to));
  b.seqs = {{.seq_id = seq, .start_pos = static_cast<int64_t>(from), .num_tokens = static_cast<int64_t>(to - from)}};
  b.attn_path = path;
  return b;
}

// Prefill of the first `n_prefill` tokens, then one decode step per remaining token: all logits rows.
inline std::vector<float> prefill_then_decode(model::CpuBackend& be, const std::vector<int32_t>& ids, size_t n_prefill,
                                              int64_t seq = 0) {
  std::vector<float> all = n_prefill ? step(be, chunk(ids, 0, n_prefill, seq)) : std::vector<float>{};
  for (size_t i = n_prefill; i < ids.size(); ++i) {
    std::vector<float> row = step(be, chunk(ids, i, i + 1, seq));
    all.insert(all.end(), row.begin(), row.end());
  }
  return all;
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return !v.empty();
}

}  // namespace mla::test

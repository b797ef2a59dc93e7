#pragma once
// Per-request sampling parameters (vLLM's names and meanings) and their validation.
#include <cstdint>
#include <optional>
#include <vector>

#include "mla/core/status.h"

namespace mla::engine {

struct SamplingParams {
  float temperature = 1.0f;  // below kGreedyTemperature (0 included) means greedy (argmax, lowest id wins ties)
  int top_k = 0;             // keep the k most likely tokens; 0 (or >= vocab) keeps all
  float top_p = 1.0f;        // keep the smallest prefix of the sorted distribution with mass >= top_p
  // Seeds the request's own random stream. Draw i of a request depends only on (seed, i), never on
  // the batch it ran in or on preemptions, so a seeded request is reproducible token for token.
  // Unset: the engine derives one from its own seed and the request id.
  std::optional<uint64_t> seed;
  int max_tokens = 16;       // generated tokens at most (finish reason: length)
  bool ignore_eos = false;   // keep generating after EOS (benchmarks: every request emits max_tokens)
  std::vector<int32_t> stop_token_ids;  // finish (reason: stop token) right after emitting one of these

  // Like vLLM's sampling epsilon: such temperatures are argmax in effect, and below ~3e-39 1/T overflows a
  // float, which the device sampler's (x - max) · (1/T) would turn into NaN.
  static constexpr float kGreedyTemperature = 1e-5f;
  bool is_greedy() const { return temperature < kGreedyTemperature; }
};

// Rejects values that have no meaning (negative temperature, top_p outside (0, 1], max_tokens < 1...).
Status validate(const SamplingParams& p);

}  // namespace mla::engine

#pragma once
// Sampler, CPU reference: greedy, temperature, top-k, top-p, per-request seed.
// Determinism: a row's token depends only on its logits, its params, its seed and its draw index (the
// request's number of generated tokens so far) -- never on other rows, the batch order or earlier
// calls -- so batched and single runs agree, and a preempted request resumes with the same draws.
// ignore_eos is a stopping rule, applied by the sequence (vLLM does the same), not a mask here.
#include <cstdint>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/model_backend.h"
#include "mla/engine/sampling_params.h"

namespace mla::engine {

struct SampleRequest {
  const SamplingParams* params = nullptr;
  uint64_t seed = 0;
  int draw_index = 0;  // tokens the request generated before this one
};

// One token per logits row. Rows with NaN or +inf, or with every logit -inf, are errors naming the row.
Status sample(const Logits& logits, const std::vector<SampleRequest>& requests, std::vector<int32_t>* tokens);

// One row (exposed for tests); `scratch` is reused across calls to avoid reallocating per row.
Status sample_row(const float* logits, int vocab, const SampleRequest& request, std::vector<int32_t>* scratch,
                  int32_t* token);

// The request's uniform draw in [0, 1) for a given index: a counter-based generator, so no state.
double uniform_draw(uint64_t seed, uint64_t draw_index);
uint64_t mix64(uint64_t x);

}  // namespace mla::engine

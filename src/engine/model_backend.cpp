#include "mla/engine/model_backend.h"

#include "mla/engine/sampler.h"

namespace mla::engine {

Status ModelBackend::forward_sample(const StepInputs& inputs, const std::vector<SampleRequest>& requests,
                                    std::vector<int32_t>* tokens) {
  MLA_TRY(forward(inputs, &sample_logits_));
  // A step of prefill chunks only (none finishes its prompt) samples nothing; the model still ran to fill
  // the cache, and (no logits rows named) returned every row's logits, which nobody reads.
  if (requests.empty()) {
    tokens->clear();
    return Status::ok();
  }
  return sample(sample_logits_, requests, tokens);
}

}  // namespace mla::engine

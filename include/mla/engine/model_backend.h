#pragma once
// ModelBackend: what the engine needs from a model. One call per step: run the step's rows, write
// their KV into the backend's own paged cache at slot_mapping, and return the logits of the rows in
// logits_indices (forward), or tokens sampled from them (forward_sample). The engine owns scheduling and pages; the
// backend owns weights and cache memory. The real DeepSeek-V2 runners (CPU and CUDA) implement this; tests use
// FakeBackend.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/step_inputs.h"

namespace mla::engine {

struct SampleRequest;  // sampler.h

struct Logits {
  int num_rows = 0;         // = inputs.logits_indices.size()
  int vocab = 0;
  std::vector<float> data;  // [num_rows, vocab] fp32, row-major
  const float* row(int i) const { return data.data() + size_t(i) * size_t(vocab); }
};

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  // The cache the backend holds, so the engine's block manager never hands out a page it lacks.
  virtual int num_pages() const = 0;
  virtual int page_size() const = 0;
  virtual Status forward(const StepInputs& inputs, Logits* logits) = 0;
  // The engine's step: run the model and return one token per logits row (requests[i] samples row i).
  // The default runs forward() and the host sampler; the CUDA runner samples on the device and brings
  // back only the [rows] int32 ids. Greedy tokens are the host sampler's bit for bit on every backend;
  // seeded random draws follow the same distribution but are backend-specific streams (sampling.h).
  virtual Status forward_sample(const StepInputs& inputs, const std::vector<SampleRequest>& requests,
                                std::vector<int32_t>* tokens);
  // The sequence's cached context is dead: it finished, or was preempted (it comes back later as a
  // new prefill from position 0). Backends that keep per-sequence state drop it here; a paged backend
  // needs nothing, since the engine hands the pages out again.
  virtual void release(SeqId /*id*/) {}

 protected:
  Logits sample_logits_;  // forward_sample's default: kept so steady-state steps reuse its capacity
};

}  // namespace mla::engine

#pragma once
// StepInputs (the engine's view of a step) -> ForwardBatch (the model's), shared by every runner.
// The model backends keep their own per-sequence caches, so a sequence that restarts at position 0
// (recompute after preemption) has its stale cache released first.
#include <cstdint>

#include "mla/engine/step_inputs.h"
#include "mla/model/batch.h"

namespace mla::runner {

// Backend: anything with cached_tokens(seq_id) and release_sequence(seq_id) (CpuBackend, CudaBackend).
template <class Backend>
model::ForwardBatch to_forward_batch(const engine::StepInputs& in, Backend& backend) {
  model::ForwardBatch fb;
  fb.token_ids = in.input_ids;
  fb.logits_rows = in.logits_indices;
  for (int e = 0; e < in.num_seqs; ++e) {
    const int64_t id = static_cast<int64_t>(in.seq_ids[e]);
    const int64_t start = in.context_lens[e];
    if (start == 0 && backend.cached_tokens(id) > 0) backend.release_sequence(id);
    fb.seqs.push_back({id, start, in.query_start_loc[e + 1] - in.query_start_loc[e]});
  }
  return fb;
}

}  // namespace mla::runner

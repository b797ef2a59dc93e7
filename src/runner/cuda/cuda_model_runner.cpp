#include "mla/runner/cuda_model_runner.h"

#include <string>

namespace mla::runner {

Status CudaModelRunner::create(const model::ModelWeights& weights, const model::CudaBackendOptions& opts,
                               std::unique_ptr<CudaModelRunner>* out) {
  if (opts.num_pages < 1 || opts.num_pages > (int64_t{1} << 30))
    return Status::invalid("cuda_runner", "num_pages must be in [1, 2^30], got " + std::to_string(opts.num_pages));
  std::unique_ptr<model::CudaBackend> be;
  MLA_TRY(model::CudaBackend::create(weights, opts, &be));
  out->reset(new CudaModelRunner(std::move(be), opts.num_pages));
  return Status::ok();
}

Status CudaModelRunner::forward(const engine::StepInputs& in, engine::Logits* logits) {
  model::ForwardBatch fb;
  fb.token_ids = in.input_ids;
  fb.logits_rows = in.logits_indices;
  for (int e = 0; e < in.num_seqs; ++e) {
    const int64_t id = static_cast<int64_t>(in.seq_ids[e]);
    const int64_t start = in.context_lens[e];
    // A sequence recomputed after preemption starts over: its old pages must go.
    if (start == 0 && backend_->cached_tokens(id) > 0) backend_->release_sequence(id);
    fb.seqs.push_back({id, start, in.query_start_loc[e + 1] - in.query_start_loc[e]});
  }
  TensorView out;
  MLA_TRY(model_.forward(fb, &out));
  logits->num_rows = static_cast<int>(out.shape[0]);
  logits->vocab = static_cast<int>(out.shape[1]);
  return backend_->download(out, &logits->data);
}

}  // namespace mla::runner

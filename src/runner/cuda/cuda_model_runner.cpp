#include "mla/runner/cuda_model_runner.h"

#include <string>

#include "mla/runner/step_batch.h"

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
  const model::ForwardBatch fb = to_forward_batch(in, *backend_);
  TensorView out;
  MLA_TRY(model_.forward(fb, &out));
  logits->num_rows = static_cast<int>(out.shape[0]);
  logits->vocab = static_cast<int>(out.shape[1]);
  return backend_->download(out, &logits->data);
}

}  // namespace mla::runner

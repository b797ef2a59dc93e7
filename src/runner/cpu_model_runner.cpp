#include "mla/runner/cpu_model_runner.h"

#include <algorithm>
#include <string>

#include "mla/runner/step_batch.h"

namespace mla::runner {

Status CpuModelRunner::create(model::ModelWeights weights, int num_pages, int page_size,
                              std::unique_ptr<CpuModelRunner>* out) {
  if (num_pages < 1 || page_size < 1)
    return Status::invalid("cpu_runner", "num_pages and page_size must be >= 1, got " + std::to_string(num_pages) +
                                             ", " + std::to_string(page_size));
  std::unique_ptr<model::CpuBackend> be;
  MLA_TRY(model::CpuBackend::create(std::move(weights), &be));
  out->reset(new CpuModelRunner(std::move(be), num_pages, page_size));
  return Status::ok();
}

Status CpuModelRunner::forward(const engine::StepInputs& in, engine::Logits* logits) {
  const model::ForwardBatch fb = to_forward_batch(in, *backend_);
  TensorView out;
  MLA_TRY(model_.forward(fb, &out));
  logits->num_rows = static_cast<int>(out.shape[0]);
  logits->vocab = static_cast<int>(out.shape[1]);
  logits->data.resize(static_cast<size_t>(out.numel()));
  for (int64_t r = 0; r < out.shape[0]; ++r)
    std::copy_n(out.ptr<const float>() + r * out.stride[0], out.shape[1], logits->data.data() + r * out.shape[1]);
  return Status::ok();
}

}  // namespace mla::runner

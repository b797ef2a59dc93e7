#pragma once
// CudaModelRunner: the engine's ModelBackend on the CUDA model backend (DeepseekV2 over CudaBackend).
// Like CpuModelRunner it turns StepInputs into a ForwardBatch and copies the sampled rows' logits back.
// CudaBackend keeps its own page table (64-token pages, one per 64 tokens of each sequence), so the engine's
// page ids are bookkeeping here; reporting the backend's page count keeps the engine's schedule within
// the cache. A sequence restarting at position 0 (preemption by recompute) or finishing is released.
#include <memory>

#include "mla/engine/model_backend.h"
#include "mla/model/cuda_backend.h"
#include "mla/model/deepseek_v2.h"

namespace mla::runner {

class CudaModelRunner final : public engine::ModelBackend {
 public:
  // Uploads `weights` (host) to the current device; opts.num_pages is the engine's page budget.
  static Status create(const model::ModelWeights& weights, const model::CudaBackendOptions& opts,
                       std::unique_ptr<CudaModelRunner>* out);

  int num_pages() const override { return static_cast<int>(num_pages_); }
  int page_size() const override { return 64; }
  Status forward(const engine::StepInputs& in, engine::Logits* logits) override;
  void release(engine::SeqId id) override { backend_->release_sequence(static_cast<int64_t>(id)); }
  model::CudaBackend& backend() { return *backend_; }

 private:
  CudaModelRunner(std::unique_ptr<model::CudaBackend> be, int64_t num_pages)
      : backend_(std::move(be)), model_(backend_.get()), num_pages_(num_pages) {}
  std::unique_ptr<model::CudaBackend> backend_;
  model::DeepseekV2 model_;
  int64_t num_pages_;
};

}  // namespace mla::runner

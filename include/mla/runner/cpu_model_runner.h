#pragma once
// CpuModelRunner: the engine's ModelBackend on the CPU model backend (DeepseekV2 over CpuBackend).
// It translates a StepInputs (rows, sequences, logits rows) into a ForwardBatch and copies the sampled
// rows' logits back. The CPU backend keeps each sequence's latent cache itself, so the engine's pages
// are bookkeeping here; a sequence that restarts at position 0 (preemption by recompute) or finishes
// has its cache dropped.
#include <memory>

#include "mla/engine/model_backend.h"
#include "mla/model/cpu_backend.h"
#include "mla/model/deepseek_v2.h"

namespace mla::runner {

class CpuModelRunner final : public engine::ModelBackend {
 public:
  // num_pages, page_size: the page budget the engine schedules against.
  static Status create(model::ModelWeights weights, int num_pages, int page_size, std::unique_ptr<CpuModelRunner>* out);

  int num_pages() const override { return num_pages_; }
  int page_size() const override { return page_size_; }
  Status forward(const engine::StepInputs& in, engine::Logits* logits) override;
  void release(engine::SeqId id) override { backend_->release_sequence(id); }

 private:
  CpuModelRunner(std::unique_ptr<model::CpuBackend> be, int num_pages, int page_size)
      : backend_(std::move(be)), model_(backend_.get()), num_pages_(num_pages), page_size_(page_size) {}
  std::unique_ptr<model::CpuBackend> backend_;
  model::DeepseekV2 model_;
  int num_pages_;
  int page_size_;
};

}  // namespace mla::runner

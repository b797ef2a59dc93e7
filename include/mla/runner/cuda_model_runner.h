#pragma once
// CudaModelRunner: the engine's ModelBackend on the CUDA model backend (DeepseekV2 over CudaBackend).
// It turns StepInputs into a ForwardBatch, runs the model and samples on the device (forward_sample: only
// [rows] int32 come back, through pinned memory), or copies the logits back (forward, for tests and
// --print-logits style use).
//
// CUDA graphs: decode-only steps (one token per sequence, every row sampled) are padded to the next
// batch-size bucket and replayed from a graph captured at start-up for that bucket (embedding → every
// layer → lm_head → sampling → the copy of the ids into pinned memory). Mixed and prefill steps, and
// decode batches above the largest bucket, run eagerly. When a capture fails (an op that still needs the
// host in the middle of the step, e.g. a host-synchronising MoE), graphs are turned off with the reason
// in stats() and every step runs eagerly. enforce_eager turns them off from the start.
//
// CudaBackend keeps its own page table (64-token pages, one per 64 tokens of each sequence), so the engine's
// page ids are bookkeeping here; reporting the backend's page count keeps the engine's schedule within
// the cache. A sequence restarting at position 0 (preemption by recompute) or finishing is released.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mla/engine/model_backend.h"
#include "mla/engine/sampler.h"
#include "mla/model/cuda_backend.h"
#include "mla/model/deepseek_v2.h"

namespace mla::runner {

class ProfilingBackend;  // step_profile.h (MLA_PROFILE_DECODE=N)

struct CudaRunnerOptions {
  bool enforce_eager = false;          // no CUDA graphs (vLLM's --enforce-eager)
  std::vector<int> graph_batch_sizes;  // buckets; empty: the defaults of graph_buckets.h (1 2 4 .. 256, +64 …)
  // Testing: decode-only steps still run padded to their bucket, but eagerly (no capture, no replay) --
  // the exact kernels and shapes a replay runs, so its logits can be compared bit for bit.
  bool pad_eager_decode = false;
  // Start-up memory sizing from a profiled peak (issue 8). When set, the backend options' num_pages and
  // activation_bytes are provisional (enough for the profiling steps): create() runs the largest steps
  // the engine can schedule -- a decode step of max_num_seqs sequences and a prefill chunk of
  // max_batch_tokens tokens with logits on max_num_seqs rows --, reads the activation arena's high-water
  // mark after each, and re-allocates the arena at the sum of the two peaks (a mixed step holds at most
  // both) and the KV pool at num_pages_for(arena bytes) pages; stats() reports the figures. Needs the
  // backend options' max_pages_per_seq > 0 (the table width is fixed before the pool is re-sized).
  std::function<int64_t(size_t)> num_pages_for;
};

struct CudaRunnerStats {
  int64_t graph_steps = 0;   // decode steps replayed from a graph
  int64_t eager_steps = 0;   // steps run eagerly
  std::vector<int> captured;  // buckets with a graph
  std::string graphs_off;     // why graphs are off ("" when on)
  // num_pages_for sizing: the arena before (provisional) and after, and the two profiled peaks.
  size_t provisional_activation_bytes = 0, activation_bytes = 0, decode_peak = 0, prefill_peak = 0;
};

class CudaModelRunner final : public engine::ModelBackend {
 public:
  // Uploads `weights` (host) to the current device; opts.num_pages is the engine's page budget. Captures
  // the decode graphs unless ro.enforce_eager.
  static Status create(const model::ModelWeights& weights, const model::CudaBackendOptions& opts,
                       std::unique_ptr<CudaModelRunner>* out, const CudaRunnerOptions& ro = {});
  ~CudaModelRunner() override;

  int num_pages() const override { return static_cast<int>(num_pages_); }
  int page_size() const override { return 64; }
  Status forward(const engine::StepInputs& in, engine::Logits* logits) override;
  Status forward_sample(const engine::StepInputs& in, const std::vector<engine::SampleRequest>& requests,
                        std::vector<int32_t>* tokens) override;
  void release(engine::SeqId id) override { backend_->release_sequence(static_cast<int64_t>(id)); }
  model::CudaBackend& backend() { return *backend_; }
  const CudaRunnerStats& stats() const { return stats_; }
  // The logits of the last forward_sample step ([rows, vocab], padding rows included on graph steps).
  Status download_last_logits(std::vector<float>* out) const;

  struct Graphs;  // captured graphs (cuda_model_runner.cpp)

 private:
  CudaModelRunner(std::unique_ptr<model::CudaBackend> be, int64_t num_pages, const CudaRunnerOptions& ro);
  Status capture_graphs();
  Status size_memory(const model::CudaBackendOptions& opts);
  Status run_eager(const model::ForwardBatch& fb, std::vector<SamplingRow> rows, std::vector<int32_t>* tokens);
  Status run_padded(const model::ForwardBatch& fb, int bucket, std::vector<SamplingRow> rows,
                    std::vector<int32_t>* tokens);
  int bucket_for(const engine::StepInputs& in, const model::ForwardBatch& fb) const;
  Status run_profiled(const model::ForwardBatch& fb, std::vector<SamplingRow> rows, std::vector<int32_t>* tokens,
                      const std::string& label, int decode_rows);

  std::unique_ptr<model::CudaBackend> backend_;
  model::DeepseekV2 model_;
  int64_t num_pages_;
  CudaRunnerOptions ro_;
  std::vector<int> buckets_;
  std::unique_ptr<Graphs> graphs_;
  CudaRunnerStats stats_;
  TensorView last_logits_;
  // MLA_PROFILE_DECODE=N: every N-th decode step and every mixed/prefill step eager and timed per op; graph
  // replays timed whole.
  std::unique_ptr<ProfilingBackend> prof_;
  std::unique_ptr<model::DeepseekV2> prof_model_;
  int64_t prof_every_ = 0, decode_steps_ = 0;
};

}  // namespace mla::runner

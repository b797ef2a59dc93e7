#pragma once
// LLMEngine: the loop that ties the parts together, one step at a time:
//   schedule -> build_step_inputs -> backend.forward_sample (model + sampler) -> postprocess (finish, free pages).
// It owns the scheduler (and through it the sequences and pages) and borrows the backend. A step that
// fails (backend or sampler error) advances nothing: pages claimed for it stay with their sequences,
// and the next step schedules the same work again.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/model_backend.h"
#include "mla/engine/sampler.h"
#include "mla/engine/scheduler.h"
#include "mla/engine/step_inputs.h"

namespace mla::engine {

struct EngineConfig {
  SchedulerConfig scheduler;  // num_pages and page_size must equal the backend's cache
  uint64_t seed = 0;          // seeds requests that bring no seed of their own
};

struct Request {
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
};

struct RequestOutput {
  SeqId id = 0;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> output_token_ids;
  FinishReason finish_reason = FinishReason::kNone;
  int num_preemptions = 0;
};

// Steps by what they hold: prefill chunks only, decode rows and prefill chunks, decode rows only.
enum class StepKind { kPrefill, kMixed, kDecode, kKinds };
const char* step_kind_name(StepKind k);

// Totals over the steps of one kind. ms is host wall time from schedule() to the end of postprocess():
// every step that samples waits for its tokens, so it covers the step's GPU work; a step that samples
// nothing (an early chunk of a long prompt) does not wait, and its GPU time lands in the next step.
struct StepKindStats {
  int64_t steps = 0;
  int64_t seqs = 0;            // sequences scheduled, summed over the steps (mean batch = seqs / steps)
  int64_t decode_rows = 0;
  int64_t prefill_tokens = 0;  // prompt (or recompute) tokens
  int64_t context_tokens = 0;  // cached tokens the prefill chunks attend to besides their own (re-expanded)
  double ms = 0;
};

struct EngineStats {
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
  int64_t num_prefill_tokens = 0;  // rows run as prefill chunks (recompute included)
  int64_t num_decode_tokens = 0;
  StepKindStats by_kind[static_cast<int>(StepKind::kKinds)];
  const StepKindStats& kind(StepKind k) const { return by_kind[static_cast<int>(k)]; }
};

// A table of `stats` by step kind (one line per kind, markdown), for logs and the benchmark.
std::string format_step_stats(const EngineStats& stats);

class LLMEngine {
 public:
  static Status create(const EngineConfig& config, ModelBackend* backend, std::unique_ptr<LLMEngine>* engine);

  Status add_request(const Request& request, SeqId* id);
  // One engine step; requests finished by it are appended to `finished`. A no-op when idle.
  Status step(std::vector<RequestOutput>* finished);
  bool has_unfinished() const { return scheduler_.has_unfinished(); }
  // Runs the requests to completion (with any already queued); outputs in the order of `requests`.
  Status generate(const std::vector<Request>& requests, std::vector<RequestOutput>* outputs);

  const Scheduler& scheduler() const { return scheduler_; }
  const EngineStats& stats() const { return stats_; }

 private:
  LLMEngine(const EngineConfig& config, ModelBackend* backend)
      : config_(config), backend_(*backend), scheduler_(config.scheduler) {}

  EngineConfig config_;
  ModelBackend& backend_;
  Scheduler scheduler_;
  SeqId next_id_ = 0;
  EngineStats stats_;
  // Per-step buffers, kept so steady-state steps reuse their capacity instead of reallocating.
  StepInputs inputs_;
  std::vector<SampleRequest> sample_requests_;
  std::vector<int32_t> sampled_;
};

}  // namespace mla::engine

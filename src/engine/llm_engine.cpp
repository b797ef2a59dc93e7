#include "mla/engine/llm_engine.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>

#include "mla/engine/sampler.h"
#include "mla/engine/step_inputs.h"

namespace mla::engine {

Status LLMEngine::create(const EngineConfig& config, ModelBackend* backend, std::unique_ptr<LLMEngine>* engine) {
  const char* op = "LLMEngine::create";
  if (backend == nullptr) return Status::invalid(op, "no backend");
  MLA_TRY(config.scheduler.validate());
  if (config.scheduler.num_pages != backend->num_pages() || config.scheduler.page_size != backend->page_size()) {
    return Status::invalid(op, "scheduler cache (" + std::to_string(config.scheduler.num_pages) + " pages of " +
                                   std::to_string(config.scheduler.page_size) + ") != backend cache (" +
                                   std::to_string(backend->num_pages()) + " pages of " +
                                   std::to_string(backend->page_size()) + ")");
  }
  engine->reset(new LLMEngine(config, backend));
  return Status::ok();
}

Status LLMEngine::add_request(const Request& request, SeqId* id) {
  const SeqId new_id = next_id_;
  // Unseeded requests still get their own stream, a function of the engine seed and the id only.
  const uint64_t seed = request.params.seed.value_or(mix64(config_.seed ^ mix64(uint64_t(new_id))));
  MLA_TRY(scheduler_.add(Sequence(new_id, request.prompt_token_ids, request.params, seed)));
  ++next_id_;
  *id = new_id;
  return Status::ok();
}

Status LLMEngine::step(std::vector<RequestOutput>* finished) {
  const auto t0 = std::chrono::steady_clock::now();
  ScheduledBatch batch;
  MLA_TRY(scheduler_.schedule(&batch));
  // Preemptions are final even if the rest of the step fails: count and announce them now.
  stats_.num_preemptions += int64_t(batch.preempted.size());
  for (SeqId id : batch.preempted) backend_.release(id);
  if (batch.empty()) {
    // The scheduler always makes progress when work exists (add() refuses what cannot fit alone).
    if (has_unfinished()) return Status::internal("LLMEngine::step", "work is queued but nothing could be scheduled");
    return Status::ok();
  }
  MLA_TRY(build_step_inputs(batch, scheduler_.sequences(), config_.scheduler.page_size, &inputs_));
  sample_requests_.clear();
  for (int32_t e : inputs_.sample_entries) {
    const Sequence& s = scheduler_.sequences().at(batch.seqs[size_t(e)].id);
    sample_requests_.push_back({.params = &s.params(), .seed = s.seed(), .draw_index = s.num_generated()});
  }
  MLA_TRY(backend_.forward_sample(inputs_, sample_requests_, &sampled_));

  std::vector<SeqId> done;
  MLA_TRY(scheduler_.postprocess(batch, sampled_, &done));
  ++stats_.num_steps;
  stats_.num_decode_tokens += batch.num_decodes;
  stats_.num_prefill_tokens += batch.num_tokens - batch.num_decodes;
  const StepKind kind = batch.num_decodes == 0                             ? StepKind::kPrefill
                        : batch.num_decodes == int(batch.seqs.size()) ? StepKind::kDecode
                                                                       : StepKind::kMixed;
  StepKindStats& ks = stats_.by_kind[static_cast<int>(kind)];
  ++ks.steps;
  ks.seqs += int64_t(batch.seqs.size());
  ks.decode_rows += batch.num_decodes;
  ks.prefill_tokens += batch.num_tokens - batch.num_decodes;
  for (const ScheduledSeq& e : batch.seqs)
    if (e.kind == ChunkKind::kPrefill) ks.context_tokens += e.position_start;
  ks.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (SeqId id : done) {
    const Sequence& s = scheduler_.sequences().at(id);
    const auto prompt_end = s.tokens().begin() + s.num_prompt_tokens();
    finished->push_back(RequestOutput{.id = id,
                                      .prompt_token_ids = {s.tokens().begin(), prompt_end},
                                      .output_token_ids = {prompt_end, s.tokens().end()},
                                      .finish_reason = s.finish_reason(),
                                      .num_preemptions = s.num_preemptions()});
    backend_.release(id);
    MLA_TRY(scheduler_.release(id));
  }
  return Status::ok();
}

Status LLMEngine::generate(const std::vector<Request>& requests, std::vector<RequestOutput>* outputs) {
  // Outputs are matched to `requests`; other queued work would finish here with nowhere to go.
  if (has_unfinished()) return Status::invalid("LLMEngine::generate", "the engine is not idle");
  // Check every request before queueing any, so a bad one leaves the engine idle.
  for (const Request& r : requests) {
    MLA_TRY(scheduler_.check(Sequence(-1, r.prompt_token_ids, r.params, 0)));
  }
  std::unordered_map<SeqId, size_t> index;  // id -> position in `requests`
  for (size_t i = 0; i < requests.size(); ++i) {
    SeqId id = 0;
    MLA_TRY(add_request(requests[i], &id));
    index.emplace(id, i);
  }
  outputs->assign(requests.size(), RequestOutput{});
  std::vector<RequestOutput> finished;
  while (has_unfinished()) {
    finished.clear();
    MLA_TRY(step(&finished));
    for (RequestOutput& out : finished) {
      auto it = index.find(out.id);
      if (it != index.end()) (*outputs)[it->second] = std::move(out);
    }
  }
  return Status::ok();
}

const char* step_kind_name(StepKind k) {
  switch (k) {
    case StepKind::kPrefill: return "prefill only";
    case StepKind::kMixed: return "mixed";
    case StepKind::kDecode: return "decode only";
    default: return "?";
  }
}

std::string format_step_stats(const EngineStats& st) {
  std::string out =
      "| steps | count | mean seqs | decode rows | prefill tokens | re-read context tokens | total ms | ms per step |\n"
      "|---|---|---|---|---|---|---|---|\n";
  double total = 0;
  for (int k = 0; k < static_cast<int>(StepKind::kKinds); ++k) {
    const StepKindStats& s = st.by_kind[k];
    total += s.ms;
    char line[256];
    const double n = s.steps > 0 ? double(s.steps) : 1.0;
    std::snprintf(line, sizeof line, "| %s | %lld | %.1f | %lld | %lld | %lld | %.1f | %.2f |\n",
                  step_kind_name(static_cast<StepKind>(k)), (long long)s.steps, double(s.seqs) / n,
                  (long long)s.decode_rows, (long long)s.prefill_tokens, (long long)s.context_tokens, s.ms, s.ms / n);
    out += line;
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "steps %lld, %.1f ms in steps, preemptions %lld\n", (long long)st.num_steps, total,
                (long long)st.num_preemptions);
  return out + tail;
}

}  // namespace mla::engine

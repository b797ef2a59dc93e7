#pragma once
// Scheduler: FCFS continuous batching with chunked prefill and preemption by recompute.
//
// Every step, under max_num_batched_tokens tokens and max_num_seqs running sequences:
//  1. every running decode gets its one token (decodes are never starved: the budget is at least
//     max_num_seqs); when pages run out the most recently admitted running sequence is preempted:
//     its pages are freed, its computed tokens reset, and it goes to the front of the waiting queue;
//  2. running sequences still in prefill get the next chunk of their prompt from the remaining budget;
//  3. waiting sequences are admitted in order (strict FCFS: the first that does not fit stops
//     admission) while budget, seats and pages (above a small watermark) remain; none are admitted
//     in a step that had to preempt.
// schedule() claims the pages for the step's tokens; postprocess() advances the sequences with the
// sampled tokens and retires the finished ones.
#include <deque>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/block_manager.h"
#include "mla/engine/scheduled_batch.h"
#include "mla/engine/sequence.h"

namespace mla::engine {

struct SchedulerConfig {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int num_pages = 1024;
  int page_size = 64;
  // Pages kept free when admitting new sequences so running decodes can grow without preempting
  // straight away (vLLM's watermark); preemption still handles the worst case.
  int watermark_pages = 0;
  std::vector<int32_t> eos_token_ids;  // empty: the model has none; config.json may list several
  // Tokens per sequence (prompt + max_tokens) at most, vLLM's --max-model-len: a longer request is refused
  // when added rather than failing a step later. 0: no limit beyond the cache's capacity.
  int64_t max_model_len = 0;

  Status validate() const;
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);  // config must validate()

  // Queues a sequence (state kWaiting). Fails if the id is taken, or if the prompt and max_tokens
  // could never fit the cache even alone (it would be preempted forever).
  Status add(Sequence seq);
  // add()'s checks without queueing (the id is not checked).
  Status check(const Sequence& seq) const;

  // Builds the next step. An empty batch means nothing can run (nothing is waiting or running).
  Status schedule(ScheduledBatch* batch);

  // Applies a step's results. sampled[i] is the token of the i-th entry of `batch` with samples set.
  // Appends ids of sequences that finished in this step to `finished`; they stay readable through
  // sequences() until release().
  Status postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& sampled, std::vector<SeqId>* finished);

  // Forgets a finished sequence (after its output was taken).
  Status release(SeqId id);

  bool has_unfinished() const { return !waiting_.empty() || !running_.empty(); }
  const SequenceMap& sequences() const { return seqs_; }
  const std::deque<SeqId>& waiting() const { return waiting_; }
  const std::vector<SeqId>& running() const { return running_; }  // admission order
  const BlockManager& block_manager() const { return blocks_; }
  const SchedulerConfig& config() const { return config_; }

 private:
  Status preempt_newest(ScheduledBatch* batch);
  Status schedule_decodes(ScheduledBatch* batch, int* budget);
  Status schedule_running_prefills(ScheduledBatch* batch, int* budget);
  Status admit_waiting(ScheduledBatch* batch, int* budget);
  Status add_chunk(Sequence& seq, ChunkKind kind, int n, ScheduledBatch* batch, int* budget);

  SchedulerConfig config_;
  BlockManager blocks_;
  SequenceMap seqs_;
  std::deque<SeqId> waiting_;  // kWaiting and kPreempted, front first
  std::vector<SeqId> running_;  // kRunning, oldest admission first
};

}  // namespace mla::engine

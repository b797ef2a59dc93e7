#pragma once
// Sequence: one request as the scheduler sees it. Tokens are the prompt followed by what was generated;
// num_computed_tokens of them have their KV in the cache. Chunked prefill advances num_computed_tokens a
// chunk at a time; preemption by recompute resets it to 0 (the generated tokens stay, and are
// recomputed as if they were prompt).
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mla/engine/block_table.h"
#include "mla/engine/sampling_params.h"

namespace mla::engine {

using SeqId = int64_t;

enum class SeqState {
  kWaiting,    // queued, never ran
  kRunning,    // admitted: holds pages and is scheduled every step it fits
  kPreempted,  // pages taken back; queued at the front of the waiting queue, recomputed on resume
  kFinished,   // done; pages released
};

enum class FinishReason { kNone, kLength, kEos, kStopToken };

std::string_view to_string(SeqState s);
std::string_view to_string(FinishReason r);

class Sequence {
 public:
  Sequence(SeqId id, std::vector<int32_t> prompt, SamplingParams params, uint64_t seed);

  SeqId id() const { return id_; }
  SeqState state() const { return state_; }
  FinishReason finish_reason() const { return finish_reason_; }
  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }  // params().seed, or the one the engine derived

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int num_tokens() const { return int(tokens_.size()); }
  int num_prompt_tokens() const { return num_prompt_tokens_; }
  int num_generated() const { return num_tokens() - num_prompt_tokens_; }
  std::vector<int32_t> generated() const { return {tokens_.begin() + num_prompt_tokens_, tokens_.end()}; }
  int num_computed_tokens() const { return num_computed_tokens_; }
  // Tokens whose KV is not yet in the cache; the last of them produces the next token's logits.
  int num_uncomputed() const { return num_tokens() - num_computed_tokens_; }
  // Only the last token lacks KV: the sequence is in its decode phase.
  bool is_decode() const { return num_uncomputed() == 1 && num_generated() > 0; }
  int num_preemptions() const { return num_preemptions_; }

  BlockTable& block_table() { return block_table_; }
  const BlockTable& block_table() const { return block_table_; }

  // State transitions; the scheduler is the only caller.
  void set_running() { state_ = SeqState::kRunning; }
  void advance_computed(int n) { num_computed_tokens_ += n; }
  // Preemption by recompute: the cache is gone, every token is recomputed when the sequence resumes.
  void preempt() {
    state_ = SeqState::kPreempted;
    num_computed_tokens_ = 0;
    ++num_preemptions_;
  }
  // Appends a sampled token and decides whether the sequence is done (then state is kFinished).
  // EOS and stop tokens stay in the output, as in vLLM's token ids.
  void append_token(int32_t token, const std::vector<int32_t>& eos_token_ids);

 private:
  SeqId id_;
  std::vector<int32_t> tokens_;
  int num_prompt_tokens_;
  int num_computed_tokens_ = 0;
  SamplingParams params_;
  uint64_t seed_;
  SeqState state_ = SeqState::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  int num_preemptions_ = 0;
  BlockTable block_table_;
};

// The scheduler's sequences by id (node-based: references stay valid while others come and go).
using SequenceMap = std::unordered_map<SeqId, Sequence>;

}  // namespace mla::engine

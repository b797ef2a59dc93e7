#include "mla/engine/sequence.h"

#include <algorithm>
#include <utility>

namespace mla::engine {

std::string_view to_string(SeqState s) {
  switch (s) {
    case SeqState::kWaiting: return "waiting";
    case SeqState::kRunning: return "running";
    case SeqState::kPreempted: return "preempted";
    case SeqState::kFinished: return "finished";
  }
  return "?";
}

std::string_view to_string(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopToken: return "stop";
  }
  return "?";
}

Sequence::Sequence(SeqId id, std::vector<int32_t> prompt, SamplingParams params, uint64_t seed)
    : id_(id), tokens_(std::move(prompt)), num_prompt_tokens_(int(tokens_.size())), params_(std::move(params)),
      seed_(seed) {}

void Sequence::append_token(int32_t token, const std::vector<int32_t>& eos_token_ids) {
  tokens_.push_back(token);
  // Order matters only for the reason reported when several apply; EOS and stop are the model's
  // choice and more informative than running out of length.
  const auto& stops = params_.stop_token_ids;
  if (!params_.ignore_eos && std::find(eos_token_ids.begin(), eos_token_ids.end(), token) != eos_token_ids.end()) {
    finish_reason_ = FinishReason::kEos;
  } else if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish_reason_ = FinishReason::kStopToken;
  } else if (num_generated() >= params_.max_tokens) {
    finish_reason_ = FinishReason::kLength;
  }
  if (finish_reason_ != FinishReason::kNone) state_ = SeqState::kFinished;
}

}  // namespace mla::engine

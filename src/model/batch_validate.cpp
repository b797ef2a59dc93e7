#include <set>
#include <string>

#include "mla/model/batch.h"
#include "mla/model/config.h"

namespace mla::model {

Status validate_forward_batch(const ForwardBatch& b, const ModelConfig& c,
                              const std::function<int64_t(int64_t)>& cached_tokens, const char* op) {
  if (b.seqs.empty() || b.token_ids.empty()) return Status::invalid(op, "empty batch");
  int64_t total = 0;
  std::set<int64_t> seen;
  for (const auto& q : b.seqs) {
    const std::string name = "sequence " + std::to_string(q.seq_id);
    if (q.num_tokens < 1) return Status::invalid(op, name + ": num_tokens < 1");
    if (!seen.insert(q.seq_id).second) return Status::invalid(op, name + " twice in one batch");
    const int64_t cached = cached_tokens(q.seq_id);
    if (q.start_pos != cached)
      return Status::invalid(op, name + ": start_pos " + std::to_string(q.start_pos) + " but " +
                                     std::to_string(cached) + " tokens cached");
    if (q.start_pos + q.num_tokens > c.max_position_embeddings)
      return Status::invalid(op, name + " exceeds max_position_embeddings");
    total += q.num_tokens;
  }
  if (total != b.num_tokens())
    return Status::invalid(
        op, "chunks hold " + std::to_string(total) + " tokens, token_ids has " + std::to_string(b.num_tokens()));
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= b.num_tokens())
      return Status::invalid(op, "logits row " + std::to_string(r) + " outside the step's rows");
  for (int32_t id : b.token_ids)
    if (id < 0 || id >= c.vocab_size)
      return Status::invalid(op, "token id " + std::to_string(id) + " outside the vocabulary");
  return Status::ok();
}

}  // namespace mla::model

#pragma once
// ScheduledBatch: the scheduler's decision for one step, the only thing passed to the model side.
// Everything the model runner needs (ids, positions, slots, block tables, lengths) follows from it and
// the sequences by build_step_inputs(); nothing is read from hidden state.
#include <vector>

#include "mla/engine/sequence.h"

namespace mla::engine {

enum class ChunkKind {
  kDecode,   // one new token, all earlier tokens cached (absorbed-weight mla_decode path)
  kPrefill,  // a chunk of not-yet-cached tokens: a prompt, or a preempted sequence's recompute
};

struct ScheduledSeq {
  SeqId id = 0;
  ChunkKind kind = ChunkKind::kDecode;
  int num_new_tokens = 0;  // tokens computed this step: [position_start, position_start + num_new_tokens)
  int position_start = 0;  // = the sequence's num_computed_tokens when scheduled (its cached context)
  // The chunk reaches the sequence's last token, so its last row's logits are sampled; false for
  // the earlier chunks of a chunked prefill.
  bool samples = false;
};

struct ScheduledBatch {
  // Decodes first, then prefill chunks (the model runner splits the rows at num_decodes).
  std::vector<ScheduledSeq> seqs;
  int num_decodes = 0;
  int num_tokens = 0;                  // sum of num_new_tokens, <= max_num_batched_tokens
  std::vector<SeqId> preempted;        // sequences preempted while building this step (for logs/tests)

  bool empty() const { return seqs.empty(); }
};

}  // namespace mla::engine

#pragma once
// StepInputs: the host-side arrays one model step consumes, derived from a ScheduledBatch by a pure
// function. Rows are the step's new tokens, batch entry by batch entry (decodes first).
#include <cstdint>
#include <vector>

#include "mla/core/status.h"
#include "mla/engine/scheduled_batch.h"
#include "mla/engine/sequence.h"

namespace mla::engine {

struct StepInputs {
  int num_seqs = 0;     // b
  int num_decodes = 0;  // entries [0, num_decodes) are decodes (one row each), the rest prefill chunks
  int num_tokens = 0;   // t = sum of the entries' new tokens
  int page_size = 0;

  std::vector<SeqId> seq_ids;          // [b]
  std::vector<int32_t> input_ids;      // [t]
  std::vector<int32_t> positions;      // [t] position of each row within its sequence
  std::vector<int64_t> slot_mapping;   // [t] cache slot each row's KV is written to (page * page_size + row)
  std::vector<int32_t> query_start_loc;  // [b + 1] first row of each entry (cu_seqlens_q)
  std::vector<int32_t> context_lens;   // [b] tokens already cached before this step (= position start)
  std::vector<int32_t> seq_lens;       // [b] context + new tokens: the KV each entry attends to
  int max_pages_per_seq = 0;           // block-table row stride
  std::vector<int32_t> block_tables;   // [b, max_pages_per_seq], page ids, -1 past a sequence's pages
  // Rows whose logits are sampled, one per entry with samples set, in batch order; the model computes
  // logits only for these rows and the sampler's i-th row is logits_indices[i].
  std::vector<int32_t> logits_indices;  // [s] row index into [0, t)
  std::vector<int32_t> sample_entries;  // [s] batch entry of each sampled row
};

// Fills `out` from the batch and the sequences it names. Fails (Status, `out` unspecified) when the
// batch does not match the sequences: unknown id, chunk past the sequence's tokens, block table too
// short, decodes not first.
Status build_step_inputs(const ScheduledBatch& batch, const SequenceMap& seqs, int page_size, StepInputs* out);

}  // namespace mla::engine

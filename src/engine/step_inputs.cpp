#include "mla/engine/step_inputs.h"

#include <algorithm>
#include <string>

#include "mla/engine/block_table.h"

namespace mla::engine {

Status build_step_inputs(const ScheduledBatch& batch, const SequenceMap& seqs, int page_size, StepInputs* out) {
  const char* op = "build_step_inputs";
  if (page_size < 1) return Status::invalid(op, "page_size must be >= 1");
  // Clear rather than reassign: an engine reusing one StepInputs keeps its capacity across steps.
  for (auto* v : {&out->input_ids, &out->positions, &out->query_start_loc, &out->context_lens, &out->seq_lens,
                  &out->block_tables, &out->logits_indices, &out->sample_entries}) {
    v->clear();
  }
  out->seq_ids.clear();
  out->slot_mapping.clear();
  out->num_seqs = int(batch.seqs.size());
  out->num_decodes = batch.num_decodes;
  out->num_tokens = 0;
  out->page_size = page_size;
  out->max_pages_per_seq = 0;
  out->query_start_loc.push_back(0);

  // First pass: validate and size the block-table rows.
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const ScheduledSeq& e = batch.seqs[b];
    auto it = seqs.find(e.id);
    if (it == seqs.end()) return Status::invalid(op, "unknown sequence " + std::to_string(e.id));
    const Sequence& s = it->second;
    const int end = e.position_start + e.num_new_tokens;
    const bool decode_slot = int(b) < batch.num_decodes;
    if (decode_slot != (e.kind == ChunkKind::kDecode) || (e.kind == ChunkKind::kDecode && e.num_new_tokens != 1)) {
      return Status::invalid(op, "entry " + std::to_string(b) + ": decodes (one token each) must come first");
    }
    if (e.num_new_tokens < 1 || e.position_start < 0 || end > s.num_tokens() || e.samples != (end == s.num_tokens())) {
      return Status::invalid(op, "sequence " + std::to_string(e.id) + ": chunk [" + std::to_string(e.position_start) +
                                     ", " + std::to_string(end) + ") does not fit its " +
                                     std::to_string(s.num_tokens()) + " tokens");
    }
    if (s.block_table().num_slots < end || int(s.block_table().pages.size()) < pages_for_tokens(end, page_size)) {
      return Status::invalid(op, "sequence " + std::to_string(e.id) + ": block table holds " +
                                     std::to_string(s.block_table().num_slots) + " slots, chunk ends at " +
                                     std::to_string(end));
    }
    out->max_pages_per_seq = std::max(out->max_pages_per_seq, pages_for_tokens(end, page_size));
  }

  // Second pass: the rows. Pages past seq_len are not part of this step's view, so they read as -1.
  out->block_tables.assign(size_t(out->num_seqs) * size_t(out->max_pages_per_seq), -1);
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const ScheduledSeq& e = batch.seqs[b];
    const Sequence& s = seqs.at(e.id);
    const BlockTable& table = s.block_table();
    const int end = e.position_start + e.num_new_tokens;
    out->seq_ids.push_back(e.id);
    for (int pos = e.position_start; pos < end; ++pos) {
      out->input_ids.push_back(s.tokens()[size_t(pos)]);
      out->positions.push_back(pos);
      out->slot_mapping.push_back(slot_of(table, pos, page_size));
    }
    out->query_start_loc.push_back(int32_t(out->input_ids.size()));
    out->context_lens.push_back(e.position_start);
    out->seq_lens.push_back(end);
    std::copy_n(table.pages.begin(), pages_for_tokens(end, page_size),
                out->block_tables.begin() + std::ptrdiff_t(b) * out->max_pages_per_seq);
    if (e.samples) {
      out->logits_indices.push_back(int32_t(out->input_ids.size()) - 1);
      out->sample_entries.push_back(int32_t(b));
    }
  }
  out->num_tokens = int(out->input_ids.size());
  return Status::ok();
}

}  // namespace mla::engine

#include "mla/engine/scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

namespace mla::engine {

namespace {
bool in_batch(const ScheduledBatch& batch, SeqId id) {
  return std::any_of(batch.seqs.begin(), batch.seqs.end(), [&](const ScheduledSeq& e) { return e.id == id; });
}
}  // namespace

Status SchedulerConfig::validate() const {
  const char* op = "SchedulerConfig";
  if (max_num_seqs < 1) return Status::invalid(op, "max_num_seqs must be >= 1");
  // Every running decode gets its token every step; that needs one budget token per seat.
  if (max_num_batched_tokens < max_num_seqs) {
    return Status::invalid(op, "max_num_batched_tokens (" + std::to_string(max_num_batched_tokens) +
                                   ") must be >= max_num_seqs (" + std::to_string(max_num_seqs) + ")");
  }
  MLA_TRY(BlockManager::validate_geometry(num_pages, page_size));
  if (watermark_pages < 0 || watermark_pages >= num_pages) {
    return Status::invalid(op, "watermark_pages must be in [0, num_pages)");
  }
  if (max_model_len < 0) return Status::invalid(op, "max_model_len must be >= 0 (0: no limit)");
  return Status::ok();
}

Scheduler::Scheduler(const SchedulerConfig& config) : config_(config), blocks_(config.num_pages, config.page_size) {}

Status Scheduler::check(const Sequence& seq) const {
  const char* op = "Scheduler::add";
  MLA_TRY(validate(seq.params()));
  if (seq.num_prompt_tokens() < 1) return Status::invalid(op, "empty prompt");
  if (seq.state() != SeqState::kWaiting || seq.num_computed_tokens() != 0 || !seq.block_table().empty()) {
    return Status::invalid(op, "sequence " + std::to_string(seq.id()) + " is not fresh");
  }
  // The last generated token is never fed back, so it needs no slot. A sequence that cannot fit alone
  // would be preempted forever: refuse it now.
  const int64_t total = int64_t(seq.num_prompt_tokens()) + seq.params().max_tokens;
  if (config_.max_model_len > 0 && total > config_.max_model_len) {
    return Status::invalid(op, "prompt (" + std::to_string(seq.num_prompt_tokens()) + ") + max_tokens (" +
                                   std::to_string(seq.params().max_tokens) + ") = " + std::to_string(total) +
                                   " tokens exceed max_model_len " + std::to_string(config_.max_model_len));
  }
  const int64_t need = total - 1;
  const int64_t capacity = int64_t(config_.num_pages) * config_.page_size;
  if (need > capacity) {
    return Status::invalid(op, "prompt (" + std::to_string(seq.num_prompt_tokens()) + ") + max_tokens (" +
                                   std::to_string(seq.params().max_tokens) + ") needs " + std::to_string(need) +
                                   " cache slots, the cache has " + std::to_string(capacity));
  }
  return Status::ok();
}

Status Scheduler::add(Sequence seq) {
  MLA_TRY(check(seq));
  if (seqs_.count(seq.id()) != 0) {
    return Status::invalid("Scheduler::add", "sequence id " + std::to_string(seq.id()) + " in use");
  }
  const SeqId id = seq.id();
  seqs_.emplace(id, std::move(seq));
  waiting_.push_back(id);
  return Status::ok();
}

Status Scheduler::schedule(ScheduledBatch* batch) {
  *batch = ScheduledBatch{};
  int budget = config_.max_num_batched_tokens;
  MLA_TRY(schedule_decodes(batch, &budget));
  batch->num_decodes = int(batch->seqs.size());
  MLA_TRY(schedule_running_prefills(batch, &budget));
  // A step that had to preempt is short of pages: admitting now would only preempt again.
  if (batch->preempted.empty()) MLA_TRY(admit_waiting(batch, &budget));
  batch->num_tokens = config_.max_num_batched_tokens - budget;
  return Status::ok();
}

Status Scheduler::preempt_newest(ScheduledBatch* batch) {
  const SeqId id = running_.back();
  Sequence& s = seqs_.at(id);
  MLA_TRY(blocks_.free(&s.block_table()));
  running_.pop_back();
  s.preempt();
  // Front of the queue: it was admitted before everything still waiting. Victims are taken newest
  // first, so pushing each to the front keeps their original order.
  waiting_.push_front(id);
  batch->preempted.push_back(id);
  return Status::ok();
}

Status Scheduler::add_chunk(Sequence& seq, ChunkKind kind, int n, ScheduledBatch* batch, int* budget) {
  const int end = seq.num_computed_tokens() + n;
  MLA_TRY(blocks_.allocate(&seq.block_table(), end));
  batch->seqs.push_back(ScheduledSeq{.id = seq.id(),
                                     .kind = kind,
                                     .num_new_tokens = n,
                                     .position_start = seq.num_computed_tokens(),
                                     .samples = end == seq.num_tokens()});
  *budget -= n;
  return Status::ok();
}

Status Scheduler::schedule_decodes(ScheduledBatch* batch, int* budget) {
  for (size_t i = 0; i < running_.size() && *budget > 0; ++i) {
    Sequence& s = seqs_.at(running_[i]);
    if (!s.is_decode()) continue;
    // Victims come from the back, which holds nothing scheduled yet (this pass goes front to back),
    // possibly this very sequence when it is the newest.
    while (!blocks_.can_allocate(s.block_table(), s.num_tokens()) && i < running_.size()) {
      MLA_TRY(preempt_newest(batch));
    }
    if (i >= running_.size()) break;  // s was the newest and is now preempted
    MLA_TRY(add_chunk(s, ChunkKind::kDecode, 1, batch, budget));
  }
  return Status::ok();
}

Status Scheduler::schedule_running_prefills(ScheduledBatch* batch, int* budget) {
  for (size_t i = 0; i < running_.size() && *budget > 0; ++i) {
    Sequence& s = seqs_.at(running_[i]);
    if (s.is_decode()) continue;
    const int want = std::min(s.num_uncomputed(), *budget);
    const int end = s.num_computed_tokens() + want;
    // Make room by preempting newer sequences that have nothing in this step; never an already
    // scheduled decode (its pages were just claimed for this step).
    while (!blocks_.can_allocate(s.block_table(), end) && running_.size() > i + 1 &&
           !in_batch(*batch, running_.back())) {
      MLA_TRY(preempt_newest(batch));
    }
    // Still short: take the chunk that fits. Older decodes keep running and free pages as they
    // finish, so this sequence makes progress later (or is preempted as the newest).
    const int n = std::min(want, blocks_.max_slots(s.block_table()) - s.num_computed_tokens());
    if (n <= 0) continue;
    MLA_TRY(add_chunk(s, ChunkKind::kPrefill, n, batch, budget));
  }
  return Status::ok();
}

Status Scheduler::admit_waiting(ScheduledBatch* batch, int* budget) {
  while (!waiting_.empty() && *budget > 0 && int(running_.size()) < config_.max_num_seqs) {
    Sequence& s = seqs_.at(waiting_.front());
    const int n = std::min(s.num_uncomputed(), *budget);
    // Keep the watermark for the running decodes; with nothing running, the whole cache is ours
    // (otherwise a prompt larger than the cache minus the watermark could never start).
    const int reserve = running_.empty() ? 0 : config_.watermark_pages;
    if (blocks_.pages_needed(s.block_table(), n) + reserve > blocks_.num_free_pages()) break;  // strict FCFS
    waiting_.pop_front();
    running_.push_back(s.id());
    s.set_running();
    MLA_TRY(add_chunk(s, ChunkKind::kPrefill, n, batch, budget));
  }
  return Status::ok();
}

Status Scheduler::postprocess(const ScheduledBatch& batch, const std::vector<int32_t>& sampled,
                              std::vector<SeqId>* finished) {
  const char* op = "Scheduler::postprocess";
  // Check the whole batch first so a stale or foreign batch changes nothing.
  size_t num_samples = 0;
  for (const ScheduledSeq& e : batch.seqs) {
    auto it = seqs_.find(e.id);
    if (it == seqs_.end() || it->second.state() != SeqState::kRunning ||
        it->second.num_computed_tokens() != e.position_start ||
        e.position_start + e.num_new_tokens > it->second.num_tokens()) {
      return Status::internal(op, "batch entry for sequence " + std::to_string(e.id) + " is stale");
    }
    num_samples += e.samples ? 1 : 0;
  }
  if (sampled.size() != num_samples) {
    return Status::invalid(op, "expected " + std::to_string(num_samples) + " sampled tokens, got " +
                                   std::to_string(sampled.size()));
  }
  size_t k = 0;
  for (const ScheduledSeq& e : batch.seqs) {
    Sequence& s = seqs_.at(e.id);
    s.advance_computed(e.num_new_tokens);
    if (!e.samples) continue;
    s.append_token(sampled[k++], config_.eos_token_ids);
    if (s.state() != SeqState::kFinished) continue;
    MLA_TRY(blocks_.free(&s.block_table()));
    running_.erase(std::find(running_.begin(), running_.end(), e.id));
    finished->push_back(e.id);
  }
  return Status::ok();
}

Status Scheduler::release(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end() || it->second.state() != SeqState::kFinished) {
    return Status::invalid("Scheduler::release", "sequence " + std::to_string(id) + " is not finished");
  }
  seqs_.erase(it);
  return Status::ok();
}

}  // namespace mla::engine

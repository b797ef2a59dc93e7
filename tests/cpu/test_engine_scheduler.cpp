// Scheduler: chunked prefill, decodes first, FCFS admission, preemption of the newest, and invariants
// checked after every step of long random runs (token budget, seats, pages, queue order).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "mla/engine/scheduler.h"

namespace mla::engine {
namespace {

Sequence make_seq(SeqId id, int prompt_len, int max_tokens) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i) prompt.push_back(int32_t((id * 131 + i) % 1000));
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return Sequence(id, prompt, p, 0);
}

SchedulerConfig config(int max_seqs, int budget, int pages, int page_size) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = budget;
  c.num_pages = pages;
  c.page_size = page_size;
  return c;
}

// One token per sampling entry; token 5 always (the tests here finish by length).
std::vector<int32_t> tokens_for(const ScheduledBatch& b) {
  return std::vector<int32_t>(size_t(std::count_if(b.seqs.begin(), b.seqs.end(), [](auto& e) { return e.samples; })),
                              5);
}

// Schedules a step, checks every invariant against the state before it, and applies it.
void checked_step(Scheduler& s, ScheduledBatch* batch, std::vector<SeqId>* finished) {
  const SchedulerConfig& c = s.config();
  const std::vector<SeqId> prev_running = s.running();
  const std::deque<SeqId> prev_waiting = s.waiting();
  std::set<SeqId> prev_decodes;
  for (SeqId id : prev_running) {
    if (s.sequences().at(id).is_decode()) prev_decodes.insert(id);
  }
  ASSERT_TRUE(s.schedule(batch).is_ok());

  // Budget and seats.
  int tokens = 0;
  std::set<SeqId> in_batch;
  for (const ScheduledSeq& e : batch->seqs) {
    tokens += e.num_new_tokens;
    ASSERT_TRUE(in_batch.insert(e.id).second) << "sequence scheduled twice";
  }
  ASSERT_EQ(tokens, batch->num_tokens);
  ASSERT_LE(tokens, c.max_num_batched_tokens);
  ASSERT_LE(int(s.running().size()), c.max_num_seqs);
  // Decodes first, one token each; then prefill chunks.
  for (size_t i = 0; i < batch->seqs.size(); ++i) {
    const ScheduledSeq& e = batch->seqs[i];
    ASSERT_EQ(e.kind == ChunkKind::kDecode, int(i) < batch->num_decodes);
    if (e.kind == ChunkKind::kDecode) {
      ASSERT_EQ(e.num_new_tokens, 1);
    }
    const Sequence& seq = s.sequences().at(e.id);
    ASSERT_EQ(seq.state(), SeqState::kRunning);
    ASSERT_EQ(e.position_start, seq.num_computed_tokens());
    ASSERT_GE(e.num_new_tokens, 1);
    const int end = e.position_start + e.num_new_tokens;
    ASSERT_LE(end, seq.num_tokens());
    ASSERT_EQ(e.samples, end == seq.num_tokens());
    ASSERT_GE(seq.block_table().num_slots, end);
  }
  // Decodes are never starved: each running decode runs or was preempted.
  const std::set<SeqId> preempted(batch->preempted.begin(), batch->preempted.end());
  for (SeqId id : prev_decodes) ASSERT_TRUE(in_batch.count(id) || preempted.count(id)) << "decode " << id << " starved";
  // Victims are the most recently admitted, newest first, and now wait at the front in admission order.
  for (size_t j = 0; j < batch->preempted.size(); ++j) {
    ASSERT_EQ(batch->preempted[j], prev_running[prev_running.size() - 1 - j]);
    const Sequence& v = s.sequences().at(batch->preempted[j]);
    ASSERT_EQ(v.state(), SeqState::kPreempted);
    ASSERT_EQ(v.num_computed_tokens(), 0);
    ASSERT_TRUE(v.block_table().empty());
    ASSERT_EQ(s.waiting()[batch->preempted.size() - 1 - j], batch->preempted[j]);
  }
  // FCFS: the newly admitted are the front of the previous waiting queue, in order; none after preempting.
  std::vector<SeqId> admitted;
  for (SeqId id : s.running()) {
    if (std::find(prev_running.begin(), prev_running.end(), id) == prev_running.end()) admitted.push_back(id);
  }
  if (!batch->preempted.empty()) {
    ASSERT_TRUE(admitted.empty());
  }
  for (size_t j = 0; j < admitted.size(); ++j) ASSERT_EQ(admitted[j], prev_waiting[j]);
  // Pages: running tables are consistent with the counts; waiting sequences hold none.
  std::vector<const BlockTable*> tables;
  for (SeqId id : s.running()) tables.push_back(&s.sequences().at(id).block_table());
  for (SeqId id : s.waiting()) ASSERT_TRUE(s.sequences().at(id).block_table().empty());
  ASSERT_TRUE(s.block_manager().check_consistency(tables).is_ok());

  ASSERT_TRUE(s.postprocess(*batch, tokens_for(*batch), finished).is_ok());
}

TEST(Sequence, AnyOfSeveralEosIdsFinishes) {
  // config.json may list several EOS ids (DeepSeek's is one, others have two or three).
  const std::vector<int32_t> eos = {7, 9};
  Sequence a = make_seq(1, 3, 10);
  a.append_token(5, eos);
  EXPECT_EQ(a.finish_reason(), FinishReason::kNone);
  a.append_token(9, eos);
  EXPECT_EQ(a.finish_reason(), FinishReason::kEos);
  Sequence b = make_seq(2, 3, 2);
  b.append_token(7, {});  // no EOS configured: 7 is an ordinary token
  EXPECT_EQ(b.finish_reason(), FinishReason::kNone);
  b.append_token(7, {});
  EXPECT_EQ(b.finish_reason(), FinishReason::kLength);
}

TEST(Scheduler, ConfigIsValidated) {
  EXPECT_TRUE(config(4, 64, 8, 16).validate().is_ok());
  EXPECT_FALSE(config(0, 64, 8, 16).validate().is_ok());
  EXPECT_FALSE(config(8, 4, 8, 16).validate().is_ok());  // budget below seats would starve decodes
  EXPECT_FALSE(config(4, 64, 0, 16).validate().is_ok());
  SchedulerConfig c = config(4, 64, 8, 16);
  c.watermark_pages = 8;
  EXPECT_FALSE(c.validate().is_ok());
  c = config(4, 64, 8, 16);
  c.max_model_len = -1;
  EXPECT_FALSE(c.validate().is_ok());
}

TEST(Scheduler, AddRefusesWhatCanNeverRun) {
  Scheduler s(config(4, 64, 4, 16));  // 64 slots
  EXPECT_TRUE(s.add(make_seq(0, 60, 5)).is_ok());   // 60 + 5 - 1 = 64 slots: fits exactly
  EXPECT_FALSE(s.add(make_seq(1, 60, 6)).is_ok());  // 65 slots: could never finish
  EXPECT_FALSE(s.add(make_seq(0, 4, 4)).is_ok());   // id in use
  EXPECT_FALSE(s.add(make_seq(2, 0, 4)).is_ok());   // empty prompt
  EXPECT_FALSE(s.add(make_seq(3, 4, 0)).is_ok());   // max_tokens < 1
  EXPECT_EQ(s.waiting().size(), 1u);
}

// vLLM's rule: prompt + max_tokens <= max_model_len, checked when the request arrives, with the numbers.
TEST(Scheduler, AddRefusesRequestsLongerThanMaxModelLen) {
  SchedulerConfig c = config(4, 64, 64, 16);  // 1024 slots: the cache is not what refuses here
  c.max_model_len = 100;
  Scheduler s(c);
  EXPECT_TRUE(s.add(make_seq(0, 60, 40)).is_ok());  // 100 tokens: at the limit
  const Status st = s.add(make_seq(1, 60, 41));
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("prompt (60) + max_tokens (41) = 101 tokens exceed max_model_len 100"),
            std::string::npos)
      << st.to_string();
  EXPECT_EQ(s.waiting().size(), 1u);
}

TEST(Scheduler, ChunkedPrefillSplitsAndResumes) {
  Scheduler s(config(4, 128, 64, 16));
  ASSERT_TRUE(s.add(make_seq(0, 300, 3)).is_ok());
  ScheduledBatch b;
  std::vector<SeqId> fin;
  const int starts[] = {0, 128, 256}, sizes[] = {128, 128, 44};
  for (int i = 0; i < 3; ++i) {
    checked_step(s, &b, &fin);
    ASSERT_EQ(b.seqs.size(), 1u);
    EXPECT_EQ(b.seqs[0].kind, ChunkKind::kPrefill);
    EXPECT_EQ(b.seqs[0].position_start, starts[i]);
    EXPECT_EQ(b.seqs[0].num_new_tokens, sizes[i]);
    EXPECT_EQ(b.seqs[0].samples, i == 2);  // only the chunk that completes the prompt samples
  }
  EXPECT_EQ(s.sequences().at(0).num_generated(), 1);
  checked_step(s, &b, &fin);
  EXPECT_EQ(b.num_decodes, 1);
  EXPECT_EQ(b.seqs[0].position_start, 300);
  checked_step(s, &b, &fin);
  EXPECT_EQ(fin, std::vector<SeqId>{0});
  EXPECT_EQ(s.sequences().at(0).finish_reason(), FinishReason::kLength);
  EXPECT_EQ(s.block_manager().num_free_pages(), 64);
  EXPECT_TRUE(s.release(0).is_ok());
  EXPECT_FALSE(s.has_unfinished());
}

TEST(Scheduler, PrefillChunkSharesTheStepWithDecodes) {
  Scheduler s(config(4, 64, 64, 16));
  ASSERT_TRUE(s.add(make_seq(0, 10, 50)).is_ok());
  ASSERT_TRUE(s.add(make_seq(1, 11, 50)).is_ok());
  ScheduledBatch b;
  std::vector<SeqId> fin;
  checked_step(s, &b, &fin);  // both prompts in one step
  ASSERT_EQ(b.num_tokens, 21);
  ASSERT_TRUE(s.add(make_seq(2, 200, 4)).is_ok());
  checked_step(s, &b, &fin);
  ASSERT_EQ(b.seqs.size(), 3u);
  EXPECT_EQ(b.num_decodes, 2);
  EXPECT_EQ(b.seqs[2].id, 2);
  EXPECT_EQ(b.seqs[2].num_new_tokens, 62);  // the budget left after the two decodes
  checked_step(s, &b, &fin);
  EXPECT_EQ(b.seqs[2].position_start, 62);
  EXPECT_EQ(b.num_tokens, 64);
}

TEST(Scheduler, PreemptsTheNewestAndResumesByRecompute) {
  // 6 pages of 4 tokens. Two sequences of 8 prompt tokens take 4 pages; their decodes fill the rest.
  Scheduler s(config(4, 64, 6, 4));
  ASSERT_TRUE(s.add(make_seq(0, 8, 12)).is_ok());
  ASSERT_TRUE(s.add(make_seq(1, 8, 12)).is_ok());
  ScheduledBatch b;
  std::vector<SeqId> fin;
  bool saw_preemption = false;
  for (int step = 0; step < 100 && s.has_unfinished(); ++step) {
    checked_step(s, &b, &fin);
    if (!b.preempted.empty()) {
      saw_preemption = true;
      EXPECT_EQ(b.preempted, std::vector<SeqId>{1});  // the newest, never the oldest
      EXPECT_EQ(s.waiting().front(), 1);
    }
    for (const ScheduledSeq& e : b.seqs) {
      // The victim's recompute covers prompt and generated tokens, as one prefill.
      if (e.id == 1 && s.sequences().at(1).num_preemptions() > 0 && e.position_start == 0) {
        EXPECT_EQ(e.kind, ChunkKind::kPrefill);
        EXPECT_GT(e.num_new_tokens, 8);
        EXPECT_TRUE(e.samples);
      }
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_EQ(s.sequences().at(0).num_preemptions(), 0);
  ASSERT_EQ(fin.size(), 2u);
  for (SeqId id : fin) EXPECT_EQ(s.sequences().at(id).num_generated(), 12);
  EXPECT_EQ(s.block_manager().num_free_pages(), 6);
}

TEST(Scheduler, AdmitsInArrivalOrderUnderMaxNumSeqs) {
  Scheduler s(config(2, 64, 64, 16));
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s.add(make_seq(i, 4, 1 + (i == 0 ? 2 : 5))).is_ok());
  ScheduledBatch b;
  std::vector<SeqId> fin, admission_order;
  for (int step = 0; step < 100 && s.has_unfinished(); ++step) {
    checked_step(s, &b, &fin);
    for (SeqId id : s.running()) {
      if (std::find(admission_order.begin(), admission_order.end(), id) == admission_order.end())
        admission_order.push_back(id);
    }
  }
  EXPECT_EQ(admission_order, (std::vector<SeqId>{0, 1, 2, 3, 4}));
  EXPECT_EQ(fin.size(), 5u);
}

TEST(Scheduler, PostprocessRefusesStaleBatchesAndChangesNothing) {
  Scheduler s(config(4, 64, 16, 16));
  ASSERT_TRUE(s.add(make_seq(0, 5, 4)).is_ok());
  ScheduledBatch b;
  ASSERT_TRUE(s.schedule(&b).is_ok());
  std::vector<SeqId> fin;
  EXPECT_FALSE(s.postprocess(b, {}, &fin).is_ok());      // one token expected
  EXPECT_FALSE(s.postprocess(b, {1, 2}, &fin).is_ok());
  EXPECT_EQ(s.sequences().at(0).num_computed_tokens(), 0);
  ASSERT_TRUE(s.postprocess(b, {1}, &fin).is_ok());
  EXPECT_FALSE(s.postprocess(b, {1}, &fin).is_ok());     // applied twice: stale
  EXPECT_EQ(s.sequences().at(0).num_tokens(), 6);
  EXPECT_FALSE(s.release(0).is_ok());                    // not finished
}

// Long random runs over many configurations: requests arrive over time with random lengths, the cache
// is often too small (preemption), the budget often smaller than prompts (chunking).
TEST(Scheduler, RandomWorkloadsKeepEveryInvariant) {
  std::mt19937_64 rng(99);
  auto uniform = [&](int lo, int hi) { return lo + int(rng() % uint64_t(hi - lo + 1)); };
  int64_t steps = 0, preemptions = 0, chunks = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int page_size = std::vector<int>{1, 4, 16, 64}[size_t(uniform(0, 3))];
    const int max_seqs = uniform(1, 12);
    const int budget = uniform(max_seqs, 160);
    const int max_len = uniform(8, 200);
    const int pages = uniform(pages_for_tokens(max_len + 40, page_size), pages_for_tokens(max_len * 6, page_size));
    SchedulerConfig c = config(max_seqs, budget, pages, page_size);
    c.watermark_pages = uniform(0, 1) * std::min(2, pages - 1);
    ASSERT_TRUE(c.validate().is_ok());
    Scheduler s(c);
    const int num_seqs = uniform(1, 30);
    std::vector<int> max_tokens(static_cast<size_t>(num_seqs));
    SeqId next = 0;
    std::vector<SeqId> fin;
    ScheduledBatch b;
    for (int step = 0; step < 20000 && (next < num_seqs || s.has_unfinished()); ++step) {
      for (int k = uniform(0, 2); k > 0 && next < num_seqs; --k, ++next) {
        max_tokens[size_t(next)] = uniform(1, 40);
        ASSERT_TRUE(s.add(make_seq(next, uniform(1, max_len), max_tokens[size_t(next)])).is_ok());
      }
      checked_step(s, &b, &fin);
      if (HasFatalFailure()) return;
      ++steps;
      preemptions += int64_t(b.preempted.size());
      for (const ScheduledSeq& e : b.seqs) chunks += e.kind == ChunkKind::kPrefill && !e.samples;
    }
    // Nothing lost: every sequence finished by length, every page is back.
    ASSERT_EQ(int(fin.size()), num_seqs) << "trial " << trial;
    for (SeqId id : fin) {
      EXPECT_EQ(s.sequences().at(id).num_generated(), max_tokens[size_t(id)]);
      ASSERT_TRUE(s.release(id).is_ok());
    }
    EXPECT_EQ(s.block_manager().num_free_pages(), pages);
  }
  EXPECT_GT(preemptions, 20);  // the workloads did exercise preemption and chunking
  EXPECT_GT(chunks, 20);
  RecordProperty("steps", std::to_string(steps));
}

}  // namespace
}  // namespace mla::engine

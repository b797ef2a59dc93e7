// build_step_inputs: the arrays of a mixed step (a decode and a prefill chunk), written out by hand,
// and the batches it refuses.
#include <gtest/gtest.h>

#include <vector>

#include "mla/engine/scheduler.h"
#include "mla/engine/step_inputs.h"

namespace mla::engine {
namespace {

Sequence seq(SeqId id, std::vector<int32_t> prompt, int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return Sequence(id, std::move(prompt), p, 0);
}

SchedulerConfig small_config(int budget) {
  SchedulerConfig c;
  c.max_num_seqs = 4;
  c.max_num_batched_tokens = budget;
  c.num_pages = 8;
  c.page_size = 4;
  return c;
}

TEST(EngineStepInputs, MixedDecodeAndPrefillChunk) {
  Scheduler s(small_config(6));
  ASSERT_TRUE(s.add(seq(10, {100, 101, 102, 103, 104}, 8)).is_ok());  // pages 0, 1
  ScheduledBatch b;
  std::vector<SeqId> fin;
  ASSERT_TRUE(s.schedule(&b).is_ok());
  ASSERT_TRUE(s.postprocess(b, {105}, &fin).is_ok());
  ASSERT_TRUE(s.add(seq(11, {200, 201, 202, 203, 204, 205, 206}, 8)).is_ok());
  ASSERT_TRUE(s.schedule(&b).is_ok());  // 10 decodes token 105 at position 5; 11 gets 5 of its 7 tokens

  StepInputs in;
  ASSERT_TRUE(build_step_inputs(b, s.sequences(), 4, &in).is_ok());
  EXPECT_EQ(in.num_seqs, 2);
  EXPECT_EQ(in.num_decodes, 1);
  EXPECT_EQ(in.num_tokens, 6);
  EXPECT_EQ(in.seq_ids, (std::vector<SeqId>{10, 11}));
  EXPECT_EQ(in.input_ids, (std::vector<int32_t>{105, 200, 201, 202, 203, 204}));
  EXPECT_EQ(in.positions, (std::vector<int32_t>{5, 0, 1, 2, 3, 4}));
  // seq 10 holds pages 0, 1 (slot 5 = page 1 row 1); seq 11 took pages 2, 3.
  EXPECT_EQ(in.slot_mapping, (std::vector<int64_t>{5, 8, 9, 10, 11, 12}));
  EXPECT_EQ(in.query_start_loc, (std::vector<int32_t>{0, 1, 6}));
  EXPECT_EQ(in.context_lens, (std::vector<int32_t>{5, 0}));
  EXPECT_EQ(in.seq_lens, (std::vector<int32_t>{6, 5}));
  EXPECT_EQ(in.max_pages_per_seq, 2);
  EXPECT_EQ(in.block_tables, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(in.logits_indices, (std::vector<int32_t>{0}));  // the chunk of 11 does not finish its prompt
  EXPECT_EQ(in.sample_entries, (std::vector<int32_t>{0}));

  ASSERT_TRUE(s.postprocess(b, {106}, &fin).is_ok());
  ASSERT_TRUE(s.schedule(&b).is_ok());
  ASSERT_TRUE(build_step_inputs(b, s.sequences(), 4, &in).is_ok());
  EXPECT_EQ(in.positions, (std::vector<int32_t>{6, 5, 6}));
  EXPECT_EQ(in.slot_mapping, (std::vector<int64_t>{6, 13, 14}));
  EXPECT_EQ(in.logits_indices, (std::vector<int32_t>{0, 2}));  // now both sample
  EXPECT_EQ(in.sample_entries, (std::vector<int32_t>{0, 1}));
}

TEST(EngineStepInputs, PadsShorterBlockTableRows) {
  Scheduler s(small_config(16));
  ASSERT_TRUE(s.add(seq(0, std::vector<int32_t>(9, 7), 2)).is_ok());
  ASSERT_TRUE(s.add(seq(1, {1}, 2)).is_ok());
  ScheduledBatch b;
  ASSERT_TRUE(s.schedule(&b).is_ok());
  StepInputs in;
  ASSERT_TRUE(build_step_inputs(b, s.sequences(), 4, &in).is_ok());
  EXPECT_EQ(in.max_pages_per_seq, 3);
  EXPECT_EQ(in.block_tables, (std::vector<int32_t>{0, 1, 2, 3, -1, -1}));
  EXPECT_EQ(in.logits_indices, (std::vector<int32_t>{8, 9}));
}

TEST(EngineStepInputs, RefusesBatchesThatDoNotMatch) {
  Scheduler s(small_config(16));
  ASSERT_TRUE(s.add(seq(0, {1, 2, 3}, 2)).is_ok());
  ScheduledBatch b;
  ASSERT_TRUE(s.schedule(&b).is_ok());
  StepInputs in;
  ScheduledBatch bad = b;
  bad.seqs[0].id = 99;
  EXPECT_FALSE(build_step_inputs(bad, s.sequences(), 4, &in).is_ok());  // unknown sequence
  bad = b;
  bad.seqs[0].num_new_tokens = 4;
  EXPECT_FALSE(build_step_inputs(bad, s.sequences(), 4, &in).is_ok());  // past the tokens
  bad = b;
  bad.num_decodes = 1;
  EXPECT_FALSE(build_step_inputs(bad, s.sequences(), 4, &in).is_ok());  // a prefill in the decode rows
  bad = b;
  bad.seqs[0].samples = false;
  EXPECT_FALSE(build_step_inputs(bad, s.sequences(), 4, &in).is_ok());  // completes the prompt, must sample
  EXPECT_FALSE(build_step_inputs(b, s.sequences(), 1, &in).is_ok());    // 3 slots claimed, 3 pages of 1 needed
  EXPECT_TRUE(build_step_inputs(b, s.sequences(), 4, &in).is_ok());
}

}  // namespace
}  // namespace mla::engine

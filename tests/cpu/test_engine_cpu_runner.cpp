// The engine on the CPU model backend with the tiny fixture model (tests/fixtures/tiny): batched greedy
// equals single-request greedy token for token with chunked prefill (a token budget smaller than the
// prompts, so some steps carry only prefill chunks and sample nothing), and under a cache too small for
// all requests at once (preemption by recompute).
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "mla/engine/llm_engine.h"
#include "mla/loader/weights_loader.h"
#include "mla/runner/cpu_model_runner.h"

namespace mla::engine {
namespace {

std::unique_ptr<runner::CpuModelRunner> make_runner(int num_pages) {
  model::ModelWeights w;
  const std::string dir = std::filesystem::path(__FILE__).parent_path().parent_path().string() + "/fixtures/tiny";
  Status s = loader::load_model(dir, &w, {.progress = loader::ProgressMode::kOff});
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  std::unique_ptr<runner::CpuModelRunner> r;
  s = runner::CpuModelRunner::create(std::move(w), num_pages, 64, &r);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

std::vector<std::vector<int32_t>> generate(int num_pages, int budget, const std::vector<Request>& reqs,
                                           int64_t* preempted) {
  auto r = make_runner(num_pages);
  EngineConfig c;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.num_pages = num_pages;
  c.scheduler.page_size = 64;
  std::unique_ptr<LLMEngine> e;
  EXPECT_TRUE(LLMEngine::create(c, r.get(), &e).is_ok());
  std::vector<RequestOutput> out;
  const Status s = e->generate(reqs, &out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (preempted) *preempted = e->stats().num_preemptions;
  std::vector<std::vector<int32_t>> toks;
  for (const auto& o : out) toks.push_back(o.output_token_ids);
  return toks;
}

TEST(EngineCpuRunner, BatchedGreedyEqualsSingleWithChunkedPrefillAndPreemption) {
  std::mt19937_64 rng(4);
  std::vector<Request> reqs(5);
  for (Request& r : reqs) {
    // 56..63 tokens: a page each at admission, a second one a few decodes later -- when 3 pages are
    // shared by 5 sequences, someone is preempted.
    r.prompt_token_ids.resize(56 + rng() % 8);
    for (auto& t : r.prompt_token_ids) t = int32_t(2 + rng() % 500);
    r.params.temperature = 0.f;
    r.params.max_tokens = 10 + int(rng() % 6);
    r.params.ignore_eos = true;
  }
  std::vector<std::vector<int32_t>> single;
  for (const Request& r : reqs) single.push_back(generate(64, 256, {r}, nullptr).at(0));
  const auto batched = generate(64, 24, reqs, nullptr);  // 24 tokens a step: chunk-only steps happen
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batched[i], single[i]) << "request " << i;
  int64_t preempted = 0;
  const auto squeezed = generate(3, 24, reqs, &preempted);  // 3 pages for 5 sequences
  EXPECT_GT(preempted, 0);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(squeezed[i], single[i]) << "request " << i << " (preemption)";
}

}  // namespace
}  // namespace mla::engine

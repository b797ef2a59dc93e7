// The engine on the CUDA backend (tiny fixture model, tests/fixtures/tiny), issue 8's GPU test:
//  - batched greedy == single-request greedy, token for token, with chunked prefill (a small token budget
//    splits prompts across steps that also carry decodes) and CUDA graphs on; also under a cache too
//    small for all requests (preemption by recompute);
//  - graphs vs eager: the same batch with --enforce-eager gives the same tokens; and against a runner that
//    runs the graph's padded decode steps eagerly, every step's logits are identical bit for bit (greedy and
//    seeded top-k/top-p requests);
//  - the graph path is really taken (replayed steps counted), and the eager runner never replays;
//  - KV pool and activation arena re-sized after profiled start-up steps give the same tokens.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/device_buffer.h"
#include "mla/engine/llm_engine.h"
#include "mla/loader/weights_loader.h"
#include "mla/runner/cuda_model_runner.h"

namespace mla {
namespace {

using engine::EngineConfig;
using engine::LLMEngine;
using engine::Request;
using engine::RequestOutput;
using runner::CudaModelRunner;
using runner::CudaRunnerOptions;

std::string fixtures_dir() {
  if (const char* e = std::getenv("MLA_FIXTURES_DIR")) return e;
  const std::string compiled = std::filesystem::path(__FILE__).parent_path().parent_path().string() + "/fixtures";
  if (std::filesystem::exists(compiled + "/tiny/config.json")) return compiled;
  return "tests/fixtures";
}

const model::ModelWeights& tiny() {
  static model::ModelWeights w;
  static bool loaded = false;
  if (!loaded) {
    const Status s = loader::load_model(fixtures_dir() + "/tiny", &w, {.progress = loader::ProgressMode::kOff});
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    loaded = true;
  }
  return w;
}

constexpr int kMaxSeqs = 8;

model::CudaBackendOptions runner_options(int num_pages, int64_t table_width) {
  model::CudaBackendOptions o;
  o.num_pages = num_pages;
  o.max_batch_tokens = 256;
  o.max_num_seqs = kMaxSeqs;
  o.max_pages_per_seq = table_width;
  o.activation_bytes = size_t{256} << 20;
  o.scratch_bytes = size_t{128} << 20;
  return o;
}

// table_width 0: derived from the pool (max_position_embeddings pages, at most num_pages).
std::unique_ptr<CudaModelRunner> make_runner(int num_pages, const CudaRunnerOptions& ro, int64_t table_width = 0) {
  // Runners compared here must compute the same bits, but each backend picks cuBLASLt or the grouped kernel
  // for decode-size products by timing them (small_m_gemm.cpp), and the two round differently: pin the path.
  // (The choice itself is tested in gpu_test_model_ops.)
  setenv("MLA_DENSE_PATH", "cublaslt", 1);
  std::unique_ptr<CudaModelRunner> r;
  const Status s = CudaModelRunner::create(tiny(), runner_options(num_pages, table_width), &r, ro);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return r;
}

CudaRunnerOptions eager() {
  CudaRunnerOptions o;
  o.enforce_eager = true;
  return o;
}
CudaRunnerOptions padded_eager() {
  CudaRunnerOptions o;
  o.pad_eager_decode = true;
  return o;
}

std::unique_ptr<LLMEngine> make_engine(CudaModelRunner* r, int budget) {
  EngineConfig c;
  c.scheduler.max_num_seqs = kMaxSeqs;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.num_pages = r->num_pages();
  c.scheduler.page_size = 64;
  c.seed = 5;
  std::unique_ptr<LLMEngine> e;
  const Status s = LLMEngine::create(c, r, &e);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return e;
}

// Prompts of 5..140 tokens (page boundaries crossed), greedy or seeded top-k/top-p.
std::vector<Request> requests(int n, bool sampled, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Request> reqs(static_cast<size_t>(n));
  for (Request& r : reqs) {
    r.prompt_token_ids.resize(5 + rng() % 136);
    for (auto& t : r.prompt_token_ids) t = int32_t(2 + rng() % 500);
    r.params.max_tokens = 20 + int(rng() % 12);
    r.params.ignore_eos = true;
    if (sampled) {
      r.params.temperature = 0.8f, r.params.top_k = 40, r.params.top_p = 0.9f, r.params.seed = rng();
    } else {
      r.params.temperature = 0.f;
    }
  }
  return reqs;
}

std::vector<std::vector<int32_t>> generate(CudaModelRunner* r, const std::vector<Request>& reqs, int budget,
                                           int64_t* preemptions = nullptr) {
  auto e = make_engine(r, budget);
  std::vector<RequestOutput> out;
  const Status s = e->generate(reqs, &out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (preemptions) *preemptions = e->stats().num_preemptions;
  std::vector<std::vector<int32_t>> toks;
  for (const auto& o : out) toks.push_back(o.output_token_ids);
  return toks;
}

void expect_same(const std::vector<std::vector<int32_t>>& a, const std::vector<std::vector<int32_t>>& b,
                 const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << what << ": request " << i;
}

TEST(EngineCuda, BatchedGreedyEqualsSingleWithChunkedPrefillAndGraphs) {
  auto g = make_runner(64, {});
  ASSERT_TRUE(g->stats().graphs_off.empty()) << g->stats().graphs_off;
  const auto reqs = requests(7, false, 1);
  std::vector<std::vector<int32_t>> single;
  for (const Request& r : reqs) single.push_back(generate(g.get(), {r}, 256).at(0));
  const int64_t replays_before = g->stats().graph_steps;
  const auto batched = generate(g.get(), reqs, 48);  // 48 tokens a step: prompts split, decodes ride along
  EXPECT_GT(g->stats().graph_steps, replays_before) << "no decode step was replayed from a graph";
  expect_same(batched, single, "batched (chunked prefill, graphs) vs single");

  auto e = make_runner(64, eager());
  EXPECT_EQ(e->stats().graphs_off, "--enforce-eager");
  const auto eager = generate(e.get(), reqs, 48);
  EXPECT_EQ(e->stats().graph_steps, 0);
  expect_same(eager, batched, "enforce-eager vs graphs");

  // A cache too small for everyone at once: 12 pages for ~7 × 3 needed -> preemption by recompute.
  auto small = make_runner(12, {});
  int64_t preempted = 0;
  const auto squeezed = generate(small.get(), reqs, 48, &preempted);
  EXPECT_GT(preempted, 0) << "the 12-page cache was meant to force preemption";
  expect_same(squeezed, single, "preempted (12 pages) vs single");
  std::printf("graph steps %lld, eager steps %lld (batched run incl. singles); small cache: graph %lld, eager %lld\n",
              (long long)g->stats().graph_steps, (long long)g->stats().eager_steps,
              (long long)small->stats().graph_steps, (long long)small->stats().eager_steps);
}

// Start-up sizing from profiled peaks (CudaRunnerOptions::num_pages_for): the runner profiles the two largest
// steps on a provisional arena and a pool just big enough for them, then re-allocates both. The re-allocated
// arena must carry every later step (an undersized one fails a step with an out-of-memory Status), the pool
// must have the asked size, graphs are captured after the re-allocation, and the tokens equal a runner built
// at its final size directly.
TEST(EngineCuda, ProfiledSizingKeepsTokens) {
  CudaRunnerOptions ro;
  size_t asked_for = 0;
  ro.num_pages_for = [&asked_for](size_t arena_bytes) -> int64_t {
    asked_for = arena_bytes;
    return 40;
  };
  // The table width is fixed before the pool is re-sized, so it is stated (the engine always does).
  auto r = make_runner(256 / 64 + kMaxSeqs + 2, ro, 40);  // the profiling steps' pages only
  ASSERT_TRUE(r);
  const auto& st = r->stats();
  EXPECT_EQ(r->num_pages(), 40);
  EXPECT_EQ(st.activation_bytes, asked_for);
  EXPECT_GT(st.decode_peak, 0u);
  EXPECT_GE(st.activation_bytes, st.prefill_peak);  // the re-sized arena holds the larger (running maximum) peak
  EXPECT_LT(st.activation_bytes, st.provisional_activation_bytes);
  EXPECT_TRUE(st.graphs_off.empty()) << st.graphs_off;
  std::printf("profiled sizing: decode peak %zu B, max peak %zu B, arena %zu B (provisional %zu B), 40 pages\n",
              st.decode_peak, st.prefill_peak, st.activation_bytes, st.provisional_activation_bytes);
  const auto reqs = requests(7, false, 3);
  auto direct = make_runner(40, {}, 40);
  expect_same(generate(r.get(), reqs, 48), generate(direct.get(), reqs, 48), "profiled sizing vs sized directly");
  EXPECT_GT(r->stats().graph_steps, 0);
}

// Without a stated table width, the width would be derived from the provisional pool and silently cap
// every sequence at that pool's size: create() refuses instead, before allocating anything.
TEST(EngineCuda, ProfiledSizingNeedsTableWidth) {
  CudaRunnerOptions ro;
  bool called = false;
  ro.num_pages_for = [&called](size_t) -> int64_t { return called = true, 40; };
  std::unique_ptr<CudaModelRunner> r;
  const Status s = CudaModelRunner::create(tiny(), runner_options(8, 0), &r, ro);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("max_pages_per_seq"), std::string::npos) << s.to_string();
  EXPECT_FALSE(r);
  EXPECT_FALSE(called);
}

TEST(EngineCuda, GraphReplayEqualsEagerBitForBit) {
  auto g = make_runner(64, {});
  auto p = make_runner(64, padded_eager());
  ASSERT_TRUE(g->stats().graphs_off.empty()) << g->stats().graphs_off;
  auto reqs = requests(6, true, 2);
  const auto greedy = requests(2, false, 3);
  reqs.insert(reqs.end(), greedy.begin(), greedy.end());
  auto eg = make_engine(g.get(), 64), ep = make_engine(p.get(), 64);
  for (const Request& r : reqs) {
    engine::SeqId id;
    ASSERT_TRUE(eg->add_request(r, &id).is_ok());
    ASSERT_TRUE(ep->add_request(r, &id).is_ok());
  }
  std::vector<RequestOutput> fg, fp;
  int steps = 0, compared_graph_steps = 0;
  while (eg->has_unfinished() || ep->has_unfinished()) {
    const int64_t before = g->stats().graph_steps;
    ASSERT_TRUE(eg->step(&fg).is_ok());
    ASSERT_TRUE(ep->step(&fp).is_ok());
    std::vector<float> lg, lp;
    ASSERT_TRUE(g->download_last_logits(&lg).is_ok());
    ASSERT_TRUE(p->download_last_logits(&lp).is_ok());
    ASSERT_EQ(lg.size(), lp.size()) << "step " << steps;
    EXPECT_EQ(std::memcmp(lg.data(), lp.data(), lg.size() * 4), 0) << "step " << steps << " logits differ";
    compared_graph_steps += g->stats().graph_steps > before;
    ++steps;
    ASSERT_LT(steps, 500);
  }
  EXPECT_GT(compared_graph_steps, 10);
  EXPECT_EQ(p->stats().graph_steps, 0);
  ASSERT_EQ(fg.size(), reqs.size());
  ASSERT_EQ(fp.size(), reqs.size());
  for (size_t i = 0; i < fg.size(); ++i)
    EXPECT_EQ(fg[i].output_token_ids, fp[i].output_token_ids) << "request " << fg[i].id;
  std::printf("%d steps compared, %d of them replayed from graphs\n", steps, compared_graph_steps);
}

}  // namespace
}  // namespace mla

// The CUDA model against the CPU model on the fixture models (tests/fixtures/tiny, tiny-qlora): the same
// teacher-forced token streams through both backends, logits compared row by row. The issue's bar:
// top-1 agreement >= 99 % (misses that the row's own measured logit error explains excused: see
// count_row) and relative logit error (L2 over all compared rows) <= 2e-2 with a bf16 KV cache. Covers whole-prompt
// prefill (page boundaries at 64 crossed), several sequences in one step, chunked prefill continuing a cache, decode
// steps mixing sequences, and forced absorbed attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/random.h"
#include "harness/scoped_env.h"
#include "mla/core/half.h"
#include "mla/loader/safetensors.h"
#include "mla/loader/weights_loader.h"
#include "mla/model/cpu_backend.h"
#include "mla/model/cuda_backend.h"
#include "mla/model/config.h"
#include "mla/model/deepseek_v2.h"

namespace mla::model {
namespace {

// MLA_FIXTURES_DIR if set; else the source tree this was compiled from; else ./tests/fixtures (a binary
// built on one machine and run from the repository root of a copy elsewhere).
std::string fixtures_dir() {
  if (const char* e = std::getenv("MLA_FIXTURES_DIR")) return e;
  const std::string compiled = std::filesystem::path(__FILE__).parent_path().parent_path().string() + "/fixtures";
  if (std::filesystem::exists(compiled + "/tiny/config.json")) return compiled;
  return "tests/fixtures";
}

// The CPU backend, with each step's routing margins recorded: for every token, over the MoE layers, the
// smallest gap in router logits that decides its experts (greedy: k-th vs (k+1)-th expert; group-limited:
// also the topk_group-th vs next group's best expert), relative to the row's router-logit RMS. A token
// whose gap is within the device's noise may legitimately take another expert on the GPU (bf16 router
// input), which changes its output by far more than rounding: the comparison sets such rows apart.
class RoutingProbe final : public Backend {
 public:
  explicit RoutingProbe(std::unique_ptr<CpuBackend> be) : be_(std::move(be)) {}
  // [t] of the last step: the smallest relative routing gap of each token (+inf without MoE layers).
  const std::vector<double>& margins() const { return margins_; }

  const ModelWeights& weights() const override { return be_->weights(); }
  Status begin_step(const ForwardBatch& b) override {
    margins_.assign(size_t(b.num_tokens()), std::numeric_limits<double>::infinity());
    return be_->begin_step(b);
  }
  TensorView alloc(int64_t rows, int64_t cols) override { return be_->alloc(rows, cols); }
  TensorView alloc_fp32(int64_t rows, int64_t cols) override { return be_->alloc_fp32(rows, cols); }
  void release_sequence(int64_t seq_id) override { be_->release_sequence(seq_id); }
  Status embed(TensorView out) override { return be_->embed(out); }
  Status rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) override {
    return be_->rmsnorm(x, w, eps, out);
  }
  Status add_rmsnorm(const TensorView& x, TensorView residual, const TensorView& w, float eps,
                     TensorView out) override {
    return be_->add_rmsnorm(x, residual, w, eps, out);
  }
  Status linear(const TensorView& x, const TensorView& w, TensorView out) override { return be_->linear(x, w, out); }
  Status rope(TensorView q, TensorView latent) override { return be_->rope(q, latent); }
  Status mla_attention(int layer, const TensorView& q, const TensorView& latent, const AttentionWeights& w,
                       AttnPath path, TensorView out) override {
    return be_->mla_attention(layer, q, latent, w, path, out);
  }
  Status silu_mul(const TensorView& gate, const TensorView& up, TensorView out) override {
    return be_->silu_mul(gate, up, out);
  }
  Status gather_logit_rows(const TensorView& x, TensorView out) override { return be_->gather_logit_rows(x, out); }
  Status moe(const TensorView& x, const MoeWeights& w, TensorView out) override {
    record_margins(x, w);
    return be_->moe(x, w, out);
  }

 private:
  void record_margins(const TensorView& x, const MoeWeights& w) {
    const ModelConfig& c = be_->weights().config;
    if (x.dtype != DType::kFp32) return;  // the CPU backend's activations are fp32
    const int64_t H = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
    const auto weight = [&](int64_t e, int64_t i) {
      const int64_t j = e * H + i;
      return w.gate.dtype == DType::kBf16 ? double(bf16_to_float(w.gate.ptr<const uint16_t>()[j]))
                                          : double(w.gate.ptr<const float>()[j]);
    };
    for (int64_t t = 0; t < x.shape[0]; ++t) {
      const float* xr = x.ptr<const float>() + t * x.stride[0];
      std::vector<double> l(size_t(E), 0.0);
      double ss = 0;
      for (int64_t e = 0; e < E; ++e) {
        for (int64_t i = 0; i < H; ++i) l[size_t(e)] += double(xr[i]) * weight(e, i);
        ss += l[size_t(e)] * l[size_t(e)];
      }
      double gap = std::numeric_limits<double>::infinity();
      std::vector<double> pool = l;  // experts the top-k is taken from
      if (c.topk_method == TopkMethod::kGroupLimitedGreedy) {
        const int64_t per = E / c.n_group;
        std::vector<std::pair<double, int64_t>> g;
        for (int64_t q = 0; q < c.n_group; ++q)
          g.push_back({*std::max_element(l.begin() + q * per, l.begin() + (q + 1) * per), q});
        std::sort(g.rbegin(), g.rend());
        if (c.topk_group < c.n_group) gap = g[size_t(c.topk_group - 1)].first - g[size_t(c.topk_group)].first;
        pool.clear();
        for (int64_t q = 0; q < c.topk_group; ++q)
          pool.insert(pool.end(), l.begin() + g[size_t(q)].second * per, l.begin() + (g[size_t(q)].second + 1) * per);
      }
      std::sort(pool.rbegin(), pool.rend());
      if (int64_t(pool.size()) > k) gap = std::min(gap, pool[size_t(k - 1)] - pool[size_t(k)]);
      margins_[size_t(t)] = std::min(margins_[size_t(t)], gap / std::sqrt(ss / double(E)));
    }
  }
  std::unique_ptr<CpuBackend> be_;
  std::vector<double> margins_;
};

struct Models {
  std::unique_ptr<RoutingProbe> cpu;
  std::unique_ptr<CudaBackend> gpu;
};

// Both backends over the same weights (the CPU one takes them).
Models make_models(ModelWeights w, bool prefill_attention, KvFormat kv) {
  Models m;
  CudaBackendOptions o;
  o.num_pages = 64;
  o.max_batch_tokens = 1024;
  o.activation_bytes = size_t{256} << 20;
  o.scratch_bytes = size_t{128} << 20;
  o.prefill_attention = prefill_attention;
  o.kv_format = kv;
  const Status sg = CudaBackend::create(w, o, &m.gpu);
  EXPECT_TRUE(sg.is_ok()) << sg.to_string();
  std::unique_ptr<CpuBackend> cpu;
  const Status sc = CpuBackend::create(std::move(w), &cpu);
  EXPECT_TRUE(sc.is_ok()) << sc.to_string();
  if (cpu) m.cpu = std::make_unique<RoutingProbe>(std::move(cpu));
  return m;
}

Models load(const std::string& name, bool prefill_attention, KvFormat kv = KvFormat::kBf16) {
  ModelWeights w;
  Status s = loader::load_model(fixtures_dir() + "/" + name, &w, {.progress = loader::ProgressMode::kOff});
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  if (!s.is_ok()) return {};
  return make_models(std::move(w), prefill_attention, kv);
}

// Accumulated agreement over every compared logits row.
struct Agreement {
  int64_t rows = 0, top1 = 0;
  int64_t near_tie_misses = 0;  // top-1 disagreements the row's logit error explains (count_row)
  double diff2 = 0, ref2 = 0;
  int64_t nonfinite = 0;
  std::vector<std::string> counted_misses;  // the others, with their margins (printed by expect_bar)
  // Rows at routing near-ties (kRoutingTie), set apart from both bars: how many, their worst relative
  // error; and the worst relative error of a compared row with its routing margin.
  int64_t routing_ties = 0;
  double tie_worst = 0, worst = 0, worst_margin = 0;
  // Worst relative error of a compared row routed within 2 kRoutingTie of a tie (3-6 sigma of the router
  // noise): such a row still counts in the pooled error and top-1, but a rare flip there (seen on the H200:
  // margin 0.022, row error 0.31, seed 66397473988) is not the broadly wrong row the per-row bound is for.
  double near_tie_worst = 0;
  double rel() const { return ref2 > 0 ? std::sqrt(diff2 / ref2) : 0; }
  double top1_rate() const { return rows ? double(top1) / double(rows) : 0; }
  std::string str() const {
    char b[480];
    std::snprintf(b, sizeof b,
                  "rows %lld, top-1 agreement %.4f (misses within the row's noise: %lld, counted: %zu), relative logit "
                  "error %.3e "
                  "(worst row %.3e, routing margin %.3f; within 2x the tie margin %.3e), nonfinite %lld; set apart at "
                  "routing near-ties: %lld rows (worst row %.3e)",
                  static_cast<long long>(rows), top1_rate(), static_cast<long long>(near_tie_misses),
                  counted_misses.size(), rel(), worst, worst_margin, near_tie_worst, static_cast<long long>(nonfinite),
                  static_cast<long long>(routing_ties), tie_worst);
    return b;
  }
};

// Adds one logits row (g: tested, c: reference) to `a`.
// Top-1: a disagreement is excused when the reference's margin between its winner and ours is within
// 3 sigma of the error this very row shows: the two logits' errors differ by about sqrt(2) x the row's RMS
// logit error e (lm_head mixes the hidden state's error into every logit alike), so a margin under
// 3·sqrt(2)·e flips by noise alone in a few rows of a few hundred, and is no defect. A miss beyond that
// margin counts against the 99 % bar: an error concentrated on the top logits, which the L2 bar would not
// see. (The earlier fixed 1e-2 margin was below the noise these bf16 models show: relative error up to
// 1.9e-2 at logit RMS ~1 means e ~ 1e-2 and margin noise ~1.4e-2, so a correct model could fail the 99 % bar
// on noise, as ForcedExpandedMatchesCpu's 79/80 may have.) The raw rate is printed, counted misses with
// their numbers.
//
// Rows whose token was routed at a near-tie on the CPU (routing_margin < kRoutingTie, see RoutingProbe)
// are set apart: the GPU may pick the other expert there, a discrete change no tolerance on rounding
// covers. kRoutingTie: the GPU's router input is the bf16 MoE input, relative error ~5e-3 (rounding
// plus the layers before; the whole model's logits show 5e-3 - 1e-2), so a gap between two router logits
// of RMS r carries noise ~sqrt(2)·5e-3·r: 2e-2·r is 3 sigma. About 5 % of random tokens fall under it
// with these routers (8 experts, top-3); the count is printed and capped in expect_bar, so the rule
// cannot hide a model that routes wrongly everywhere. Fixtures have 2 layers with the MoE last, so a
// flip changes only its own row.
constexpr double kRoutingTie = 2e-2;

// The most near-tie rows a correct model shows among n compared rows: ties are ~Binomial(n, ~5 %) (above);
// the cap is that distribution's 1e-6 upper tail at p = 6 %, so a correct model trips it about once in a
// million runs while a model whose margins are wrong everywhere (ties in most rows) still fails. (The
// earlier 15 % + 1 cap allowed one tie among 4 rows and failed ~1 % of correct runs: 2 ties of 4 rows on the
// H200 with MLA_TEST_SEED=264359509242, GPU error 4.4e-3 on those rows.)
// With only a few rows the bound is loose (4 of 4 rows for n = 4): those cases still fail when every row is a
// near-tie (expect_bar wants rows > 0), and the many-row cases carry the check. The pmf runs in log space so
// large n does not underflow (0.94^n is 0 in double past n ~ 11 500).
int64_t max_routing_ties(int64_t n) {
  const double p = 0.06;
  double tail = 1.0, log_pmf = double(n) * std::log1p(-p);  // tail = P(X >= k), log_pmf = log P(X = k)
  for (int64_t k = 0; k <= n; ++k) {
    tail -= std::exp(log_pmf);  // now P(X > k)
    if (tail < 1e-6) return k;
    log_pmf += std::log(double(n - k) / double(k + 1) * p / (1.0 - p));
  }
  return n;
}

void count_row(const float* g, const float* c, int64_t vocab, Agreement* a,
               double routing_margin = std::numeric_limits<double>::infinity()) {
  double d2 = 0, r2 = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!std::isfinite(g[v])) ++a->nonfinite;
    d2 += double(g[v] - c[v]) * double(g[v] - c[v]);
    r2 += double(c[v]) * double(c[v]);
  }
  const double row_rel = std::sqrt(d2 / std::max(r2, 1e-30));
  if (routing_margin < kRoutingTie) {
    ++a->routing_ties;
    a->tie_worst = std::max(a->tie_worst, row_rel);
    return;
  }
  if (routing_margin < 2 * kRoutingTie) {
    a->near_tie_worst = std::max(a->near_tie_worst, row_rel);
  } else if (row_rel > a->worst) {
    a->worst = row_rel;
    a->worst_margin = routing_margin;
  }
  a->diff2 += d2;
  a->ref2 += r2;
  const int64_t gi = std::max_element(g, g + vocab) - g, ci = std::max_element(c, c + vocab) - c;
  const double margin = double(c[ci]) - double(c[gi]), e = std::sqrt(d2 / double(vocab));
  if (gi == ci) {
    ++a->top1;
  } else if (margin < 3.0 * std::sqrt(2.0) * e) {
    ++a->near_tie_misses;
  } else {
    char b[160];
    std::snprintf(b, sizeof b, "row %lld: reference top-1 %lld beats ours (%lld) by %.3e; row RMS error %.3e",
                  static_cast<long long>(a->rows), static_cast<long long>(ci), static_cast<long long>(gi), margin, e);
    a->counted_misses.push_back(b);
  }
  ++a->rows;
}

// One step on both backends; logits rows compared.
Status step_both(Models& m, const ForwardBatch& b, int64_t vocab, Agreement* a) {
  TensorView lc, lg;
  DeepseekV2 cpu_model(m.cpu.get()), gpu_model(m.gpu.get());
  MLA_TRY(cpu_model.forward(b, &lc));
  MLA_TRY(gpu_model.forward(b, &lg));
  std::vector<float> got;
  MLA_TRY(m.gpu->download(lg, &got));
  const float* ref = lc.ptr<float>();
  if (static_cast<int64_t>(got.size()) != lc.shape[0] * vocab || lg.shape[1] != vocab)
    return Status::internal("test", "logits shapes differ: " + lg.str() + " vs " + lc.str());
  for (int64_t r = 0; r < lc.shape[0]; ++r) {
    const int64_t token = b.logits_rows.empty() ? r : b.logits_rows[size_t(r)];
    count_row(&got[size_t(r * vocab)], ref + r * lc.stride[0], vocab, a, m.cpu->margins()[size_t(token)]);
  }
  return Status::ok();
}

// step_both, its failure reported as the test's; true when the step ran.
bool expect_step(Models& m, const ForwardBatch& b, int64_t vocab, Agreement* a) {
  const Status s = step_both(m, b, vocab, a);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return s.is_ok();
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = int32_t(rng() % uint64_t(vocab));
  return v;
}

ForwardBatch chunk(const std::vector<int32_t>& ids, int64_t from, int64_t to, int64_t seq,
                   AttnPath path = AttnPath::kAuto) {
  ForwardBatch b;
  b.token_ids.assign(ids.begin() + from, ids.begin() + to);
  b.seqs = {{.seq_id = seq, .start_pos = from, .num_tokens = to - from}};
  b.attn_path = path;
  return b;
}

// Appends chunk [from, to) of sequence `seq` to a multi-sequence batch.
void add_chunk(ForwardBatch* b, const std::vector<int32_t>& ids, int64_t from, int64_t to, int64_t seq) {
  b->token_ids.insert(b->token_ids.end(), ids.begin() + from, ids.begin() + to);
  b->seqs.push_back({.seq_id = seq, .start_pos = from, .num_tokens = to - from});
}

void release(Models& m, int64_t seq) {
  m.cpu->release_sequence(seq);
  m.gpu->release_sequence(seq);
}

void expect_bar(const Agreement& a, const std::string& what) {
  std::printf("[model] %s: %s\n", what.c_str(), a.str().c_str());
  for (const std::string& m : a.counted_misses) std::printf("[model]   counted miss: %s\n", m.c_str());
  EXPECT_EQ(a.nonfinite, 0) << what;
  EXPECT_GT(a.rows, 0) << what;
  // Routing near-ties expected in ~5 % of rows (count_row); far more would mean the margins are wrong.
  EXPECT_LE(a.routing_ties, max_routing_ties(a.rows + a.routing_ties)) << what << ": " << a.str();
  // The issue's bar for bf16 weights, activations and KV cache against the fp32 CPU model.
  EXPECT_LE(a.rel(), 2e-2) << what << ": " << a.str();
  // And per row: a broadly wrong row excuses its own top-1 miss (count_row) and a few of them can hide under
  // the pooled bar. Worst compared row measured on the H200: 1.6e-2 (every case, 3 repetitions); 5e-2 leaves 3x.
  EXPECT_LE(a.worst, 5e-2) << what << ": " << a.str();
  // Top-1 >= 99 %, misses the row's own error explains excused (count_row). Under 100 rows this allows
  // no counted miss at all; the cases that compare only a few rows say so.
  EXPECT_GE(double(a.top1 + a.near_tie_misses), 0.99 * double(a.rows)) << what << ": " << a.str();
}

// (fixture, prefill chunks through prefill_attention (true) or through the absorbed path (false)).
class CudaForward : public ::testing::TestWithParam<std::tuple<const char*, bool>> {
 protected:
  const char* fixture() const { return std::get<0>(GetParam()); }
  bool expanded() const { return std::get<1>(GetParam()); }
  std::string label() const { return std::string(fixture()) + (expanded() ? " expanded" : " absorbed-only"); }
};

// Whole prompts, one per step, lengths around the 64-token page size; then all of them in one step.
TEST_P(CudaForward, PrefillMatchesCpu) {
  Models m = load(fixture(), expanded());
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size;
  auto rng = mla::test::case_rng("prefill" + label());
  Agreement a;
  const std::vector<int64_t> lens = {1, 7, 63, 64, 65, 150};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lens.size(); ++i) {
    prompts.push_back(random_ids(rng, lens[i], V));
    Status s = step_both(m, chunk(prompts[i], 0, lens[i], int64_t(i)), V, &a);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    release(m, int64_t(i));
  }
  ForwardBatch all;
  for (size_t i = 0; i < lens.size(); ++i) add_chunk(&all, prompts[i], 0, lens[i], int64_t(100 + i));
  Status s = step_both(m, all, V, &a);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  expect_bar(a, label() + " prefill");
}

// Chunked prefill continuing each sequence's cache, then decode steps over several sequences at once,
// one of them joining late with its own prefill chunk in the same step (a mixed batch).
TEST_P(CudaForward, ChunkedPrefillThenDecodeMatchesCpu) {
  Models m = load(fixture(), expanded());
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size;
  auto rng = mla::test::case_rng("decode" + label());
  const std::vector<int32_t> s0 = random_ids(rng, 160, V), s1 = random_ids(rng, 100, V), s2 = random_ids(rng, 90, V);
  Agreement a;
  auto run = [&](const ForwardBatch& b) { return expect_step(m, b, V, &a); };
  ASSERT_TRUE(run(chunk(s0, 0, 50, 0)));
  ASSERT_TRUE(run(chunk(s0, 50, 130, 0)));
  ASSERT_TRUE(run(chunk(s1, 0, 70, 1)));
  for (int64_t i = 0; i < 30; ++i) {
    ForwardBatch b;
    add_chunk(&b, s0, 130 + i, 131 + i, 0);
    add_chunk(&b, s1, 70 + i, 71 + i, 1);
    if (i == 10) add_chunk(&b, s2, 0, 60, 2);  // a prefill chunk in a decode batch
    if (i > 10 && 60 + i - 11 < 90) add_chunk(&b, s2, 60 + i - 11, 61 + i - 11, 2);
    b.logits_rows.clear();
    ASSERT_TRUE(run(b));
  }
  expect_bar(a, label() + " chunked prefill + decode");
  EXPECT_EQ(m.gpu->cached_tokens(0), 160);
  EXPECT_EQ(m.gpu->cached_tokens(1), 100);
}

// logits_rows selects rows before lm_head; forced absorbed attention on prefill chunks. Four rows: the
// 99 % bar means all four (misses explained by their row's error aside); the rates are measured above.
TEST_P(CudaForward, LogitsRowsAndForcedAbsorbedMatchCpu) {
  Models m = load(fixture(), expanded());
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size;
  auto rng = mla::test::case_rng("rows" + label());
  const std::vector<int32_t> p = random_ids(rng, 90, V), q = random_ids(rng, 40, V);
  Agreement a;
  ForwardBatch b;
  add_chunk(&b, p, 0, 90, 7);
  add_chunk(&b, q, 0, 40, 8);
  b.logits_rows = {89, 129, 0, 64};
  b.attn_path = AttnPath::kAbsorbed;
  Status s = step_both(m, b, V, &a);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(a.rows + a.routing_ties, 4);
  expect_bar(a, label() + " logits rows, absorbed");
}

// Releasing sequences returns their pages; a step that does not fit the page budget is refused cleanly.
TEST_P(CudaForward, PagesAreReturnedAndBudgetIsEnforced) {
  Models m = load(fixture(), expanded());
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size, free0 = m.gpu->free_pages();
  auto rng = mla::test::case_rng("pages" + label());
  const std::vector<int32_t> p = random_ids(rng, 130, V);
  DeepseekV2 model(m.gpu.get());
  TensorView logits;
  Status s = model.forward(chunk(p, 0, 130, 3), &logits);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(m.gpu->free_pages(), free0 - 3);
  m.gpu->release_sequence(3);
  EXPECT_EQ(m.gpu->free_pages(), free0);
  const std::vector<int32_t> big = random_ids(rng, 64 * (free0 + 1), V);
  ForwardBatch b;
  for (int64_t i = 0; i <= free0; ++i) add_chunk(&b, big, 0, 1, 10 + i);  // one page per sequence, one too many
  b.token_ids.assign(size_t(free0 + 1), big[0]);
  const Status refused = model.forward(b, &logits);
  EXPECT_EQ(refused.code(), StatusCode::kOutOfMemory) << refused.to_string();
  EXPECT_EQ(m.gpu->free_pages(), free0) << "a refused step must not keep pages";
}

// The CUDA model against transformers' fp32 logits saved with the fixture (the CPU model's own oracle):
// whole-prompt prefill of every saved prompt.
TEST_P(CudaForward, PrefillMatchesTransformersLogits) {
  Models m = load(fixture(), expanded());
  ASSERT_TRUE(m.gpu);
  const int64_t V = m.gpu->weights().config.vocab_size;
  std::shared_ptr<loader::SafetensorsFile> lf;
  Status s = loader::SafetensorsFile::open(fixtures_dir() + "/" + fixture() + "/logits.safetensors", &lf);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  Agreement a;
  for (int i = 0;; ++i) {
    const auto* ids = lf->find("prompt" + std::to_string(i) + ".input_ids");
    const auto* lg = lf->find("prompt" + std::to_string(i) + ".logits");
    if (!ids || !lg) break;
    ASSERT_EQ(ids->dtype, DType::kInt64);
    ASSERT_EQ(lg->dtype, DType::kFp32);
    std::vector<int32_t> tok;
    const auto* id_data = static_cast<const int64_t*>(lf->data(*ids));
    for (int64_t j = 0; j < ids->numel(); ++j) tok.push_back(static_cast<int32_t>(id_data[j]));
    DeepseekV2 model(m.gpu.get());
    TensorView out;
    const Status sf = model.forward(chunk(tok, 0, int64_t(tok.size()), 1000 + i), &out);
    ASSERT_TRUE(sf.is_ok()) << sf.to_string();
    std::vector<float> got;
    const Status sd = m.gpu->download(out, &got);
    ASSERT_TRUE(sd.is_ok()) << sd.to_string();
    const float* ref = static_cast<const float*>(lf->data(*lg));
    ASSERT_EQ(int64_t(got.size()), lg->numel());
    for (size_t r = 0; r < tok.size(); ++r) {
      count_row(&got[r * size_t(V)], ref + r * size_t(V), V, &a);
    }
  }
  EXPECT_GE(a.rows, 3);
  expect_bar(a, label() + " vs transformers");
}

INSTANTIATE_TEST_SUITE_P(Model, CudaForward,
                         ::testing::Combine(::testing::Values("tiny", "tiny-qlora"), ::testing::Bool()));

// Forced expanded attention on prefill and decode chunks alike (decode rows through prefill_attention
// with q_len 1) equals the CPU model. 300 rows (it was 80, where "99 %" meant "no miss at all"): chunks
// continuing a cache across page boundaries, then 40 single-token steps, then a last chunk.
TEST(CudaForwardPaths, ForcedExpandedMatchesCpu) {
  Models m = load("tiny", true);
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size;
  auto rng = mla::test::case_rng("forced expanded");
  const std::vector<int32_t> p = random_ids(rng, 300, V);
  std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 70}, {70, 71}, {71, 72}, {72, 80}, {80, 200}};
  for (int64_t i = 200; i < 240; ++i) chunks.push_back({i, i + 1});
  chunks.push_back({240, 300});
  Agreement a;
  for (auto [from, to] : chunks) {
    Status s = step_both(m, chunk(p, from, to, 0, AttnPath::kExpanded), V, &a);
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }
  EXPECT_EQ(a.rows + a.routing_ties, 300);
  expect_bar(a, "tiny forced expanded");
}

// DeepSeek-V2's head count on the decode path: the fixtures have 4 heads (decoded as one padded 16-row tile), so
// this takes the tiny config with 64, 100 (padded to 128) or 128 heads and dummy weights (make_dummy_weights: unit-
// scale activations, as the fixtures). Its decode steps run mla_decode at h_q 64 / 128 under each head-tile choice of
// MLA_DECODE_TILE_ROWS (read on every call): 16-row tiles (the narrow kernels), 64-row tiles, and the default, which
// picks narrow tiles for these short contexts from the eager step's host seqlens (decode_plan_narrow_tiles). Same
// bars as the fixtures' bf16 cases.
class CudaForwardManyHeads : public ::testing::TestWithParam<int> {};

TEST_P(CudaForwardManyHeads, DecodeStepsMatchCpuOnEveryHeadTile) {
  const int heads = GetParam();
  ModelConfig c;
  ASSERT_TRUE(preset_config("tiny", &c).is_ok());
  c.num_attention_heads = heads;
  c.name = "tiny-h" + std::to_string(heads);
  ModelWeights w;
  const Status sw = loader::make_dummy_weights(c, 2900 + uint64_t(heads), DType::kBf16, &w);
  ASSERT_TRUE(sw.is_ok()) << sw.to_string();
  Models m = make_models(std::move(w), true, KvFormat::kBf16);
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = c.vocab_size;
  auto rng = mla::test::case_rng("many heads " + std::to_string(heads));
  // Two sequences across page boundaries (70 and 130 tokens), then 3 x 6 decode steps of both.
  const std::vector<int32_t> s0 = random_ids(rng, 88, V), s1 = random_ids(rng, 148, V);
  Agreement a;
  auto run = [&](const ForwardBatch& b) { return expect_step(m, b, V, &a); };
  ASSERT_TRUE(run(chunk(s0, 0, 70, 0)));
  ASSERT_TRUE(run(chunk(s1, 0, 130, 1)));
  int64_t pos = 0;
  for (const char* tiles : {"16", "64", "auto"}) {
    mla::test::ScopedEnv env("MLA_DECODE_TILE_ROWS", tiles);
    for (int i = 0; i < 6; ++i, ++pos) {
      ForwardBatch b;
      add_chunk(&b, s0, 70 + pos, 71 + pos, 0);
      add_chunk(&b, s1, 130 + pos, 131 + pos, 1);
      if (!run(b)) break;
    }
  }
  expect_bar(a, c.name + " decode on 16-row, 64-row and chosen head tiles");
}

INSTANTIATE_TEST_SUITE_P(Model, CudaForwardManyHeads, ::testing::Values(64, 100, 128));

// Quantized KV caches against the unquantized CPU model: reported, with a loose bar (e4m3 keeps 3
// mantissa bits, so every cached latent carries up to 2^-4 relative rounding; the issues ask for the
// numbers, not a threshold). fp8: per-tensor scales 1.0, the decode query quantized too. fp8_ds: per-token
// tile scales, bf16 RoPE and query. Chunked prefill (expanded path: dequantizing gather) then decode steps
// (absorbed path: mla_decode of that format).
class CudaForwardQuantizedKv : public ::testing::TestWithParam<std::tuple<const char*, KvFormat>> {
 protected:
  const char* fixture() const { return std::get<0>(GetParam()); }
  KvFormat format() const { return std::get<1>(GetParam()); }
};

TEST_P(CudaForwardQuantizedKv, ReportsAgreementWithCpu) {
  Models m = load(fixture(), true, format());
  ASSERT_TRUE(m.cpu && m.gpu);
  const int64_t V = m.cpu->weights().config.vocab_size;
  const std::string fmt(kv_format_name(format()));
  auto rng = mla::test::case_rng(fmt + fixture());
  const std::vector<int32_t> s0 = random_ids(rng, 120, V), s1 = random_ids(rng, 70, V);
  Agreement a;
  auto run = [&](const ForwardBatch& b) { return expect_step(m, b, V, &a); };
  ASSERT_TRUE(run(chunk(s0, 0, 100, 0)));
  ASSERT_TRUE(run(chunk(s1, 0, 50, 1)));
  for (int64_t i = 0; i < 20; ++i) {
    ForwardBatch b;
    add_chunk(&b, s0, 100 + i, 101 + i, 0);
    add_chunk(&b, s1, 50 + i, 51 + i, 1);
    ASSERT_TRUE(run(b));
  }
  std::printf("[model] %s %s KV: %s\n", fixture(), fmt.c_str(), a.str().c_str());
  EXPECT_EQ(a.nonfinite, 0);
  // Rows at routing near-ties are set apart here too: some must remain, and not too many (as in expect_bar).
  EXPECT_GT(a.rows, 0) << a.str();
  EXPECT_LE(a.routing_ties, max_routing_ties(a.rows + a.routing_ties)) << a.str();
  EXPECT_LE(a.rel(), 0.15) << a.str();
}

INSTANTIATE_TEST_SUITE_P(Model, CudaForwardQuantizedKv,
                         ::testing::Combine(::testing::Values("tiny", "tiny-qlora"),
                                            ::testing::Values(KvFormat::kFp8, KvFormat::kFp8Ds)),
                         [](const auto& info) {
                           std::string name = std::string(std::get<0>(info.param)) + "_" +
                                              std::string(kv_format_name(std::get<1>(info.param)));
                           std::replace(name.begin(), name.end(), '-', '_');  // gtest names: [A-Za-z0-9_]
                           return name;
                         });

}  // namespace
}  // namespace mla::model

// sample_tokens on the GPU against the CPU reference (src/ops/ref/sampling.cpp) and against the exact law:
//  - greedy and error rows bit-identical to the reference (which is bit-identical to the host sampler);
//  - sampled rows equal to the reference token except where the float noise of logf/expf (device vs host
//    libm, a few ulp) decides: such a row must pick a token of the exact support, and they must be rare;
//  - frequencies over many (seed, draw) pairs follow softmax(x / T) truncated by top-k / top-p (chi-square);
//  - a row stride wider than the vocabulary (padding poisoned with NaN: never read), poisoned outputs,
//    guard regions, and two runs giving the same tokens.
// Last, the time of one batch-256 × 102400 step (what a V2-Lite decode step samples).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/sampling_test_util.h"
#include "harness/device_buffer.h"
#include "mla/ops/sampling.h"

namespace mla {
namespace {

using test::DeviceBuffer;

SamplingRow row(float t, int k = 0, float p = 1.f, uint64_t seed = 1, int draw = 0) {
  SamplingRow r;
  r.temperature = t, r.top_k = k, r.top_p = p, r.seed = seed, r.draw_index = draw;
  return r;
}

struct SampleRun {
  std::vector<int32_t> tokens;
  bool ok = false;
};

// logits: [rows, ld] host; runs the kernel on a fresh poisoned device copy, checks guards.
SampleRun gpu_sample(const std::vector<float>& logits, int64_t ld, int vocab, const std::vector<SamplingRow>& rs) {
  SampleRun out;
  const int64_t rows = int64_t(rs.size());
  DeviceBuffer d_x(logits.size() * 4), d_rows(rs.size() * sizeof(SamplingRow)), d_tok(rs.size() * 4);
  EXPECT_TRUE(d_x.upload(logits).is_ok());
  EXPECT_TRUE(d_rows.upload(rs).is_ok());
  EXPECT_TRUE(d_tok.poison().is_ok());
  SampleParams p{.logits = TensorView::contiguous(d_x.data(), DType::kFp32, {rows, vocab}),
                 .rows = d_rows.as<SamplingRow>(),
                 .tokens = TensorView::contiguous(d_tok.data(), DType::kInt32, {rows})};
  p.logits.stride[0] = ld;
  const Status s = cuda::sample_tokens(p, nullptr);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.tokens.assign(rs.size(), 0);
  EXPECT_TRUE(d_tok.download(&out.tokens).is_ok());
  for (const auto* b : {&d_x, &d_rows, &d_tok}) EXPECT_TRUE(b->check_guards("sample_tokens").is_ok());
  out.ok = s.is_ok();
  return out;
}

std::vector<int32_t> ref_sample(const std::vector<float>& logits, int64_t ld, int vocab,
                                const std::vector<SamplingRow>& rs) {
  std::vector<int32_t> t(rs.size(), 777);
  SampleParams p{.logits = TensorView::contiguous(logits.data(), DType::kFp32, {int64_t(rs.size()), vocab}),
                 .rows = rs.data(),
                 .tokens = TensorView::contiguous(t.data(), DType::kInt32, {int64_t(rs.size())})};
  p.logits.stride[0] = ld;
  EXPECT_TRUE(ref::sample_tokens(p).is_ok());
  return t;
}

TEST(GpuSampling, MatchesTheReference) {
  std::mt19937 rng(11);
  const std::vector<SamplingRow> kinds = {
      row(0.f),     row(1.f),          row(0.5f),          row(2.f),           row(1.f, 1),         row(0.9f, 5),
      row(1.f, 50), row(1.f, 0, 0.5f), row(0.7f, 0, 0.9f), row(1.f, 0, 0.99f), row(1.2f, 40, 0.8f), row(1.f, 0, 0.f)};
  int64_t sampled = 0, mismatched = 0;
  for (int vocab : {102400, 1000, 37}) {
    const int rows = 120;
    const int64_t ld = vocab + 24;  // padded rows: the pad is NaN and must never be read
    std::vector<float> x(size_t(rows) * size_t(ld), NAN);
    std::vector<SamplingRow> rs;
    std::normal_distribution<float> nd(0.f, 3.f);
    std::uniform_int_distribution<int> q(-6, 6), coin(0, 7);
    for (int r = 0; r < rows; ++r) {
      float* xr = x.data() + size_t(r) * size_t(ld);
      const int style = r % 3;  // continuous; coarse (many exact ties); continuous with -inf holes
      for (int v = 0; v < vocab; ++v)
        xr[v] = style == 1 ? float(q(rng)) * 0.5f : (style == 2 && coin(rng) == 0 ? -INFINITY : nd(rng));
      SamplingRow k = kinds[size_t(r) % kinds.size()];
      k.seed = rng(), k.draw_index = int(rng() % 1000);
      rs.push_back(k);
    }
    // Error rows: NaN, +inf, all -inf.
    x[size_t(rows - 3) * size_t(ld) + size_t(vocab) / 2] = NAN;
    x[size_t(rows - 2) * size_t(ld) + size_t(vocab) - 1] = INFINITY;
    std::fill_n(x.begin() + (rows - 1) * ld, vocab, -INFINITY);
    const SampleRun g = gpu_sample(x, ld, vocab, rs);
    ASSERT_TRUE(g.ok);
    const auto want = ref_sample(x, ld, vocab, rs);
    EXPECT_EQ(want[size_t(rows - 3)], kSampleBadLogit);
    EXPECT_EQ(want[size_t(rows - 2)], kSampleBadLogit);
    EXPECT_EQ(want[size_t(rows - 1)], kSampleAllNegInf);
    for (int r = 0; r < rows; ++r) {
      const SamplingRow& k = rs[size_t(r)];
      if (sampling::is_greedy(k) || want[size_t(r)] < 0) {
        EXPECT_EQ(g.tokens[size_t(r)], want[size_t(r)]) << "vocab " << vocab << " row " << r << " (greedy or error)";
        continue;
      }
      ++sampled;
      if (g.tokens[size_t(r)] == want[size_t(r)]) continue;
      ++mismatched;
      // A different draw must still be a legal one: inside the support (top-p relaxed by 1e-4 for the
      // mass the two libms round differently at the cut).
      ASSERT_GE(g.tokens[size_t(r)], 0);
      ASSERT_LT(g.tokens[size_t(r)], vocab);
      SamplingRow relaxed = k;
      if (relaxed.top_p < 1.f) relaxed.top_p = std::min(1.f, relaxed.top_p + 1e-4f);
      const std::vector<float> xr(x.begin() + r * ld, x.begin() + r * ld + vocab);
      EXPECT_GT(sampling_test::exact_distribution(xr, relaxed)[size_t(g.tokens[size_t(r)])], 0.0)
          << "vocab " << vocab << " row " << r << ": token " << g.tokens[size_t(r)] << " outside the support";
    }
  }
  // Near-ties of perturbed scores within a few ulp are rare: well under 2 % of sampled rows.
  std::printf("sampled rows %lld, differing from the reference %lld\n", (long long)sampled, (long long)mismatched);
  EXPECT_LE(mismatched * 50, sampled);
}

// n draws of one row (4 seeds × n/4 draw indices) on the GPU, counts against the exact law.
void expect_law(const std::vector<float>& x, SamplingRow r, int n) {
  const int vocab = int(x.size());
  const sampling_test::RepeatedRow rep = sampling_test::repeat_row(x, r, n, 77);
  const SampleRun g = gpu_sample(rep.logits, vocab, vocab, rep.rows);
  ASSERT_TRUE(g.ok);
  std::vector<long> counts(size_t(vocab), 0);
  for (int32_t t : g.tokens) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, vocab);
    ++counts[size_t(t)];
  }
  EXPECT_EQ(sampling_test::chi_square_failure(counts, sampling_test::exact_distribution(x, r)), "")
      << "vocab " << vocab << " T " << r.temperature << " top_k " << r.top_k << " top_p " << r.top_p;
}

TEST(GpuSampling, DrawsFollowTheTruncatedSoftmax) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> small(16);
  for (float& v : small) v = nd(rng);
  small[3] = -INFINITY;
  // A wider row (many threads' strides) whose mass sits on ~20 tokens, the rest far below.
  std::vector<float> wide(3000, -30.f);
  for (int i = 0; i < 20; ++i) wide[size_t(i) * 149 + 7] = nd(rng);
  for (const auto* x : {&small, &wide})
    for (const SamplingRow& r : {row(1.f), row(0.6f), row(2.5f), row(1.f, 5), row(0.8f, 0, 0.7f), row(1.3f, 6, 0.85f),
                                 row(1.f, 0, 0.999f)})
      expect_law(*x, r, 80000);
}

TEST(GpuSampling, TopKTiesKeepTheLowestIds) {
  const std::vector<float> x = {1, 3, 3, 2, 3, 3, 0, 3};
  std::vector<float> rep;
  std::vector<SamplingRow> rs;
  for (int i = 0; i < 3000; ++i) rep.insert(rep.end(), x.begin(), x.end()), rs.push_back(row(1.f, 3, 1.f, 9, i));
  // top-p cutting inside a run of ties too: 0.3 of the mass of three equal tokens keeps the first one only.
  for (int i = 0; i < 300; ++i) rep.insert(rep.end(), x.begin(), x.end()), rs.push_back(row(1.f, 3, 0.3f, 9, i));
  const SampleRun g = gpu_sample(rep, 8, 8, rs);
  ASSERT_TRUE(g.ok);
  std::vector<long> counts(8, 0);
  for (size_t i = 0; i < 3000; ++i) ++counts[size_t(g.tokens[i])];
  EXPECT_EQ(counts[5] + counts[7] + counts[0] + counts[3] + counts[6], 0);
  EXPECT_GT(counts[1], 800);
  EXPECT_GT(counts[2], 800);
  EXPECT_GT(counts[4], 800);
  for (size_t i = 3000; i < rs.size(); ++i) EXPECT_EQ(g.tokens[i], 1) << i;
  EXPECT_EQ(ref_sample(rep, 8, 8, rs), g.tokens);
}

TEST(GpuSampling, DeterministicAndTimed) {
  const int rows = 256, vocab = 102400;
  std::mt19937 rng(21);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> x(size_t(rows) * vocab);
  for (float& v : x) v = nd(rng);
  std::vector<SamplingRow> rs;
  for (int r = 0; r < rows; ++r) rs.push_back(row(1.f, 0, 1.f, uint64_t(r) * 31 + 5, r));
  const SampleRun a = gpu_sample(x, vocab, vocab, rs), b = gpu_sample(x, vocab, vocab, rs);
  EXPECT_EQ(a.tokens, b.tokens);

  // Timing: 4 copies of the batch rotated (4 × 105 MB > L2), median of 30 after warm-up.
  const int copies = 4;
  DeviceBuffer d_x(x.size() * 4 * copies), d_rows(rows * sizeof(SamplingRow) * 3), d_tok(rows * 4);
  for (int c = 0; c < copies; ++c) MLA_ASSERT_OK(d_x.upload(x.data(), x.size() * 4, x.size() * 4 * size_t(c)));
  std::vector<SamplingRow> all = rs;
  for (auto& r : rs) all.push_back(row(0.f, 0, 1.f, r.seed));            // greedy
  for (auto& r : rs) all.push_back(row(0.8f, 50, 0.9f, r.seed, r.draw_index));  // top-k + top-p
  MLA_ASSERT_OK(d_rows.upload(all));
  const char* names[3] = {"temperature 1", "greedy", "T 0.8, top-k 50, top-p 0.9"};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  for (int kind = 0; kind < 3; ++kind) {
    std::vector<float> ms;
    for (int it = 0; it < 35; ++it) {
      SampleParams p{.logits = TensorView::contiguous(d_x.as<float>() + x.size() * size_t(it % copies), DType::kFp32,
                                                      {rows, vocab}),
                     .rows = d_rows.as<SamplingRow>() + rows * kind,
                     .tokens = TensorView::contiguous(d_tok.data(), DType::kInt32, {rows})};
      cudaEventRecord(e0);
      MLA_ASSERT_OK(cuda::sample_tokens(p, nullptr));
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float t = 0;
      cudaEventElapsedTime(&t, e0, e1);
      if (it >= 5) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double us = ms[ms.size() / 2] * 1e3;
    std::printf("sample_tokens 256 x 102400 (%s): %.1f us median, %.0f GB/s of logits\n", names[kind], us,
                double(x.size()) * 4 / us / 1e3);
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
}

}  // namespace
}  // namespace mla

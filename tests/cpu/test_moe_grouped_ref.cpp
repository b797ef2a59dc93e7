// The host references behind the grouped MoE path: ref::moe_align against the counting sort the first
// CUDA MoE ran on the host (same rows, bit for bit), its tile list's invariants and error handling; and
// ref::grouped_gemm against the CPU backend's linear (and SiLU) expert by expert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mla/core/half.h"
#include "mla/ops/grouped_gemm.h"
#include "mla/ops/moe_align.h"
#include "model/cpu_kernels.h"

namespace mla {
namespace {

struct Aligned {
  std::vector<int32_t> off, perm, src, tiles, err;
};

Status align(const std::vector<int32_t>& ids, int64_t t, int64_t k, int E, int bm, Aligned* a) {
  const int64_t n = t * k;
  a->off.assign(size_t(E + 1), 77), a->perm.assign(size_t(n), 77), a->src.assign(size_t(n), 77);
  a->tiles.assign(size_t(2 * moe_align_max_tiles(n, E, bm)), 77), a->err.assign(1, 0);
  MoeAlignParams p{.topk_ids = TensorView::contiguous(ids.data(), DType::kInt32, {t, k}),
                   .num_experts = E,
                   .block_m = bm,
                   .expert_offsets = TensorView::contiguous(a->off.data(), DType::kInt32, {E + 1}),
                   .perm = TensorView::contiguous(a->perm.data(), DType::kInt32, {n}),
                   .src = TensorView::contiguous(a->src.data(), DType::kInt32, {t, k}),
                   .tiles = TensorView::contiguous(a->tiles.data(), DType::kInt32, {int64_t(a->tiles.size() / 2), 2}),
                   .error = TensorView::contiguous(a->err.data(), DType::kInt32, {1})};
  return ref::moe_align(p);
}

std::vector<int32_t> random_topk(int64_t t, int64_t k, int E, std::mt19937_64& rng) {
  std::vector<int32_t> ids, all(size_t(E), 0);
  for (int64_t i = 0; i < t; ++i) {
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    ids.insert(ids.end(), all.begin(), all.begin() + k);
  }
  return ids;
}

TEST(MoeAlignRef, MatchesTheHostCountingSortAndTilesCoverEveryRow) {
  std::mt19937_64 rng(7);
  for (auto [t, k, E, bm] : {std::tuple{1, 6, 64, 16},
                             {64, 6, 64, 16},
                             {128, 6, 64, 32},
                             {300, 6, 64, 64},
                             {2000, 8, 256, 128},
                             {37, 1, 3, 16}}) {
    const std::vector<int32_t> ids = random_topk(t, k, E, rng);
    Aligned a;
    ASSERT_TRUE(align(ids, t, k, E, bm, &a).is_ok());
    EXPECT_EQ(a.err[0], 0);
    // The first CUDA MoE's host sort, verbatim in effect: offsets by counting, rows filled in entry order.
    const int64_t n = int64_t(t) * k;
    std::vector<int32_t> off(static_cast<size_t>(E + 1), 0), perm(static_cast<size_t>(n)), src(static_cast<size_t>(n));
    for (int32_t e : ids) ++off[size_t(e) + 1];
    for (int e = 0; e < E; ++e) off[size_t(e) + 1] += off[size_t(e)];
    std::vector<int32_t> fill(off.begin(), off.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t row = fill[size_t(ids[size_t(i)])]++;
      perm[size_t(row)] = int32_t(i / k), src[size_t(i)] = row;
    }
    EXPECT_EQ(a.off, off);
    EXPECT_EQ(a.perm, perm);
    EXPECT_EQ(a.src, src);
    // Tiles: experts ascending, each expert's rows covered by consecutive block_m-row tiles, then -1.
    std::vector<int32_t> want_tiles;
    for (int e = 0; e < E; ++e)
      for (int32_t r = off[size_t(e)]; r < off[size_t(e) + 1]; r += bm) want_tiles.insert(want_tiles.end(), {e, r});
    ASSERT_LE(want_tiles.size(), a.tiles.size()) << "moe_align_max_tiles is not an upper bound";
    want_tiles.resize(a.tiles.size(), -1);
    EXPECT_EQ(a.tiles, want_tiles);
  }
}

TEST(MoeAlignRef, MaxTilesBoundHoldsForWorstCaseCounts) {
  // One row on each of E - 1 experts and the rest on one: the most tiles for n rows.
  for (int bm : {16, 32, 64, 128})
    for (int64_t n : {1, 5, 63, 64, 65, 1000, 98304}) {
      const int64_t E = 64;
      const int64_t ones = std::min<int64_t>(E - 1, n - 1), rest = n - ones;
      const int64_t tiles = ones + (rest + bm - 1) / bm;
      EXPECT_LE(tiles, moe_align_max_tiles(n, E, bm)) << "n " << n << " bm " << bm;
    }
}

TEST(MoeAlignRef, InvalidAndRepeatedIdsAreFlaggedAndGetNoRow) {
  const std::vector<int32_t> ids = {0, 3, 5,  1, 1, 2,  4, -1, 0,  9, 2, 3};  // t 4, k 3, E 6
  Aligned a;
  ASSERT_TRUE(align(ids, 4, 3, 6, 16, &a).is_ok());
  EXPECT_EQ(a.err[0], 1);
  // Valid: e0 tokens 0, 2; e1 token 1; e2 tokens 1, 3; e3 tokens 0, 3; e4 token 2; e5 token 0.
  EXPECT_EQ(a.off, (std::vector<int32_t>{0, 2, 3, 5, 7, 8, 9}));
  EXPECT_EQ(a.src, (std::vector<int32_t>{0, 5, 8, 2, -1, 3, 7, -1, 1, -1, 4, 6}));
  EXPECT_EQ(a.perm, (std::vector<int32_t>{0, 2, 1, 1, 3, 0, 3, 2, 0, -1, -1, -1}));
  EXPECT_EQ(a.tiles, (std::vector<int32_t>{0, 0, 1, 2, 2, 3, 3, 5, 4, 7, 5, 8, -1, -1}));  // max_tiles 7
}

TEST(MoeAlignRef, RejectsBadArguments) {
  const std::vector<int32_t> ids(12, 0);
  Aligned a;
  EXPECT_FALSE(align(ids, 4, 3, 6, 48, &a).is_ok());   // block_m the GEMM does not run
  EXPECT_FALSE(align(ids, 4, 3, 0, 16, &a).is_ok());   // no experts
  EXPECT_FALSE(align(ids, 4, 3, 300, 16, &a).is_ok());  // more than 256
}

// Expert-major rows; W [E, N, K]; the CPU backend's linear per expert as the oracle.
TEST(GroupedGemmRef, EqualsPerExpertLinearAndSiluMul) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t E = 4, N = 32, K = 24, t = 23;
  const std::vector<int32_t> ids = {0, 2, 2, 2, 3, 0, 3, 3, 3, 3, 3, 0,
                                    2, 3, 2, 0, 3, 3, 3, 0, 2, 3, 3};  // expert 1 empty
  Aligned al;
  ASSERT_TRUE(align(ids, t, 1, int(E), 16, &al).is_ok());
  const int64_t lda = K + 8;
  std::vector<uint16_t> a(size_t(t * lda)), w(size_t(E * N * K));
  for (auto& v : a) v = float_to_bf16(nd(rng));
  for (auto& v : w) v = float_to_bf16(nd(rng) * 0.3f);
  for (GroupedEpilogue epi : {GroupedEpilogue::kStore, GroupedEpilogue::kSiluMul}) {
    const bool silu = epi == GroupedEpilogue::kSiluMul;
    const int64_t n_out = silu ? N / 2 : N;
    std::vector<uint16_t> out(size_t(t * n_out), 0xFFFF);
    GroupedGemmParams p;
    p.a = TensorView::contiguous(a.data(), DType::kBf16, {t, K});
    p.a.stride[0] = lda;
    p.a_rows = TensorView::contiguous(al.perm.data(), DType::kInt32, {t});
    p.w = TensorView::contiguous(w.data(), DType::kBf16, {E, N, K});
    p.expert_offsets = TensorView::contiguous(al.off.data(), DType::kInt32, {E + 1});
    p.tiles = TensorView::contiguous(al.tiles.data(), DType::kInt32, {int64_t(al.tiles.size() / 2), 2});
    p.block_m = 16;
    p.epilogue = epi;
    p.out = TensorView::contiguous(out.data(), DType::kBf16, {t, n_out});
    ASSERT_TRUE(ref::grouped_gemm(p).is_ok());
    for (int64_t r = 0; r < t; ++r) {
      const int64_t e = ids[size_t(al.perm[size_t(r)])];
      ASSERT_GE(r, al.off[size_t(e)]);
      ASSERT_LT(r, al.off[size_t(e) + 1]);
      std::vector<float> x(static_cast<size_t>(K)), y(static_cast<size_t>(N));
      for (int64_t q = 0; q < K; ++q) x[size_t(q)] = bf16_to_float(a[size_t(al.perm[size_t(r)] * lda + q)]);
      model::cpu::linear(x.data(), K, 1, TensorView::contiguous(&w[size_t(e * N * K)], DType::kBf16, {N, K}), y.data(),
                         N);
      for (int64_t j = 0; j < n_out; ++j) {
        const float want =
            silu ? round_bf16(model::cpu::silu(round_bf16(y[size_t(j)])) * round_bf16(y[size_t(N / 2 + j)]))
                 : round_bf16(y[size_t(j)]);
        // Same float sums in the same order: identical, except that silu's exp may differ by an ulp.
        EXPECT_NEAR(bf16_to_float(out[size_t(r * n_out + j)]), want, silu ? std::abs(want) * 8e-3f : 0.f)
            << "row " << r << " col " << j;
      }
    }
  }
}

TEST(GroupedGemmRef, LeavesRowsPastTheLastExpertAndRejectsBadShapes) {
  const int64_t E = 2, N = 16, K = 8;
  std::vector<int32_t> off = {0, 1, 2}, tiles = {0, 0, 1, 1, -1, -1};
  std::vector<uint16_t> a(size_t(4 * K), float_to_bf16(1.f)), w(size_t(E * N * K), float_to_bf16(0.5f)),
      out(size_t(4 * N), 0xFFFF);
  GroupedGemmParams p;
  p.a = TensorView::contiguous(a.data(), DType::kBf16, {4, K});
  p.w = TensorView::contiguous(w.data(), DType::kBf16, {E, N, K});
  p.expert_offsets = TensorView::contiguous(off.data(), DType::kInt32, {E + 1});
  p.tiles = TensorView::contiguous(tiles.data(), DType::kInt32, {3, 2});
  p.block_m = 16;
  p.out = TensorView::contiguous(out.data(), DType::kBf16, {4, N});
  ASSERT_TRUE(ref::grouped_gemm(p).is_ok());
  EXPECT_EQ(bf16_to_float(out[0]), 4.f);
  EXPECT_EQ(out[size_t(2 * N)], 0xFFFF);  // rows 2, 3 belong to no expert
  EXPECT_EQ(out[size_t(4 * N - 1)], 0xFFFF);
  p.block_m = 48;
  EXPECT_FALSE(ref::grouped_gemm(p).is_ok());
  p.block_m = 16;
  p.epilogue = GroupedEpilogue::kSiluMul;  // N / 2 = 8 output columns expected, out has 16
  EXPECT_FALSE(ref::grouped_gemm(p).is_ok());
  off = {0, 3, 2};
  p.epilogue = GroupedEpilogue::kStore;
  EXPECT_FALSE(ref::grouped_gemm(p).is_ok());  // decreasing offsets
}

int block_m(int64_t n_rows, int64_t num_experts) {
  int bm = 0;
  const Status s = grouped_gemm_block_m(n_rows, num_experts, &bm);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return bm;
}

TEST(GroupedGemmRef, BlockMGrowsWithRowsPerExpert) {
  EXPECT_EQ(block_m(6, 64), 16);         // decode, batch 1
  EXPECT_EQ(block_m(64 * 6, 64), 16);    // batch 64: ~6 rows per expert
  EXPECT_EQ(block_m(128 * 6, 64), 32);   // batch 128: ~12
  EXPECT_EQ(block_m(256 * 6, 64), 32);   // batch 256: ~24
  EXPECT_EQ(block_m(512 * 6, 64), 64);   // ~48
  EXPECT_EQ(block_m(8192 * 6, 64), 128); // prefill
}

// The override knob: forced heights and the legacy rule apply; a value outside the set is an error naming the
// knob, not a silent default (a typo would otherwise be benchmarked as the default).
TEST(GroupedGemmRef, BlockMKnobIsStrict) {
  setenv("MLA_MOE_BLOCK_M", "64", 1);
  EXPECT_EQ(block_m(6, 64), 64);
  setenv("MLA_MOE_BLOCK_M", "legacy", 1);
  EXPECT_EQ(block_m(128 * 6, 64), 64);  // the old rule had no 32-row tile
  setenv("MLA_MOE_BLOCK_M", "48", 1);
  int bm = -1;
  const Status s = grouped_gemm_block_m(6, 64, &bm);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.to_string().find("MLA_MOE_BLOCK_M"), std::string::npos) << s.to_string();
  unsetenv("MLA_MOE_BLOCK_M");
  EXPECT_EQ(block_m(6, 64), 16);
}

}  // namespace
}  // namespace mla

// gather_and_maybe_dequant_cache_mla reference against a float64 oracle: every format x output dtype x
// page size, random block tables (unused entries -1), empty sequences, seq_starts != 0, rows past the last
// sequence left untouched; a bf16 concat -> gather round trip; every host-side rejection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>

#include "common/random.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "mla/ops/gather_cache_mla.h"
#include "ops/common/cache_codec.h"
#include "test_kv_cache_data.h"

namespace mla {
namespace {

namespace oracle = test::oracle;
constexpr uint8_t kPoison = 0xC3;

struct Case {
  KvFormat format;
  DType out;
  int page_size;
  bool with_starts;
};

struct GatherData {
  std::vector<uint8_t> cache, dst;
  std::vector<int32_t> block_table, cu, starts;
  int batch = 0, max_pages = 0;
  int64_t num_pages = 0, n_rows = 0;
  GatherCacheMlaParams p;
};

// A cache of random bytes (every bit pattern is a legal bf16/fp16/e4m3 value, NaN included); fp8_ds tile
// scales are random positive floats so dequantized values stay meaningful.
GatherData make_data(const Case& c, std::mt19937_64& rng, std::vector<int> lens) {
  GatherData d;
  d.batch = static_cast<int>(lens.size());
  std::vector<int> starts(d.batch, 0);
  int need = 0;
  for (int b = 0; b < d.batch; ++b) {
    if (c.with_starts) starts[b] = static_cast<int>(rng() % 150);
    need = std::max(need, (starts[b] + lens[b] + c.page_size - 1) / c.page_size);
  }
  d.max_pages = need + 1;
  d.num_pages = int64_t(d.batch) * d.max_pages + 3;
  const int tb = kv_bytes_per_token(c.format);
  d.cache.resize(size_t(d.num_pages) * c.page_size * tb);
  for (auto& b : d.cache) b = static_cast<uint8_t>(rng());
  if (c.format == KvFormat::kFp8Ds) {
    std::uniform_real_distribution<float> u(-8.f, 3.f);
    for (int64_t s = 0; s < d.num_pages * c.page_size; ++s)
      for (int tile = 0; tile < 4; ++tile) {
        const float sc = std::exp2(u(rng));
        std::memcpy(&d.cache[s * tb + 512 + 4 * tile], &sc, 4);
      }
  }
  // Pages handed out as a random permutation; entries a sequence does not need are the -1 sentinel.
  std::vector<int32_t> perm(d.num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  d.block_table.assign(size_t(d.batch) * d.max_pages, -1);
  int next = 0;
  d.cu.assign(d.batch + 1, 0);
  for (int b = 0; b < d.batch; ++b) {
    const int first = starts[b] / c.page_size, last = (starts[b] + lens[b] + c.page_size - 1) / c.page_size;
    for (int blk = first; blk < last; ++blk) d.block_table[b * d.max_pages + blk] = perm[next++];
    d.cu[b + 1] = d.cu[b] + lens[b];
  }
  d.starts = starts;
  d.n_rows = d.cu[d.batch] + 5;  // 5 spare rows that must stay untouched
  d.dst.assign(size_t(d.n_rows) * kDimQK * dtype_size(c.out), kPoison);

  d.p.format = c.format;
  d.p.k_scale = c.format == KvFormat::kFp8 ? 0.37f : 1.f;
  d.p.kv_cache = TensorView::contiguous(d.cache.data(), kv_cache_dtype(c.format),
                                        {d.num_pages, c.page_size, kv_token_elems(c.format)});
  d.p.dst = TensorView::contiguous(d.dst.data(), c.out, {d.n_rows, kDimQK});
  d.p.block_table = TensorView::contiguous(d.block_table.data(), DType::kInt32, {d.batch, d.max_pages});
  d.p.cu_seq_lens = TensorView::contiguous(d.cu.data(), DType::kInt32, {d.batch + 1});
  if (c.with_starts) d.p.seq_starts = TensorView::contiguous(d.starts.data(), DType::kInt32, {d.batch});
  return d;
}

// The oracle's value of element j of a cached token, before rounding to the output dtype.
double cached_value(const Case& c, const uint8_t* tok, int j, float k_scale) {
  uint16_t raw;
  switch (c.format) {
    case KvFormat::kBf16: std::memcpy(&raw, tok + 2 * j, 2); return oracle::bf16_value(raw);
    case KvFormat::kFp16: std::memcpy(&raw, tok + 2 * j, 2); return oracle::fp16_value(raw);
    case KvFormat::kFp8: return oracle::float_mul(oracle::e4m3_value(tok[j]), k_scale);
    case KvFormat::kFp8Ds:
      if (j >= kDimLatent) {
        std::memcpy(&raw, tok + 528 + 2 * (j - kDimLatent), 2);
        return oracle::bf16_value(raw);
      }
      float sc;
      std::memcpy(&sc, tok + 512 + 4 * (j / 128), 4);
      return oracle::float_mul(oracle::e4m3_value(tok[j]), sc);
  }
  return 0;
}

bool is_bf16_copy(const Case& c, int j) {
  return c.out == DType::kBf16 && (c.format == KvFormat::kBf16 || (c.format == KvFormat::kFp8Ds && j >= kDimLatent));
}

class GatherCacheMlaRef : public ::testing::TestWithParam<Case> {};

TEST_P(GatherCacheMlaRef, MatchesFloat64Oracle) {
  const Case c = GetParam();
  auto rng = test::case_rng("gather_" + std::string(kv_format_name(c.format)) + std::to_string(c.page_size));
  GatherData d = make_data(c, rng, {70, 0, 1, 129});
  ASSERT_TRUE(ref::gather_and_maybe_dequant_cache_mla(d.p).is_ok());
  const int tb = kv_bytes_per_token(c.format);
  const size_t es = dtype_size(c.out);
  int bad = 0;
  for (int b = 0; b < d.batch; ++b) {
    for (int i = 0; i < d.cu[b + 1] - d.cu[b]; ++i) {
      const int t = d.starts[b] + i;
      const int page = d.block_table[b * d.max_pages + t / c.page_size];
      const uint8_t* tok = d.cache.data() + (size_t(page) * c.page_size + t % c.page_size) * tb;
      const uint8_t* row = d.dst.data() + size_t(d.cu[b] + i) * kDimQK * es;
      for (int j = 0; j < kDimQK; ++j) {
        bool ok;
        if (is_bf16_copy(c, j)) {
          const int off = c.format == KvFormat::kBf16 ? 2 * j : 528 + 2 * (j - kDimLatent);
          ok = std::memcmp(row + 2 * j, tok + off, 2) == 0;  // bit copy, NaN payloads included
        } else if (c.out == DType::kBf16) {
          uint16_t raw;
          std::memcpy(&raw, row + 2 * j, 2);
          ok = oracle::same(oracle::bf16_value(raw),
                            oracle::round_to(cached_value(c, tok, j, d.p.k_scale), oracle::kBf16));
        } else {
          float f;
          std::memcpy(&f, row + 4 * j, 4);
          ok = oracle::same(f, cached_value(c, tok, j, d.p.k_scale));
        }
        if (!ok && bad++ < 5) ADD_FAILURE() << "seq " << b << " token " << i << " elem " << j;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  const size_t used = size_t(d.cu[d.batch]) * kDimQK * es;
  EXPECT_TRUE(std::all_of(d.dst.begin() + used, d.dst.end(), [](uint8_t x) { return x == kPoison; }))
      << "rows past cu_seq_lens[b] were written";
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds})
    for (DType out : {DType::kBf16, DType::kFp32})
      for (int ps : {16, 32, 64}) v.push_back({f, out, ps, ps != 32});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, GatherCacheMlaRef, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& tp) {
                           const Case& c = tp.param;
                           return std::string(kv_format_name(c.format)) + "_" + std::string(dtype_name(c.out)) + "_p" +
                                  std::to_string(c.page_size) + (c.with_starts ? "_starts" : "");
                         });

// bf16 is lossless both ways: concat then gather gives back the input bits.
TEST(GatherCacheMla, Bf16ConcatGatherRoundTripIsExact) {
  auto rng = test::case_rng("gather_roundtrip");
  const int t = 100, ps = 16;
  std::vector<uint16_t> kv = test::to_bf16(test::randn(rng, size_t(t) * kDimQK));
  std::vector<int64_t> slots(t);
  std::vector<int32_t> bt(7), cu = {0, t};
  for (int i = 0; i < 7; ++i) bt[i] = 6 - i;  // pages in reverse order
  for (int i = 0; i < t; ++i) slots[i] = int64_t(bt[i / ps]) * ps + i % ps;
  std::vector<uint16_t> cache(size_t(7) * ps * kDimQK), out(size_t(t) * kDimQK);
  ConcatAndCacheMlaParams w;
  w.kv_c = TensorView::contiguous(kv.data(), DType::kBf16, {t, kDimLatent});
  w.kv_c.stride[0] = kDimQK;
  w.k_pe = TensorView::contiguous(kv.data() + kDimLatent, DType::kBf16, {t, kDimRope});
  w.k_pe.stride[0] = kDimQK;
  w.kv_cache = TensorView::contiguous(cache.data(), DType::kBf16, {7, ps, kDimQK});
  w.slot_mapping = TensorView::contiguous(slots.data(), DType::kInt64, {t});
  ASSERT_TRUE(ref::concat_and_cache_mla(w).is_ok());
  GatherCacheMlaParams g;
  g.kv_cache = w.kv_cache;
  g.dst = TensorView::contiguous(out.data(), DType::kBf16, {t, kDimQK});
  g.block_table = TensorView::contiguous(bt.data(), DType::kInt32, {1, 7});
  g.cu_seq_lens = TensorView::contiguous(cu.data(), DType::kInt32, {2});
  ASSERT_TRUE(ref::gather_and_maybe_dequant_cache_mla(g).is_ok());
  EXPECT_EQ(out, kv);
}

// The shared dequantizer (a shift and a rebiasing multiply) against the core codec over all 256 codes and a
// few scales, subnormal codes and -0 included.
TEST(GatherCacheMla, DecodeE4m3MatchesCodecForAllCodes) {
  for (float scale : {1.f, 0.1f, 3.7e-3f, 1e-30f, 2.5e30f}) {
    for (int c = 0; c < 256; ++c) {
      const float got = cache::decode_e4m3(static_cast<uint8_t>(c), scale);
      const float want = e4m3_to_float(static_cast<uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_EQ(float_bits(got), float_bits(want)) << c;  // 0x7FC00000 with the code's sign
        continue;
      }
      const float prod = want * scale;
      EXPECT_EQ(float_bits(got), float_bits(prod)) << "code " << c << " scale " << scale;
    }
  }
}

// NaN codes decode to the documented NaN without the scale (docs/kv_cache_formats.md §6), so the kernel's
// canonical-NaN arithmetic cannot make its bytes differ from the reference's.
TEST(GatherCacheMla, NanCodesDecodeToFixedNaN) {
  std::vector<uint8_t> cache(16 * 576, 0);
  cache[0] = 0x7F;
  cache[1] = 0xFF;
  std::vector<int32_t> bt = {0}, cu = {0, 1};
  std::vector<uint16_t> out16(576);
  std::vector<float> out32(576);
  GatherCacheMlaParams g;
  g.format = KvFormat::kFp8;
  g.k_scale = 0.3f;
  g.kv_cache = TensorView::contiguous(cache.data(), DType::kE4m3, {1, 16, 576});
  g.block_table = TensorView::contiguous(bt.data(), DType::kInt32, {1, 1});
  g.cu_seq_lens = TensorView::contiguous(cu.data(), DType::kInt32, {2});
  g.dst = TensorView::contiguous(out16.data(), DType::kBf16, {1, 576});
  ASSERT_TRUE(ref::gather_and_maybe_dequant_cache_mla(g).is_ok());
  EXPECT_EQ(out16[0], 0x7FC0);
  EXPECT_EQ(out16[1], 0xFFC0);
  EXPECT_EQ(out16[2], 0x0000);
  g.dst = TensorView::contiguous(out32.data(), DType::kFp32, {1, 576});
  ASSERT_TRUE(ref::gather_and_maybe_dequant_cache_mla(g).is_ok());
  uint32_t b0, b1;
  std::memcpy(&b0, &out32[0], 4);
  std::memcpy(&b1, &out32[1], 4);
  EXPECT_EQ(b0, 0x7FC00000u);
  EXPECT_EQ(b1, 0xFFC00000u);
}

TEST(GatherCacheMla, RejectsBadArguments) {
  auto rng = test::case_rng("gather_reject");
  GatherData d = make_data({KvFormat::kFp8, DType::kBf16, 16, true}, rng, {5, 20});
  ASSERT_TRUE(validate_gather_cache_mla(d.p).is_ok());
  std::vector<int64_t> cu64(3);
  const std::vector<std::pair<std::string, std::function<void(GatherCacheMlaParams&)>>> bad = {
      {"kv_cache", [](auto& p) { p.kv_cache.dtype = DType::kBf16; }},  // fp8 caches are e4m3
      {"kv_cache", [](auto& p) { p.kv_cache.shape[2] = 656; }},
      {"kv_cache", [](auto& p) { p.kv_cache.data = nullptr; }},
      {"page size", [](auto& p) { p.kv_cache.shape[1] = 48; p.kv_cache.stride[0] = 48 * 576; }},
      {"dst", [](auto& p) { p.dst.dtype = DType::kFp16; }},
      {"dst", [](auto& p) { p.dst.shape[1] = 512; p.dst.stride[0] = 512; }},
      {"dst", [](auto& p) { p.dst.stride[0] = 600; }},
      {"dst", [](auto& p) { p.dst.data = static_cast<uint8_t*>(p.dst.data) + 2; }},
      {"block_table", [](auto& p) { p.block_table.dtype = DType::kInt64; }},
      {"block_table", [](auto& p) { p.block_table.rank = 1; }},
      {"cu_seq_lens", [](auto& p) { p.cu_seq_lens.shape[0] = 2; }},
      {"cu_seq_lens", [&](auto& p) { p.cu_seq_lens = TensorView::contiguous(cu64.data(), DType::kInt64, {3}); }},
      {"seq_starts", [](auto& p) { p.seq_starts.shape[0] = 3; }},
      {"seq_starts", [](auto& p) { p.seq_starts.data = nullptr; }},
      {"k_scale", [](auto& p) { p.k_scale = -1.f; }},
  };
  for (const auto& [what, mutate] : bad) {
    GatherCacheMlaParams p = d.p;
    mutate(p);
    const Status st = ref::gather_and_maybe_dequant_cache_mla(p);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.to_string().find("gather_and_maybe_dequant_cache_mla"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(what), std::string::npos) << st.to_string();
  }
  // Data errors the reference reports (the kernel cannot): each leaves dst untouched.
  const std::vector<std::pair<std::string, std::function<void(GatherData&)>>> bad_data = {
      {"non-decreasing", [](auto& x) { x.cu[2] = x.cu[1] - 1; }},
      {"exceeds dst", [](auto& x) { x.cu[2] = int32_t(x.n_rows + 1); }},
      {"seq_starts[1] < 0", [](auto& x) { x.starts[1] = -1; }},
      {"holds", [](auto& x) { x.starts[0] = x.max_pages * 16; }},
      {"not a page", [](auto& x) { x.block_table[x.max_pages + x.starts[1] / 16] = int32_t(x.num_pages); }},
      {"not a page", [](auto& x) { x.block_table[x.starts[0] / 16] = -1; }},
  };
  for (const auto& [what, mutate] : bad_data) {
    GatherData x = make_data({KvFormat::kFp8, DType::kBf16, 16, true}, rng, {5, 20});
    mutate(x);
    const std::vector<uint8_t> before = x.dst;
    const Status st = ref::gather_and_maybe_dequant_cache_mla(x.p);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.to_string().find(what), std::string::npos) << st.to_string();
    EXPECT_EQ(x.dst, before) << what;
  }
}

}  // namespace
}  // namespace mla

// concat_and_cache_mla reference against a float64 oracle: every format x input dtype x page size, random
// slot mappings with padding (-1) whose slots must keep their poison, saturation beyond ±448·scale, NaN
// and ±inf inputs, all-zero fp8_ds tiles; then every host-side rejection.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>

#include "common/random.h"
#include "mla/core/kv_format.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "test_kv_cache_data.h"

namespace mla {
namespace {

using test::RawArray;
namespace oracle = test::oracle;

constexpr uint8_t kPoison = 0xC3;
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  KvFormat format;
  DType in;
  int page_size;
  bool split_rows;  // kv_c and k_pe as column slices of one [t, 576] buffer (strided rows)
};

struct ConcatData {
  int t;
  int64_t num_pages;
  RawArray rows;      // [t, 576]: kv_c | k_pe values (also the storage when split_rows)
  RawArray kv_c, k_pe;
  std::vector<int64_t> slots;
  std::vector<uint8_t> cache;
  ConcatAndCacheMlaParams p;
};

// Random rows with the special values planted where every format must handle them.
void fill_rows(RawArray& rows, int t, std::mt19937_64& rng, float k_scale) {
  std::normal_distribution<float> nd(0.f, 2.f);
  for (int i = 0; i < t; ++i)
    for (int j = 0; j < kDimQK; ++j) rows.set(size_t(i) * kDimQK + j, nd(rng));
  auto put = [&](int i, int j, float x) { if (i < t) rows.set(size_t(i) * kDimQK + j, x); };
  put(0, 3, std::nanf(""));                         // NaN in tile 0 (fp8_ds: other values keep their scale)
  put(0, 200, kInf);                                // +inf in tile 1: saturates to +448
  put(0, 530, -kInf);                               // -inf in k_pe
  put(0, 515, std::nanf(""));                       // NaN in k_pe
  for (int j = 256; j < 384; ++j) put(1, j, 0.f);   // an all-zero tile: scale 1, codes 0, no NaN
  put(1, 300, -0.f);                                // negative zero keeps its sign
  put(2, 10, 500.f * k_scale);                      // beyond ±448·scale: saturates
  put(2, 11, -1000.f * k_scale);
  put(2, 520, 600.f * k_scale);
  for (int j = 384; j < 512; ++j) put(3, j, 1e-3f * (j % 7 - 3));  // a small-amax tile
}

ConcatData make_setup(const Case& c, int t, std::mt19937_64& rng) {
  const float k_scale = c.format == KvFormat::kFp8 ? 0.1f : 1.f;
  const int64_t num_pages = (t * 3 / 2 + c.page_size - 1) / c.page_size + 1;
  ConcatData s{t, num_pages, RawArray(c.in, size_t(t) * kDimQK), RawArray(c.in, size_t(t) * kDimLatent),
          RawArray(c.in, size_t(t) * kDimRope), {}, {}, {}};
  fill_rows(s.rows, t, rng, k_scale);
  for (int i = 0; i < t; ++i) {
    for (int j = 0; j < kDimLatent; ++j)
      std::memcpy(&s.kv_c.bytes[(size_t(i) * kDimLatent + j) * s.kv_c.esize()],
                  &s.rows.bytes[(size_t(i) * kDimQK + j) * s.rows.esize()], s.rows.esize());
    for (int j = 0; j < kDimRope; ++j)
      std::memcpy(&s.k_pe.bytes[(size_t(i) * kDimRope + j) * s.k_pe.esize()],
                  &s.rows.bytes[(size_t(i) * kDimQK + kDimLatent + j) * s.rows.esize()], s.rows.esize());
  }
  // Distinct random slots, about a fifth of them padding.
  std::vector<int64_t> perm(num_pages * c.page_size);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  s.slots.assign(perm.begin(), perm.begin() + t);
  for (int i = 0; i < t; ++i)
    if (rng() % 5 == 0) s.slots[i] = -1;
  const int tb = kv_bytes_per_token(c.format);
  s.cache.assign(size_t(num_pages) * c.page_size * tb, kPoison);

  s.p.format = c.format;
  s.p.k_scale = k_scale;
  if (c.split_rows) {
    s.p.kv_c = TensorView::contiguous(s.rows.data(), c.in, {t, kDimLatent});
    s.p.kv_c.stride[0] = kDimQK;
    s.p.k_pe = TensorView::contiguous(s.rows.bytes.data() + kDimLatent * s.rows.esize(), c.in, {t, kDimRope});
    s.p.k_pe.stride[0] = kDimQK;
  } else {
    s.p.kv_c = TensorView::contiguous(s.kv_c.data(), c.in, {t, kDimLatent});
    s.p.k_pe = TensorView::contiguous(s.k_pe.data(), c.in, {t, kDimRope});
  }
  s.p.slot_mapping = TensorView::contiguous(s.slots.data(), DType::kInt64, {t});
  s.p.kv_cache = TensorView::contiguous(s.cache.data(), kv_cache_dtype(c.format),
                                        {num_pages, c.page_size, kv_token_elems(c.format)});
  return s;
}

// Checks one written token against the oracle; returns the number of mismatching elements.
int check_token(const Case& c, const ConcatData& s, int i, const uint8_t* tok) {
  int bad = 0;
  auto in = [&](int j) { return s.rows.get(size_t(i) * kDimQK + j); };
  auto in_bits = [&](int j) { return s.rows.bits(size_t(i) * kDimQK + j); };
  auto expect = [&](bool ok, int j, double got, double want) {
    if (!ok && bad++ < 5) ADD_FAILURE() << "token " << i << " elem " << j << ": got " << got << " want " << want;
  };
  auto check16 = [&](int j, uint16_t raw, DType store) {
    const double got = store == DType::kBf16 ? oracle::bf16_value(raw) : oracle::fp16_value(raw);
    if (store == c.in) {
      expect(raw == in_bits(j), j, got, in(j));  // same dtype: a bit copy
    } else {
      expect(oracle::same(got, oracle::round_to(in(j), test::binary_format(store))), j, got, in(j));
    }
  };
  auto check_code = [&](int j, uint8_t code, double scale) {
    const double want = oracle::e4m3_quant(in(j), scale);
    expect(std::isnan(want) ? code == 0x7F : oracle::same(oracle::e4m3_value(code), want), j,
           oracle::e4m3_value(code), want);
  };
  switch (c.format) {
    case KvFormat::kBf16:
    case KvFormat::kFp16:
      for (int j = 0; j < kDimQK; ++j) {
        uint16_t raw;
        std::memcpy(&raw, tok + 2 * j, 2);
        check16(j, raw, kv_cache_dtype(c.format));
      }
      break;
    case KvFormat::kFp8:
      for (int j = 0; j < kDimQK; ++j) check_code(j, tok[j], s.p.k_scale);
      break;
    case KvFormat::kFp8Ds:
      for (int tile = 0; tile < 4; ++tile) {
        std::vector<double> v(128);
        for (int j = 0; j < 128; ++j) v[j] = in(tile * 128 + j);
        const float want_scale = oracle::ds_scale(v);
        float got_scale;
        std::memcpy(&got_scale, tok + 512 + 4 * tile, 4);
        if (std::memcmp(&got_scale, &want_scale, 4) != 0 && bad++ < 5)
          ADD_FAILURE() << "token " << i << " tile " << tile << " scale " << got_scale << " want " << want_scale;
        for (int j = 0; j < 128; ++j) check_code(tile * 128 + j, tok[tile * 128 + j], want_scale);
      }
      for (int j = 0; j < kDimRope; ++j) {
        uint16_t raw;
        std::memcpy(&raw, tok + 528 + 2 * j, 2);
        check16(kDimLatent + j, raw, DType::kBf16);
      }
      break;
  }
  return bad;
}

class ConcatAndCacheMlaRef : public ::testing::TestWithParam<Case> {};

TEST_P(ConcatAndCacheMlaRef, MatchesFloat64OracleAndSkipsPadding) {
  const Case c = GetParam();
  auto rng = test::case_rng("concat_" + std::string(kv_format_name(c.format)) + std::to_string(int(c.in)));
  ConcatData s = make_setup(c, 45, rng);
  ASSERT_TRUE(ref::concat_and_cache_mla(s.p).is_ok());
  const int tb = kv_bytes_per_token(c.format);
  std::vector<bool> written(size_t(s.num_pages) * c.page_size, false);
  int bad = 0;
  for (int i = 0; i < s.t; ++i) {
    if (s.slots[i] < 0) continue;
    written[s.slots[i]] = true;
    bad += check_token(c, s, i, s.cache.data() + s.slots[i] * tb);
  }
  EXPECT_EQ(bad, 0);
  for (size_t slot = 0; slot < written.size(); ++slot) {
    if (written[slot]) continue;
    const uint8_t* tok = s.cache.data() + slot * tb;
    ASSERT_TRUE(std::all_of(tok, tok + tb, [](uint8_t b) { return b == kPoison; })) << "slot " << slot << " touched";
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds})
    for (DType in : {DType::kBf16, DType::kFp16, DType::kFp32})
      for (int ps : {16, 32, 64}) v.push_back({f, in, ps, ps == 32});
  return v;
}

INSTANTIATE_TEST_SUITE_P(AllFormats, ConcatAndCacheMlaRef, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& tp) {
                           const Case& c = tp.param;
                           return std::string(kv_format_name(c.format)) + "_" + std::string(dtype_name(c.in)) + "_p" +
                                  std::to_string(c.page_size) + (c.split_rows ? "_split" : "");
                         });

TEST(ConcatAndCacheMla, Fp8DsZeroTileKeepsZerosAndUnitScale) {
  auto rng = test::case_rng("concat_zero_tile");
  ConcatData s = make_setup({KvFormat::kFp8Ds, DType::kBf16, 16, false}, 2, rng);
  for (int j = 0; j < kDimLatent; ++j) s.kv_c.set(j, 0.f);  // token 0: kv_c all zero
  s.slots = {5, -1};
  s.p.slot_mapping.data = s.slots.data();
  ASSERT_TRUE(ref::concat_and_cache_mla(s.p).is_ok());
  const uint8_t* tok = s.cache.data() + 5 * 656;
  for (int j = 0; j < 512; ++j) ASSERT_EQ(tok[j], 0) << j;
  for (int tile = 0; tile < 4; ++tile) {
    float sc;
    std::memcpy(&sc, tok + 512 + 4 * tile, 4);
    EXPECT_EQ(sc, 1.f);
  }
}

TEST(ConcatAndCacheMla, EmptyBatchIsANoOp) {
  auto rng = test::case_rng("concat_empty");
  ConcatData s = make_setup({KvFormat::kFp8, DType::kBf16, 64, false}, 1, rng);
  s.p.kv_c.shape[0] = 0;
  s.p.k_pe.shape[0] = 0;
  s.p.slot_mapping.shape[0] = 0;
  ASSERT_TRUE(ref::concat_and_cache_mla(s.p).is_ok());
  EXPECT_TRUE(std::all_of(s.cache.begin(), s.cache.end(), [](uint8_t b) { return b == kPoison; }));
}

// Each bad argument is rejected with a Status naming the op and the offending tensor.
TEST(ConcatAndCacheMla, RejectsBadArguments) {
  auto rng = test::case_rng("concat_reject");
  ConcatData s = make_setup({KvFormat::kFp8Ds, DType::kBf16, 16, false}, 4, rng);
  ASSERT_TRUE(validate_concat_and_cache_mla(s.p).is_ok());
  std::vector<int32_t> slots32(4, 0);
  std::vector<uint8_t> unaligned(4 * 512 * 2 + 16);
  // The same step as an fp8 cache of 576-byte tokens, with the given k_scale.
  const auto as_fp8 = [](ConcatAndCacheMlaParams& p, float k_scale) {
    p.format = KvFormat::kFp8;
    p.kv_cache.dtype = DType::kE4m3;
    p.kv_cache.shape[2] = 576;
    p.kv_cache.stride[1] = 576;
    p.kv_cache.stride[0] = 16 * 576;
    p.k_scale = k_scale;
  };
  const std::vector<std::pair<std::string, std::function<void(ConcatAndCacheMlaParams&)>>> bad = {
      {"kv_c", [](auto& p) { p.kv_c.dtype = DType::kInt32; }},
      {"kv_c", [](auto& p) { p.kv_c.shape[1] = 511; }},
      {"kv_c", [](auto& p) { p.kv_c.rank = 3; }},
      {"kv_c", [](auto& p) { p.kv_c.data = nullptr; }},
      {"kv_c", [](auto& p) { p.kv_c = TensorView{}; }},
      {"kv_c", [](auto& p) { p.kv_c.stride[1] = 2; }},
      {"kv_c", [&](auto& p) { p.kv_c.data = unaligned.data() + 2; }},
      {"kv_c", [](auto& p) { p.kv_c.stride[0] = 516; }},       // row stride not a multiple of 16 bytes
      {"kv_c", [](auto& p) { p.kv_c.stride[0] = 256; }},       // rows overlap
      {"k_pe", [](auto& p) { p.k_pe.dtype = DType::kFp16; }},  // differs from kv_c
      {"k_pe", [](auto& p) { p.k_pe.shape[0] = 3; }},
      {"k_pe", [](auto& p) { p.k_pe.shape[1] = 32; }},
      {"slot_mapping", [&](auto& p) { p.slot_mapping = TensorView::contiguous(slots32.data(), DType::kInt32, {4}); }},
      {"slot_mapping", [](auto& p) { p.slot_mapping.shape[0] = 5; }},
      {"kv_cache", [](auto& p) { p.kv_cache.dtype = DType::kE4m3; }},  // fp8_ds caches are uint8
      {"kv_cache", [](auto& p) { p.kv_cache.shape[2] = 576; }},
      {"kv_cache", [](auto& p) { p.kv_cache.data = nullptr; }},
      {"page size",
       [](auto& p) {
         p.kv_cache.shape[1] = 8;
         p.kv_cache.stride[0] = 8 * 656;
       }},
      {"page size",
       [](auto& p) {
         p.kv_cache.shape[1] = 128;
         p.kv_cache.stride[0] = 128 * 656;
       }},
      {"kv_cache", [](auto& p) { p.kv_cache.stride[0] += 1; }},
      {"k_scale", [&](auto& p) { as_fp8(p, 0.f); }},
      {"k_scale", [&](auto& p) { as_fp8(p, std::nanf("")); }},
  };
  for (const auto& [what, mutate] : bad) {
    ConcatAndCacheMlaParams p = s.p;
    mutate(p);
    const Status st = ref::concat_and_cache_mla(p);
    EXPECT_FALSE(st.is_ok()) << what;
    EXPECT_NE(st.to_string().find("concat_and_cache_mla"), std::string::npos) << st.to_string();
    EXPECT_NE(st.to_string().find(what), std::string::npos) << st.to_string();
  }
  // A slot past the cache is data: the reference rejects it before writing anything.
  s.slots = {0, 1, s.num_pages * 16, 2};
  s.p.slot_mapping.data = s.slots.data();
  const std::vector<uint8_t> before = s.cache;
  const Status st = ref::concat_and_cache_mla(s.p);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("slot_mapping[2]"), std::string::npos) << st.to_string();
  EXPECT_EQ(s.cache, before);
}

}  // namespace
}  // namespace mla

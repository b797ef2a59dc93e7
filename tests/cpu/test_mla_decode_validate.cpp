// validate_mla_decode, argument by argument: the host checks the CPU reference and the CUDA launcher both run first
// (the launcher before it launches anything), so every bad tensor (null, wrong dtype, wrong rank, a wrong dim, strided)
// and every bad scalar must be refused with an error that names the op and the argument, in every KV format.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/decode_data.h"
#include "mla/ops/mla_decode.h"

namespace mla {
namespace {

using test::DecodeHostData;
using test::DecodeShape;

// One valid step of a format (2 sequences, s_q 2, h_q 16) and host buffers behind its params.
struct Step {
  DecodeHostData h;
  std::vector<uint8_t> out, lse;
  MlaDecodeParams p;
  explicit Step(KvFormat f) {
    DecodeShape s;
    s.batch = 2;
    s.s_q = 2;
    s.h_q = 16;
    s.seqlens = {70, 10};
    s.format = f;
    s.causal = true;
    std::mt19937_64 rng(11);
    h = test::make_decode_data(s, rng);
    out.assign(h.out_elems() * 2, 0);
    lse.assign(h.lse_elems() * 4, 0);
    p = h.params(h.q.data(), h.cache.data(), h.block_table.data(), h.seqlens.data(), out.data(), lse.data(), 0.1f);
  }
};

TensorView MlaDecodeParams::*const kTensors[] = {&MlaDecodeParams::q,       &MlaDecodeParams::kv_cache,
                                                 &MlaDecodeParams::block_table, &MlaDecodeParams::seqlens,
                                                 &MlaDecodeParams::out,     &MlaDecodeParams::lse};
const char* const kNames[] = {"q", "kv_cache", "block_table", "seqlens", "out", "lse"};

// A dtype the argument never takes in this format.
DType wrong_dtype(const TensorView& t) { return t.dtype == DType::kFp32 ? DType::kInt32 : DType::kFp32; }

void expect_refused(const MlaDecodeParams& bad, const std::string& what, const std::string& needle) {
  const Status st = validate_mla_decode(bad);
  ASSERT_FALSE(st.is_ok()) << "accepted: " << what;
  EXPECT_EQ(st.op(), "mla_decode") << what << ": " << st.to_string();
  EXPECT_NE(st.to_string().find(needle), std::string::npos) << what << ": " << st.to_string();
}

class MlaDecodeValidate : public ::testing::TestWithParam<KvFormat> {};

TEST_P(MlaDecodeValidate, AcceptsTheValidStep) {
  Step s(GetParam());
  EXPECT_TRUE(validate_mla_decode(s.p).is_ok()) << validate_mla_decode(s.p).to_string();
  EXPECT_TRUE(ref::mla_decode(s.p).is_ok());
}

TEST_P(MlaDecodeValidate, RefusesEveryBadTensor) {
  Step s(GetParam());
  for (size_t i = 0; i < std::size(kTensors); ++i) {
    const std::string name = kNames[i];
    std::vector<std::pair<std::string, std::function<void(TensorView&)>>> mutations = {
        {"null", [](TensorView& t) { t.data = nullptr; }},
        {"undefined", [](TensorView& t) { t = TensorView{}; }},
        {"wrong dtype", [](TensorView& t) { t.dtype = wrong_dtype(t); }},
        {"extra dim", [](TensorView& t) {
           t.shape[t.rank] = 1;
           t.stride[t.rank] = 1;
           ++t.rank;
         }},
        // Every argument must be packed: the kernels compute addresses from the shapes.
        {"strided", [](TensorView& t) { t.stride[0] *= 2; }},
    };
    // The last dim is fixed for all but the block table (any width: the seqlens bound what is read).
    if (name != "block_table") mutations.push_back({"wrong last dim", [](TensorView& t) { t.shape[t.rank - 1] += 1; }});
    for (auto& [what, mutate] : mutations) {
      MlaDecodeParams bad = s.p;
      mutate(bad.*kTensors[i]);
      expect_refused(bad, name + " " + what, name);
    }
  }
}

TEST_P(MlaDecodeValidate, RefusesShapesThatDisagree) {
  Step s(GetParam());
  const int64_t b = s.p.q.shape[0], s_q = s.p.q.shape[1], h_q = s.p.q.shape[2];
  const auto with = [&](TensorView MlaDecodeParams::*m, std::initializer_list<int64_t> dims) {
    MlaDecodeParams bad = s.p;
    bad.*m = TensorView::contiguous((s.p.*m).data, (s.p.*m).dtype, dims);
    return bad;
  };
  expect_refused(with(&MlaDecodeParams::block_table, {b + 1, s.h.max_pages}), "block_table batch", "block_table");
  expect_refused(with(&MlaDecodeParams::seqlens, {b - 1}), "seqlens batch", "seqlens");
  expect_refused(with(&MlaDecodeParams::out, {b, s_q, h_q, kDimQK}), "out width 576", "out");
  expect_refused(with(&MlaDecodeParams::out, {b, s_q - 1, h_q, kDimV}), "out s_q", "out");
  expect_refused(with(&MlaDecodeParams::lse, {b, s_q, h_q}), "lse [b, s_q, h_q]",
                 "lse");  // the layout is [b, h_q, s_q]
  expect_refused(with(&MlaDecodeParams::q, {b, s_q, 8, kDimQK}), "h_q 8", "h_q must be 16, 32, 64 or 128");
  expect_refused(with(&MlaDecodeParams::q, {b, 5, h_q, kDimQK}), "s_q 5", "s_q must be in 1..4");
  expect_refused(with(&MlaDecodeParams::q, {0, s_q, h_q, kDimQK}), "batch 0", "batch must be >= 1");
  const int64_t tok = s.p.kv_cache.shape[2];
  expect_refused(with(&MlaDecodeParams::kv_cache, {s.p.kv_cache.shape[0] * 2, 32, tok}), "page size 32", "kv_cache");
  expect_refused(with(&MlaDecodeParams::kv_cache, {0, 64, tok}), "no pages", "kv_cache");
  expect_refused(with(&MlaDecodeParams::block_table, {b, 0}), "no block-table columns", "block_table");
}

TEST_P(MlaDecodeValidate, RefusesBadScalesAndMismatchedFormats) {
  Step s(GetParam());
  for (float bad_scale : {0.f, -1.f, NAN, INFINITY}) {
    MlaDecodeParams bad = s.p;
    bad.softmax_scale = bad_scale;
    expect_refused(bad, "softmax_scale " + std::to_string(bad_scale), "softmax_scale");
    if (GetParam() == KvFormat::kFp8) {
      bad = s.p;
      bad.q_scale = bad_scale;
      expect_refused(bad, "q_scale " + std::to_string(bad_scale), "q_scale");
      bad = s.p;
      bad.k_scale = bad_scale;
      expect_refused(bad, "k_scale " + std::to_string(bad_scale), "k_scale");
    }
  }
  // The same buffers under another format's name: a dtype or token width that format does not take.
  for (KvFormat other : {KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds}) {
    if (other == GetParam()) continue;
    MlaDecodeParams bad = s.p;
    bad.format = other;
    expect_refused(bad, std::string("as ") + std::string(kv_format_name(other)), "expected");
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, MlaDecodeValidate,
                         ::testing::Values(KvFormat::kBf16, KvFormat::kFp16, KvFormat::kFp8, KvFormat::kFp8Ds),
                         [](const ::testing::TestParamInfo<KvFormat>& p) {
                           return std::string(kv_format_name(p.param));
                         });

}  // namespace
}  // namespace mla

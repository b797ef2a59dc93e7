// Checkpoint → ModelWeights: a saved dummy model loads back bit-exactly (single file and sharded);
// a missing, extra, mis-shaped or mis-typed tensor is an error naming it; dummy weights are
// deterministic from the seed.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "mla/core/half.h"
#include "mla/loader/checkpoint.h"
#include "mla/loader/safetensors.h"
#include "mla/loader/weights_loader.h"
#include "test_loader_helpers.h"

namespace mla::loader {
namespace {

using mla::test::TempDir;

model::ModelConfig tiny() {
  model::ModelConfig c;
  EXPECT_TRUE(model::preset_config("tiny", &c).is_ok());
  return c;
}

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.dtype == b.dtype && a.numel() == b.numel() && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

LoadOptions quiet() { return {.progress = ProgressMode::kOff}; }

TEST(LoaderWeights, SavedDummyLoadsBackExactly) {
  for (int shards : {1, 3}) {
    TempDir d;
    model::ModelWeights w, r;
    ASSERT_TRUE(make_dummy_weights(tiny(), 7, DType::kBf16, &w).is_ok());
    ASSERT_TRUE(save_weights(w, d.path(), shards).is_ok());
    Status s = load_weights(d.path(), tiny(), &r, quiet());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
    model::ModelWeights wc = w, rc = r;
    auto a = model::list_weights(&wc), b = model::list_weights(&rc);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bytes(*a[i].slot, *b[i].slot)) << a[i].hf_name;
    EXPECT_TRUE(r.layers[1].is_moe);
    EXPECT_EQ(r.layers[1].moe.experts.size(), 8u);
  }
}

// Rewrites the tiny checkpoint with one tensor changed by `edit` (which may drop it: return false).
template <class Edit>
Status load_edited(Edit edit, std::string* dir_keep, TempDir& d) {
  model::ModelWeights w, r;
  EXPECT_TRUE(make_dummy_weights(tiny(), 7, DType::kFp32, &w).is_ok());
  auto specs = model::list_weights(&w);
  std::vector<TensorToWrite> out;
  std::vector<std::vector<uint8_t>> keep;
  for (const auto& s : specs) {
    TensorToWrite t{s.hf_name, s.slot->dtype, s.shape, s.slot->data};
    if (edit(t, keep)) out.push_back(t);
  }
  TensorToWrite extra{"", DType::kFp32, {}, nullptr};
  if (edit(extra, keep) && !extra.name.empty()) out.push_back(extra);
  EXPECT_TRUE(write_safetensors(d.path() + "/model.safetensors", out).is_ok());
  *dir_keep = d.path();
  return load_weights(d.path(), tiny(), &r, quiet());
}

TEST(LoaderWeights, MissingExtraMismatchedTensorsAreNamed) {
  const std::string kv = "model.layers.1.self_attn.kv_b_proj.weight";
  std::string dir;
  {
    TempDir d;
    Status s = load_edited([&](TensorToWrite& t, auto&) { return t.name != kv; }, &dir, d);
    EXPECT_FALSE(s.is_ok());
    EXPECT_NE(s.message().find("missing tensor \"" + kv + "\""), std::string::npos) << s.to_string();
    EXPECT_NE(s.message().find("layers.1.attn.kv_b_proj"), std::string::npos) << s.to_string();
  }
  {
    TempDir d;
    std::vector<float> junk(4);
    Status s = load_edited(
        [&](TensorToWrite& t, auto&) {
          if (t.name.empty()) t = {"model.layers.0.mlp.experts.0.up_proj.weight", DType::kFp32, {2, 2}, junk.data()};
          return true;
        },
        &dir, d);
    EXPECT_NE(s.message().find("unexpected tensor \"model.layers.0.mlp.experts.0.up_proj.weight\""), std::string::npos)
        << s.to_string();
  }
  {
    TempDir d;
    Status s = load_edited(
        [&](TensorToWrite& t, auto&) {
          if (t.name == kv) t.shape = {512, 1024};  // transposed: same bytes, wrong shape
          return true;
        },
        &dir, d);
    EXPECT_NE(s.message().find(kv + "\" (layers.1.attn.kv_b_proj) has shape fp32[512, 1024], expected [1024, 512]"),
              std::string::npos)
        << s.to_string();
  }
  {
    TempDir d;
    Status s = load_edited(
        [&](TensorToWrite& t, auto&) {
          if (t.name == kv) t.dtype = DType::kInt32;
          return true;
        },
        &dir, d);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported);
    EXPECT_NE(s.message().find(kv), std::string::npos) << s.to_string();
  }
}

TEST(LoaderWeights, TiedEmbeddingsNeedNoLmHead) {
  TempDir d;
  model::ModelConfig c = tiny();
  c.tie_word_embeddings = true;
  model::ModelWeights w, r;
  ASSERT_TRUE(make_dummy_weights(c, 3, DType::kBf16, &w).is_ok());
  EXPECT_EQ(w.lm_head.data, w.embed_tokens.data);
  ASSERT_TRUE(save_weights(w, d.path()).is_ok());
  Status s = load_weights(d.path(), c, &r, quiet());
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_EQ(r.lm_head.data, r.embed_tokens.data);
  // The untied config wants lm_head.weight, which this checkpoint lacks.
  EXPECT_NE(load_weights(d.path(), tiny(), &r, quiet()).message().find("\"lm_head.weight\""), std::string::npos);
}

TEST(LoaderWeights, TruncatedCheckpointIsAnError) {
  TempDir d;
  model::ModelWeights w, r;
  ASSERT_TRUE(make_dummy_weights(tiny(), 7, DType::kBf16, &w).is_ok());
  ASSERT_TRUE(save_weights(w, d.path()).is_ok());
  const std::string f = d.path() + "/model.safetensors";
  mla::test::truncate_file(f, std::filesystem::file_size(f) - 1);
  Status s = load_weights(d.path(), tiny(), &r, quiet());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.to_string();
}

TEST(LoaderWeights, Fp16IsWidenedToFp32) {
  TempDir d;
  std::string dir;
  std::vector<uint16_t> half;
  Status s = load_edited(
      [&](TensorToWrite& t, auto&) {
        if (t.name == "model.norm.weight") {
          half.assign(static_cast<size_t>(t.shape[0]), float_to_fp16(0.5f));
          t = {t.name, DType::kFp16, t.shape, half.data()};
        }
        return true;
      },
      &dir, d);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  model::ModelWeights r;
  ASSERT_TRUE(load_weights(dir, tiny(), &r, quiet()).is_ok());
  EXPECT_EQ(r.norm.dtype, DType::kFp32);
  EXPECT_EQ(r.norm.ptr<const float>()[3], 0.5f);
}

TEST(LoaderWeights, DummyIsDeterministicAndSeeded) {
  model::ModelWeights a, b, c;
  ASSERT_TRUE(make_dummy_weights(tiny(), 1, DType::kFp32, &a).is_ok());
  ASSERT_TRUE(make_dummy_weights(tiny(), 1, DType::kFp32, &b).is_ok());
  ASSERT_TRUE(make_dummy_weights(tiny(), 2, DType::kFp32, &c).is_ok());
  EXPECT_TRUE(same_bytes(a.layers[1].attn.kv_b_proj, b.layers[1].attn.kv_b_proj));
  EXPECT_FALSE(same_bytes(a.layers[1].attn.kv_b_proj, c.layers[1].attn.kv_b_proj));
  EXPECT_EQ(a.norm.ptr<const float>()[0], 1.0f);
  // Unit-variance-preserving scale: var(W) ≈ 1/fan_in for q_proj.
  const TensorView& q = a.layers[0].attn.q_proj;
  double ss = 0;
  for (int64_t i = 0; i < q.numel(); ++i) ss += double(q.ptr<const float>()[i]) * q.ptr<const float>()[i];
  EXPECT_NEAR(ss / double(q.numel()) * double(q.shape[1]), 1.0, 0.05);
  EXPECT_FALSE(make_dummy_weights(tiny(), 1, DType::kE4m3, &a).is_ok());
}

TEST(LoaderWeights, DummyV2TooLargeForHostIsOutOfMemoryNotACrash) {
  // DeepSeek-V2 (236B parameters) cannot fit in host memory on any CI machine.
  model::ModelConfig c;
  ASSERT_TRUE(model::preset_config("deepseek-v2", &c).is_ok());
  EXPECT_GT(model::num_parameters(c), 230'000'000'000);
  model::ModelWeights w;
  Status s = make_dummy_weights(c, 1, DType::kBf16, &w);
  EXPECT_EQ(s.code(), StatusCode::kOutOfMemory) << s.to_string();
}

TEST(LoaderWeights, ParameterCountOfV2LiteIsThePublishedOne) {
  model::ModelConfig c;
  ASSERT_TRUE(model::preset_config("deepseek-v2-lite", &c).is_ok());
  // 15.7B total parameters (DeepSeek-V2-Lite model card).
  EXPECT_NEAR(double(model::num_parameters(c)) / 1e9, 15.7, 0.05);
}

}  // namespace
}  // namespace mla::loader

// Safetensors files: round trip through the writer, and truncated / corrupt files rejected with an
// error (never a crash).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include "mla/loader/checkpoint.h"
#include "mla/loader/safetensors.h"
#include "test_loader_helpers.h"

namespace mla::loader {
namespace {

using mla::test::TempDir;

std::string write_two(const std::string& path) {
  static std::vector<float> a = {1, 2, 3, 4, 5, 6};
  static std::vector<uint16_t> b = {0x3F80, 0x4000, 0xC040};
  EXPECT_TRUE(write_safetensors(path, {{"a", DType::kFp32, {2, 3}, a.data()}, {"b", DType::kBf16, {3}, b.data()}},
                                {{"format", "pt"}})
                  .is_ok());
  return path;
}

std::string make_file(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  bytes += header + std::string(data_bytes, '\0');
  mla::test::write_text(path, bytes);
  return path;
}

TEST(LoaderSafetensors, RoundTrip) {
  TempDir d;
  std::shared_ptr<SafetensorsFile> f;
  ASSERT_TRUE(SafetensorsFile::open(write_two(d.path() + "/x.safetensors"), &f).is_ok());
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* a = f->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->str(), "fp32[2, 3]");
  TensorView v = f->view(*a);
  EXPECT_EQ(v.str(), "fp32[2, 3]");
  EXPECT_EQ(v.ptr<const float>()[5], 6.0f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 8, 0u);  // the writer keeps data 8-byte aligned
  const TensorInfo* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBf16);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->find("c"), nullptr);
}

TEST(LoaderSafetensors, TruncatedFileIsAnErrorAtEveryLength) {
  TempDir d;
  const std::string good = write_two(d.path() + "/good.safetensors");
  const size_t size = std::filesystem::file_size(good);
  const std::string bad = d.path() + "/bad.safetensors";
  for (size_t len = 0; len < size; len += (len < 16 || len + 16 > size) ? 1 : 7) {
    std::filesystem::copy_file(good, bad, std::filesystem::copy_options::overwrite_existing);
    mla::test::truncate_file(bad, len);
    std::shared_ptr<SafetensorsFile> f;
    Status s = SafetensorsFile::open(bad, &f);
    EXPECT_FALSE(s.is_ok()) << "length " << len;
    EXPECT_NE(s.message().find("bad.safetensors"), std::string::npos) << s.to_string();
  }
}

TEST(LoaderSafetensors, CorruptHeadersAreErrorsNamingTheProblem) {
  TempDir d;
  const std::string p = d.path() + "/c.safetensors";
  const std::pair<std::string, std::string> cases[] = {
      {"{not json", "not a JSON object"},
      {R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", "F64"},
      {R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", "\"w\""},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 64]}})", "outside the data"},
      {R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "non-negative"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", "data_offsets"},
      {R"({"u": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "v": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", "overlap"},
  };
  for (const auto& [header, word] : cases) {
    std::shared_ptr<SafetensorsFile> f;
    Status s = SafetensorsFile::open(make_file(p, header, 16), &f);
    EXPECT_FALSE(s.is_ok()) << header;
    EXPECT_NE(s.to_string().find(word), std::string::npos) << s.to_string();
  }
  // A header length far beyond the file.
  std::string huge(8, '\xff');
  mla::test::write_text(p, huge + "{}");
  std::shared_ptr<SafetensorsFile> f;
  EXPECT_NE(SafetensorsFile::open(p, &f).message().find("exceeds the file size"), std::string::npos);
  EXPECT_EQ(SafetensorsFile::open(d.path() + "/none.safetensors", &f).code(), StatusCode::kIoError);
}

TEST(LoaderCheckpoint, ShardedIndexAndMissingShardTensor) {
  TempDir d;
  std::vector<float> x = {1, 2}, y = {3, 4, 5};
  ASSERT_TRUE(write_safetensors(d.path() + "/s1.safetensors", {{"x", DType::kFp32, {2}, x.data()}}).is_ok());
  ASSERT_TRUE(write_safetensors(d.path() + "/s2.safetensors", {{"y", DType::kFp32, {3}, y.data()}}).is_ok());
  mla::test::write_text(d.path() + "/model.safetensors.index.json",
                        R"({"metadata": {}, "weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}})");
  Checkpoint c;
  ASSERT_TRUE(Checkpoint::open(d.path(), &c).is_ok());
  ASSERT_NE(c.find("y"), nullptr);
  EXPECT_EQ(c.find("y")->file->view(*c.find("y")->info).ptr<const float>()[2], 5.0f);
  EXPECT_EQ(c.total_bytes(), 20u);
  mla::test::write_text(d.path() + "/model.safetensors.index.json",
                        R"({"weight_map": {"x": "s1.safetensors", "z": "s2.safetensors"}})");
  Status s = Checkpoint::open(d.path(), &c);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("\"z\""), std::string::npos) << s.to_string();
  TempDir empty;
  EXPECT_EQ(Checkpoint::open(empty.path(), &c).code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace mla::loader

#pragma once
// Temporary directories and file surgery for the loader tests.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mla::test {

// A fresh directory under the test temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "mla_loader_XXXXXX";
    path_ = mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void truncate_file(const std::string& path, size_t size) { std::filesystem::resize_file(path, size); }

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

}  // namespace mla::test

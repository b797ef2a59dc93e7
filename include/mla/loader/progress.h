#pragma once
// A one-line progress bar on stderr ("loading weights [#####.....]  52%  1.2/2.3 GB  412/783"),
// redrawn at most every 100 ms; silent when disabled (e.g. stderr is not a terminal).
#include <chrono>
#include <cstddef>
#include <string>

namespace mla::loader {

enum class ProgressMode { kAuto, kOn, kOff };  // kAuto: on when stderr is a terminal

class ProgressBar {
 public:
  ProgressBar(std::string label, size_t total_items, size_t total_bytes, ProgressMode mode);
  ~ProgressBar();
  void advance(size_t items, size_t bytes);
  void finish();

 private:
  void draw(bool force);
  std::string label_;
  size_t total_items_, total_bytes_;
  size_t items_ = 0, bytes_ = 0;
  bool enabled_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace mla::loader

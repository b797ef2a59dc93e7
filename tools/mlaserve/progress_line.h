#pragma once
// A one-line progress display on stderr for long runs: done/total, rate, elapsed and ETA. Redrawn at
// most 10 times a second, only when stderr is a terminal (logs stay clean), and always on finish.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace mla::cli {

class ProgressLine {
 public:
  ProgressLine(std::string label, int64_t total) : label_(std::move(label)), total_(total), tty_(isatty(2)) {}

  void update(int64_t done, double tokens_per_s) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty_ || (done < total_ && now - last_ < std::chrono::milliseconds(100))) return;
    last_ = now;
    draw(done, tokens_per_s);
  }
  void finish(int64_t done, double tokens_per_s) {
    draw(done, tokens_per_s);
    std::fputc('\n', stderr);
  }

 private:
  void draw(int64_t done, double tokens_per_s) {
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double eta = done > 0 ? el * double(total_ - done) / double(done) : 0.0;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? int(kWidth * done / total_) : kWidth;
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld  %.0f tok/s  %.0fs elapsed, ETA %.0fs ", label_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '.').c_str(), (long long)done,
                 (long long)total_, tokens_per_s, el, eta);
    std::fflush(stderr);
  }
  std::string label_;
  int64_t total_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), last_{};
};

}  // namespace mla::cli

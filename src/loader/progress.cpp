#include "mla/loader/progress.h"

#include <unistd.h>

#include <cstdio>

namespace mla::loader {

ProgressBar::ProgressBar(std::string label, size_t total_items, size_t total_bytes, ProgressMode mode)
    : label_(std::move(label)),
      total_items_(total_items),
      total_bytes_(total_bytes),
      enabled_(mode == ProgressMode::kOn || (mode == ProgressMode::kAuto && isatty(STDERR_FILENO))),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(size_t items, size_t bytes) {
  items_ += items;
  bytes_ += bytes;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
  if (enabled_) std::fputc('\n', stderr);
}

void ProgressBar::draw(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  const double frac = total_bytes_
                          ? static_cast<double>(bytes_) / static_cast<double>(total_bytes_)
                          : (total_items_ ? static_cast<double>(items_) / static_cast<double>(total_items_) : 1.0);
  const int filled = static_cast<int>(frac * kWidth + 0.5);
  char bar[kWidth + 1];
  for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
  bar[kWidth] = '\0';
  const double secs = std::chrono::duration<double>(now - start_).count();
  const bool gb = total_bytes_ >= 1000000000u;
  const double unit = gb ? 1e9 : 1e6;
  std::fprintf(stderr, "\r%s [%s] %3d%%  %.2f/%.2f %s  %zu/%zu  %.1fs", label_.c_str(), bar,
               static_cast<int>(frac * 100 + 0.5), static_cast<double>(bytes_) / unit,
               static_cast<double>(total_bytes_) / unit, gb ? "GB" : "MB", items_, total_items_, secs);
  std::fflush(stderr);
}

}  // namespace mla::loader

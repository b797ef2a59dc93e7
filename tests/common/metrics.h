#pragma once
// Error metrics shared by CPU and GPU tests: NaN/Inf first, then relative L2 and max-abs.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace mla::test {

struct ErrorStats {
  size_t n = 0;
  size_t nonfinite_got = 0;   // NaN/Inf in the result where the reference is finite
  size_t mismatched_nan = 0;  // NaN pattern differs (reference NaN but result not, or vice versa)
  double rel_l2 = 0;          // ||got - ref|| / ||ref|| over finite reference entries
  double max_abs = 0;
  size_t worst = 0;           // index of max_abs
  std::string str() const {
    char buf[200];
    std::snprintf(buf, sizeof buf, "n=%zu rel_l2=%.3e max_abs=%.3e (at %zu) nonfinite=%zu nan_mismatch=%zu", n,
                  rel_l2, max_abs, worst, nonfinite_got, mismatched_nan);
    return buf;
  }
};

// got(i) and ref(i) return doubles; -inf == -inf counts as equal (lse of empty rows).
template <class GotFn, class RefFn>
ErrorStats compare(size_t n, GotFn got, RefFn ref) {
  ErrorStats s;
  s.n = n;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got(i), r = ref(i);
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) ++s.mismatched_nan;
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (g != r) ++s.nonfinite_got;
      continue;
    }
    const double d = g - r;
    num += d * d;
    den += r * r;
    if (std::fabs(d) > s.max_abs) { s.max_abs = std::fabs(d); s.worst = i; }
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

// The worst row of a row-major result of rows x cols values: the largest ||got_r - ref_r|| / max(||ref_r||, floor) over
// the rows, floor = 1e-2 x the rows' RMS norm (a row whose reference is near zero is held to an absolute error). A
// case's rel_l2 runs over every row, so one wrong row of many hides in it (one of 8192 rows 100 % off moves it by
// 1.1 %); this metric is that row's own check. Values non-finite on either side are skipped (compare counts them).
// rel_l2 = that ratio, worst = its row, n = rows, max_abs = 0 (a Tolerance for it bounds rel_l2 alone).
template <class GotFn, class RefFn>
ErrorStats worst_row(size_t rows, size_t cols, GotFn got, RefFn ref) {
  std::vector<double> num(rows, 0.0), den(rows, 0.0);
  double den_all = 0;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const double g = got(r * cols + c), x = ref(r * cols + c);
      if (!std::isfinite(g) || !std::isfinite(x)) continue;
      num[r] += (g - x) * (g - x);
      den[r] += x * x;
    }
  for (double d : den) den_all += d;
  const double floor2 = rows > 0 ? 1e-4 * den_all / double(rows) : 0.0;  // (1e-2 x the RMS row norm)^2
  ErrorStats s;
  s.n = rows;
  for (size_t r = 0; r < rows; ++r) {
    const double d = std::max(den[r], floor2);
    const double e = d > 0 ? std::sqrt(num[r] / d) : std::sqrt(num[r]);
    if (e > s.rel_l2) s.rel_l2 = e, s.worst = r;
  }
  return s;
}

template <class T>
ErrorStats compare_vec(const T& got, const T& ref) {
  return compare(ref.size(), [&](size_t i) { return static_cast<double>(got[i]); },
                 [&](size_t i) { return static_cast<double>(ref[i]); });
}

// A tolerance with the reason it is what it is (every case states one).
struct Tolerance {
  double rel_l2;
  double max_abs;
  const char* why;
};

inline bool within(const ErrorStats& s, const Tolerance& t) {
  return s.nonfinite_got == 0 && s.mismatched_nan == 0 && s.rel_l2 <= t.rel_l2 && s.max_abs <= t.max_abs;
}

}  // namespace mla::test

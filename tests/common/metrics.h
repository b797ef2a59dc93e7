#pragma once
// Error metrics shared by CPU and GPU tests: NaN/Inf first, then relative L2 and max-abs.
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <string>

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

#pragma once
// Float64 oracles for the KV-cache op tests, written from the formats' definitions (docs/kv_cache_formats.md)
// without the codecs under test: binary rounding by scaling and nearbyint, e4m3 decoding from its fields.
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace mla::test::oracle {

struct BinaryFormat {
  int mant_bits;    // explicit fraction bits
  int emin;         // exponent of the smallest normal
  double max;       // largest finite value
  bool saturate;    // overflow -> ±max (e4m3 satfinite) instead of ±inf
};
constexpr BinaryFormat kE4m3{3, -6, 448.0, true};
constexpr BinaryFormat kBf16{7, -126, 0x1.fep127, false};
constexpr BinaryFormat kFp16{10, -14, 65504.0, false};

// Round-to-nearest-even of v into the format (as a double). NaN stays NaN.
inline double round_to(double v, BinaryFormat f) {
  if (std::isnan(v)) return v;
  const double sign = std::signbit(v) ? -1.0 : 1.0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign * (f.saturate ? f.max : a);
  if (a == 0) return v;
  int k;
  std::frexp(a, &k);  // a = m * 2^k, m in [0.5, 1): exponent k - 1
  const int e = std::max(k - 1, f.emin);
  const double quantum = std::ldexp(1.0, e - f.mant_bits);
  std::fesetround(FE_TONEAREST);
  double r = std::nearbyint(a / quantum) * quantum;  // exact scaling by a power of two
  if (r > f.max) r = f.saturate ? f.max : std::numeric_limits<double>::infinity();
  return sign * r;
}

// Decoders from the bit fields (independent of mla/core's codecs).
inline double e4m3_value(uint8_t c) {
  const double s = (c & 0x80) ? -1.0 : 1.0;
  const int e = (c >> 3) & 0xF, m = c & 7;
  if (e == 0xF && m == 7) return std::numeric_limits<double>::quiet_NaN();
  if (e == 0) return s * std::ldexp(m, -9);
  return s * std::ldexp(8 + m, e - 10);
}
inline double bf16_value(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline double fp16_value(uint16_t h) {
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  if (e == 0x1F) return m ? std::numeric_limits<double>::quiet_NaN() : s * INFINITY;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

// An IEEE float operation computed in double then rounded once to float is the correctly rounded float
// result (53 >= 2 * 24 + 2), which is what the spec's "IEEE float division / product" means.
inline double float_div(double a, double b) { return static_cast<float>(a / b); }
inline double float_mul(double a, double b) { return static_cast<float>(a * b); }

// satfinite_rne(x / scale) in e4m3, as a value.
inline double e4m3_quant(double x, double scale) { return round_to(float_div(x, scale), kE4m3); }

// fp8_ds tile scale of a tile (finite values only), as stored.
inline float ds_scale(const std::vector<double>& tile) {
  double amax = 0;
  for (double v : tile)
    if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
  const float s = static_cast<float>(amax / 448.0);
  return s > 0 ? s : 1.0f;
}

// Same value and, for zeros, the same sign; NaN matches NaN.
inline bool same(double got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

}  // namespace mla::test::oracle

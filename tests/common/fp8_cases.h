#pragma once
// Inputs that exercise every corner of float -> e4m3: specials, the saturation edge, every e4m3 value and
// every midpoint between neighbours (exactly, and one float ulp either side), subnormals, float subnormals.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "mla/core/fp8.h"

namespace mla::test {

inline std::vector<float> e4m3_edge_inputs() {
  std::vector<float> v = {0.f,
                          -0.f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::signaling_NaN(),
                          bits_float(0x7F800001u),
                          bits_float(0xFFFFFFFFu),
                          448.f,
                          -448.f,
                          449.f,
                          464.f,
                          465.f,
                          480.f,
                          1e30f,
                          -1e30f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          0x1p-10f,
                          -0x1p-10f,
                          0x1p-9f,
                          0x1.8p-10f,
                          std::nextafter(0x1p-10f, 1.f),
                          0x1.fffffep-11f,
                          0x1p-6f,
                          0x1.ep-7f,
                          0x1.fp-7f};
  // Every finite e4m3 value, and the midpoints between it and its successor, exactly and +-1 float ulp.
  for (int s = 0; s < 2; ++s) {
    for (int c = 0; c < 0x7E; ++c) {
      const float a = e4m3_to_float(static_cast<uint8_t>(c));
      const float b = e4m3_to_float(static_cast<uint8_t>(c + 1));
      const float mid = 0.5f * (a + b);  // exact: a and b have few mantissa bits
      for (float x : {a, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f), b}) v.push_back(s ? -x : x);
    }
  }
  return v;
}

}  // namespace mla::test

#pragma once
// The online softmax's running max, per query row and KV page: one rule for the decode kernels and the CPU reference,
// which rounds P at the same points as the kernel (P's rounding depends on the max it is taken against).
//
// Exact (slack 0: bf16, fp16, fp8_ds): m_j = max(m_{j-1}, page max).
// Lazy (slack T > 0: fp8): the max moves only when a page's max exceeds it by more than T in log2 units of P, so every
// P = 2^((s - m) scale_log2) stays <= 2^T. The softmax is the same function; only the points where P rounds move.
// Why fp8: its 64-row kernel must finish P_{j-1} V_{j-1} and rescale O before adding P_j V_j whenever some row of its
// warpgroup's 64 moved its max, which with N(0, 1) scores is most of a segment's first hundred pages; with T = 8 almost
// only a segment's first page moves it (H200: -3.4..-4.5 % on the h_q 128 b32 / b128 rows, session 44). T = 8 keeps
// P <= 256 inside e4m3's 448, and more of P's values in e4m3's normal range. The 16-bit formats gained nothing (their
// 64-row kernel skips the rescale per warp, off the critical path), so their rounding points stay where they were.
// m_prev = -inf (no key seen yet in the segment) always takes the page max; a page max of -inf (every key masked)
// never moves m.
#include <cmath>

#include "mla/core/macros.h"

namespace mla {

inline constexpr float kDecodeFp8MaxSlackLog2 = 8.f;

// to_log2: converts a score difference to log2 units of P (the kernels' scale_log2 on raw scores; log2(e) on scores
// already multiplied by the softmax scale).
MLA_HD_INLINE float decode_running_max(float m_prev, float page_max, float to_log2, float slack_log2) {
  if (slack_log2 <= 0.f) return fmaxf(m_prev, page_max);
  // Both -inf gives NaN here, which compares false and keeps -inf.
  return (page_max - m_prev) * to_log2 > slack_log2 ? page_max : m_prev;
}

}  // namespace mla

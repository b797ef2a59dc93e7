#pragma once
// How far apart a row's pieces moved: the spread, in nats, of (kernel - reference) over the split lse values of one
// output row, counting only the pieces that weigh in its merge.
//
// Why: a split row's output is sum_k exp(lse_k - lse) o_k, so a piece whose lse is off by more than the row's other
// pieces swings the output toward or away from that piece's o_k, while an error the pieces share cancels in the merge
// (the final lse keeps it, and the lse check sees it there). The fp8 suite's lse check is relative (3e-2 of |lse|:
// ~10 nats at the ~336-nat logits of DeepSeek-like data), so it cannot see one piece off by ~1 nat; session 61's
// failure (row 1491 of fp8_b32_h32_sq2_causal_rand1_2048_s3_ds_ws3, a ~1.15-nat swing between two pieces) was such a
// case. The spread is the measure of that, free of the shared bias.
//
// Pieces whose reference weight exp(lse_k - max_k lse_k) is below min_weight are left out: their errors cannot move the
// output (row 1491's first piece sits 93 nats under the others). A counted piece whose kernel value is not finite
// makes the spread infinite.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace mla::test {

struct SplitLseSpread {
  double max_nats = 0;  // the largest spread over the rows with two or more counted pieces
  long row = -1;        // that row, as out's row index: b * rows_per_seq + (query row within the sequence)
  long rows = 0;        // rows with two or more counted pieces
};

// kernel, ref: split lse values, [max_splits][rows_per_seq] (the workspace's lse_accum layout), natural log;
// split_offsets: [batch + 1], sequence b's pieces are slots [split_offsets[b], split_offsets[b + 1]). Sequences of one
// piece are skipped (their slots are never written).
inline SplitLseSpread split_lse_spread(const std::vector<float>& kernel, const std::vector<float>& ref,
                                       const std::vector<int32_t>& split_offsets, int rows_per_seq,
                                       double min_weight = 1e-2) {
  SplitLseSpread r;
  const double log_min_weight = std::log(min_weight);
  for (size_t b = 0; b + 1 < split_offsets.size(); ++b) {
    const int first = split_offsets[b], n = split_offsets[b + 1] - first;
    if (n < 2) continue;
    for (int q = 0; q < rows_per_seq; ++q) {
      auto at = [&](int k) { return static_cast<size_t>(first + k) * rows_per_seq + q; };
      double top = -INFINITY;
      for (int k = 0; k < n; ++k)
        if (std::isfinite(ref[at(k)])) top = std::max(top, double(ref[at(k)]));
      if (!std::isfinite(top)) continue;  // a row that sees no key in any piece
      double lo = INFINITY, hi = -INFINITY;
      int counted = 0;
      for (int k = 0; k < n; ++k) {
        const double want = ref[at(k)];
        if (!std::isfinite(want) || want - top < log_min_weight) continue;
        const double got = kernel[at(k)];
        const double d = std::isfinite(got) ? got - want : std::numeric_limits<double>::infinity();
        lo = std::min(lo, d);
        hi = std::max(hi, d);
        ++counted;
      }
      if (counted < 2) continue;
      ++r.rows;
      const double spread = std::isfinite(hi) ? hi - lo : hi;
      if (spread > r.max_nats || r.row < 0) {
        r.max_nats = spread;
        r.row = static_cast<long>(b) * rows_per_seq + q;
      }
    }
  }
  return r;
}

}  // namespace mla::test

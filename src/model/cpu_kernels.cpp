#include "cpu_kernels.h"

#include <algorithm>
#include <cmath>

#include "mla/core/half.h"
#include "ops/ref/parallel_for.h"

namespace mla::model::cpu {

const float* weight_row(const TensorView& w, int64_t n, float* buf) {
  const int64_t k = w.shape[w.rank - 1];
  if (w.dtype == DType::kFp32) return w.ptr<const float>() + n * k;
  const uint16_t* r = w.ptr<const uint16_t>() + n * k;
  for (int64_t i = 0; i < k; ++i) buf[i] = bf16_to_float(r[i]);
  return buf;
}

float dot(const float* a, const float* b, int64_t n) {
  // Four partial sums: lets the compiler vectorize without -ffast-math reassociation.
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

void linear(const float* x, int64_t ldx, int64_t rows, const TensorView& w, float* out, int64_t ldo) {
  const int64_t n_out = w.shape[0], k = w.shape[1];
  constexpr int64_t kBlock = 64;  // output columns per task; each output is computed the same either way
  auto block = [&](int64_t b) {
    std::vector<float> buf(static_cast<size_t>(k));
    for (int64_t n = b * kBlock; n < std::min(n_out, (b + 1) * kBlock); ++n) {
      const float* wr = weight_row(w, n, buf.data());
      for (int64_t t = 0; t < rows; ++t) out[t * ldo + n] = dot(x + t * ldx, wr, k);
    }
  };
  const int64_t blocks = (n_out + kBlock - 1) / kBlock;
  // Threads cost tens of µs to start: only worth it past ~1M multiply-adds.
  if (rows * n_out * k < (int64_t{1} << 20)) {
    for (int64_t b = 0; b < blocks; ++b) block(b);
  } else {
    ref::parallel_for(blocks, block);
  }
}

void rmsnorm_row(const float* x, const TensorView& w, float eps, int64_t n, float* out) {
  float ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  std::vector<float> buf(static_cast<size_t>(n));
  const float* wr = weight_row(w, 0, buf.data());
  for (int64_t i = 0; i < n; ++i) out[i] = wr[i] * (x[i] * inv);
}

void mlp(const float* x, int64_t rows, int64_t hidden, const MlpWeights& w, float* out) {
  const int64_t inter = w.gate_proj.shape[0];
  std::vector<float> g(static_cast<size_t>(rows * inter)), u(g.size());
  linear(x, hidden, rows, w.gate_proj, g.data(), inter);
  linear(x, hidden, rows, w.up_proj, u.data(), inter);
  for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
  linear(g.data(), inter, rows, w.down_proj, out, hidden);
}

}  // namespace mla::model::cpu

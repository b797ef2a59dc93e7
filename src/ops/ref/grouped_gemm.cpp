// grouped_gemm: argument checks (shared with the CUDA launcher), the tile-height rule, and the host
// reference (float accumulation as the CPU backend's linear does it; one task per sorted row).
#include "mla/ops/grouped_gemm.h"

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "mla/core/env_knob.h"
#include "mla/core/half.h"
#include "mla/ops/model_ops_common.h"
#include "parallel_for.h"

namespace mla {
namespace {

constexpr const char* kOp = "grouped_gemm";

}  // namespace

Status grouped_gemm_block_m(int64_t n_rows, int64_t num_experts, int* block_m) {
  const int64_t avg = num_experts > 0 ? n_rows / num_experts : n_rows;
  const EnvKnob k = read_env_knob("MLA_MOE_BLOCK_M", {"16", "32", "64", "128", "legacy"});
  MLA_TRY(k.status);
  constexpr int kForced[] = {16, 32, 64, 128};
  if (k.index >= 0 && k.index < 4) *block_m = kForced[k.index];
  else if (k.index == 4) *block_m = avg <= 8 ? 16 : avg <= 48 ? 64 : 128;
  else *block_m = avg <= 8 ? 16 : avg <= 24 ? 32 : avg <= 48 ? 64 : 128;
  return Status::ok();
}

Status validate_grouped_gemm(const GroupedGemmParams& p) {
  if (p.w.rank != 3 || p.w.dtype != DType::kBf16 || !p.w.is_contiguous() || !p.w.data)
    return Status::invalid(kOp, "w: expected contiguous bf16[E, N, K], got " + p.w.str());
  const int64_t E = p.w.shape[0], N = p.w.shape[1], K = p.w.shape[2];
  const bool silu = p.epilogue == GroupedEpilogue::kSiluMul;
  if (E < 1 || N < 1 || K < 1 || K % 8 != 0 || N % (silu ? 16 : 8) != 0)
    return Status::invalid(kOp, "w " + p.w.str() + ": K % 8 == 0 and N % " + (silu ? "16" : "8") + " == 0 needed");
  MLA_TRY(model_ops::check_rows_view(kOp, "a", p.a, {DType::kBf16}, -1, K));
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16}, -1, silu ? N / 2 : N));
  const int64_t n_rows = p.out.shape[0];
  if (p.a_rows.defined()) {
    MLA_TRY(model_ops::check_array(kOp, "a_rows", p.a_rows, DType::kInt32, n_rows));
  } else if (p.a.shape[0] < n_rows) {
    return Status::invalid(kOp, "a " + p.a.str() + " has fewer rows than out " + p.out.str() + " (no a_rows)");
  }
  MLA_TRY(model_ops::check_array(kOp, "expert_offsets", p.expert_offsets, DType::kInt32, E + 1));
  if (p.block_m != 16 && p.block_m != 32 && p.block_m != 64 && p.block_m != 128)
    return Status::invalid(kOp, "block_m " + std::to_string(p.block_m) + " (16, 32, 64 or 128)");
  if (p.tiles.rank != 2 || p.tiles.shape[1] != 2)
    return Status::invalid(kOp, "tiles: expected int32[max_tiles, 2], got " + p.tiles.str());
  MLA_TRY(model_ops::check_array(kOp, "tiles", p.tiles, DType::kInt32, p.tiles.shape[0] * 2));
  return Status::ok();
}

namespace ref {

Status grouped_gemm(const GroupedGemmParams& p) {
  MLA_TRY(validate_grouped_gemm(p));
  const int64_t E = p.w.shape[0], N = p.w.shape[1], K = p.w.shape[2], n_rows = p.out.shape[0];
  const bool silu = p.epilogue == GroupedEpilogue::kSiluMul;
  const int32_t* off = p.expert_offsets.ptr<const int32_t>();
  bool off_ok = off[0] == 0 && off[E] <= n_rows;
  for (int64_t e = 0; e < E; ++e) off_ok &= off[e + 1] >= off[e];
  if (!off_ok)
    return Status::invalid(kOp, "expert_offsets are not non-decreasing from 0 to <= " + std::to_string(n_rows));
  const uint16_t* a = p.a.ptr<const uint16_t>();
  const uint16_t* w = p.w.ptr<const uint16_t>();
  uint16_t* out = p.out.ptr<uint16_t>();
  const int32_t* a_rows = p.a_rows.defined() ? p.a_rows.ptr<const int32_t>() : nullptr;
  parallel_for(off[E], [&](int64_t r) {
    int64_t e = 0;
    while (off[e + 1] <= r) ++e;
    const int64_t ar = a_rows ? a_rows[r] : r;
    std::vector<float> x(static_cast<size_t>(K), 0.f);  // a row index outside [0, m_a) reads zeros
    if (ar >= 0 && ar < p.a.shape[0])
      for (int64_t q = 0; q < K; ++q) x[size_t(q)] = bf16_to_float(a[ar * p.a.stride[0] + q]);
    std::vector<float> wf(static_cast<size_t>(K));
    // Four partial sums (q mod 4), then (s0 + s1) + (s2 + s3): the CPU backend's dot, so the CPU tests can
    // compare with its linear exactly; and it vectorizes, which the GPU tests' large cases need.
    auto dot = [&](int64_t j) {
      const uint16_t* wr = w + (e * N + j) * K;
      for (int64_t q = 0; q < K; ++q) wf[size_t(q)] = bf16_to_float(wr[q]);
      float s[4] = {0, 0, 0, 0};
      int64_t q = 0;
      for (; q + 4 <= K; q += 4)
        for (int u = 0; u < 4; ++u) s[u] += x[size_t(q + u)] * wf[size_t(q + u)];
      for (; q < K; ++q) s[0] += x[size_t(q)] * wf[size_t(q)];
      return (s[0] + s[1]) + (s[2] + s[3]);
    };
    uint16_t* o = out + r * p.out.stride[0];
    if (!silu) {
      for (int64_t j = 0; j < N; ++j) o[j] = float_to_bf16(dot(j));
      return;
    }
    for (int64_t j = 0; j < N / 2; ++j) {
      const float g = round_bf16(dot(j)), u = round_bf16(dot(N / 2 + j));
      o[j] = float_to_bf16(g / (1.0f + std::exp(-g)) * u);
    }
  });
  return Status::ok();
}

}  // namespace ref
}  // namespace mla

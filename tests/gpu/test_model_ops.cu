// The model's small CUDA ops and the cuBLASLt GEMM against the CPU backend's math (src/model/cpu_kernels.h,
// model::apply_rope_interleaved) on the same bf16-rounded inputs: embedding, rmsnorm, add_rmsnorm, rope_mla,
// silu_mul, gather/scatter rows, moe_routing, moe_align, moe_combine, dense, head-batched and grouped (MoE)
// GEMMs (moe_align and grouped_gemm against their references in src/ops/ref). Fresh random data
// per run, NaN-poisoned outputs (every element must be written, untouched columns must keep their values),
// guard regions around every buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <string>
#include <vector>

#include "harness/registry.h"
#include "mla/model/config.h"
#include "mla/model/rope.h"
#include "mla/ops/embedding.h"
#include "mla/ops/gather_rows.h"
#include "mla/ops/grouped_gemm.h"
#include "mla/ops/moe_align.h"
#include "mla/ops/moe_combine.h"
#include "mla/ops/moe_routing.h"
#include "mla/ops/prefill_attention.h"
#include "mla/ops/rmsnorm.h"
#include "mla/ops/rope_mla.h"
#include "mla/ops/silu_mul.h"
#include "model/cpu_kernels.h"
#include "model/cuda/gemm.h"
#include "model/cuda/small_m_gemm.h"
#include "model_test_data.h"

namespace mla::test {
namespace {

// Copies and gathers move bits.
constexpr Tolerance kExact{0.0, 0.0, "a copy: any differing bit is a bug"};
// Float arithmetic then one rounding to bf16 (relative error <= 2^-9 per element, so rel_l2 <= ~2e-3 plus
// float reordering noise ~1e-6, which can move a value across a rounding boundary: one bf16 ulp, 2^-8);
// the data is scaled so |out| < ~20, hence max_abs <= 20 · 2^-8 ≈ 0.08.
constexpr Tolerance kBf16Out{3e-3, 8e-2, "one bf16 rounding of a float result (<= 1 ulp = 2^-8 relative), |out| < ~20"};
// fp32 results of the same float math in another order: a few ulps of the largest partial sums.
constexpr Tolerance kFp32Out{2e-5, 2e-4, "float arithmetic in another order (accumulation over k <= 2048)"};
// Routing weights, compared in units of routed_scaling_factor (the softmax probabilities, <= 1): the GPU's expf
// differs from the host's by an ulp or two and the sum over the experts runs in another order, a few float ulps of a
// value <= 1. Measured on the H200 (session 40, 30 seeds x 4 cases): at most 6.6e-7 (E160, scale 16). The weights
// themselves reach 16 there, where 1e-5 is ~10 ulps: the absolute limit on unscaled weights failed 1 seed in 10.
constexpr Tolerance kRouting{1e-5, 1e-5,
                             "softmax with the device expf vs the host's, in units of the scale; ids exact"};

TensorView host_bf16_view(const HostArray& a, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(a.raw.data(), DType::kBf16, shape);
}

// ---------------------------------------------------------------------------------------------------
// embedding

Status run_embedding(int64_t vocab, int64_t H, int64_t t, DType out_dt, int64_t ld, CaseReport* rep) {
  auto rng = case_rng("embedding" + std::to_string(H) + std::to_string(ld));
  const HostArray table = HostArray::randn(DType::kBf16, rng, size_t(vocab * H));
  std::vector<int32_t> ids(static_cast<size_t>(t));
  for (auto& i : ids) i = int32_t(rng() % uint64_t(vocab));
  ids[0] = int32_t(vocab - 1);
  DeviceBuffer d_table, d_ids, d_out;
  MLA_TRY(to_device(table, &d_table));
  MLA_TRY(to_device(ids, &d_ids));
  MLA_TRY(d_out.alloc(size_t(t * ld) * dtype_size(out_dt)));
  const EmbeddingParams p{.table = view2d(d_table, DType::kBf16, vocab, H),
                          .token_ids = TensorView::contiguous(d_ids.data(), DType::kInt32, {t}),
                          .out = view2d(d_out, out_dt, t, H, ld)};
  MLA_TRY(cuda::embedding(p, nullptr));
  std::vector<float> got;
  MLA_TRY(from_device(d_out, out_dt, size_t(t * ld), &got));
  std::vector<float> want(static_cast<size_t>(t * ld), std::nanf(""));  // columns past H keep the poison
  for (int64_t i = 0; i < t; ++i)
    std::copy_n(&table.f[size_t(ids[i] * H)], H, &want[size_t(i * ld)]);
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// rmsnorm / add_rmsnorm

Status run_rmsnorm(int64_t t, int64_t n, int64_t ld, DType x_dt, bool in_place, CaseReport* rep) {
  auto rng = case_rng("rmsnorm" + std::to_string(n) + std::to_string(ld) + std::to_string(in_place));
  const HostArray x = HostArray::randn(x_dt, rng, size_t(t * ld), 1.5f);
  const HostArray w = HostArray::randn(DType::kBf16, rng, size_t(n), 0.2f, 1.f);
  const float eps = 1e-6f;
  DeviceBuffer d_x, d_w, d_out;
  MLA_TRY(to_device(x, &d_x));
  MLA_TRY(to_device(w, &d_w));
  if (!in_place) MLA_TRY(d_out.alloc(size_t(t * ld) * 2));
  const TensorView xv = view2d(d_x, x_dt, t, n, ld);
  const RmsNormParams p{.x = xv,
                        .w = TensorView::contiguous(d_w.data(), DType::kBf16, {n}),
                        .out = in_place ? xv : view2d(d_out, DType::kBf16, t, n, ld),
                        .eps = eps};
  MLA_TRY(cuda::rmsnorm(p, nullptr));
  std::vector<float> got;
  MLA_TRY(from_device(in_place ? d_x : d_out, DType::kBf16, size_t(t * ld), &got));
  // Columns past n: untouched (the input's values in place, the poison otherwise).
  std::vector<float> want = in_place ? x.f : std::vector<float>(size_t(t * ld), std::nanf(""));
  for (int64_t i = 0; i < t; ++i)
    model::cpu::rmsnorm_row(&x.f[size_t(i * ld)], host_bf16_view(w, {n}), eps, n, &want[size_t(i * ld)]);
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_x.check_guards("x"));
  if (!in_place) MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

Status run_add_rmsnorm(int64_t t, int64_t n, DType res_dt, CaseReport* rep) {
  auto rng = case_rng("add_rmsnorm" + std::to_string(n) + std::string(dtype_name(res_dt)));
  const HostArray res = HostArray::randn(res_dt, rng, size_t(t * n), 3.f);
  const HostArray x = HostArray::randn(DType::kBf16, rng, size_t(t * n), 0.5f);
  const HostArray w = HostArray::randn(DType::kBf16, rng, size_t(n), 0.2f, 1.f);
  const float eps = 1e-6f;
  DeviceBuffer d_res, d_x, d_w, d_out;
  MLA_TRY(to_device(res, &d_res));
  MLA_TRY(to_device(x, &d_x));
  MLA_TRY(to_device(w, &d_w));
  MLA_TRY(d_out.alloc(size_t(t * n) * 2));
  const AddRmsNormParams p{.x = view2d(d_x, DType::kBf16, t, n),
                           .residual = view2d(d_res, res_dt, t, n),
                           .w = TensorView::contiguous(d_w.data(), DType::kBf16, {n}),
                           .out = view2d(d_out, DType::kBf16, t, n),
                           .eps = eps};
  MLA_TRY(cuda::add_rmsnorm(p, nullptr));
  std::vector<float> got_out, got_res;
  MLA_TRY(from_device(d_out, DType::kBf16, size_t(t * n), &got_out));
  MLA_TRY(from_device(d_res, res_dt, size_t(t * n), &got_res));
  std::vector<float> want_res(static_cast<size_t>(t * n)), want_out(static_cast<size_t>(t * n));
  for (size_t i = 0; i < want_res.size(); ++i) {
    want_res[i] = res.f[i] + x.f[i];  // the same float addition the CPU backend does
    if (res_dt == DType::kBf16) want_res[i] = round_bf16(want_res[i]);
  }
  for (int64_t i = 0; i < t; ++i)
    model::cpu::rmsnorm_row(&want_res[size_t(i * n)], host_bf16_view(w, {n}), eps, n, &want_out[size_t(i * n)]);
  // The residual update is one float addition (and one bf16 rounding for a bf16 residual): exact.
  rep->add("residual", compare_f(got_res, want_res));
  rep->add("out", compare_f(got_out, want_out));
  MLA_TRY(d_res.check_guards("residual"));
  MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// rope_mla

Status run_rope(const char* preset, int64_t t, int max_pos, CaseReport* rep) {
  model::ModelConfig c;
  MLA_TRY(model::preset_config(preset, &c));
  const model::RopeTable rt = model::make_rope_table(c);
  const int64_t h = c.num_attention_heads, dq = c.qk_head_dim(), D = c.latent_dim();
  auto rng = case_rng(std::string("rope") + preset);
  const HostArray q = HostArray::randn(DType::kBf16, rng, size_t(t * h * dq));
  const int64_t ld_lat = D + 64;  // a strided latent view, as the model's column slices are
  const HostArray lat = HostArray::randn(DType::kBf16, rng, size_t(t * ld_lat));
  std::vector<int32_t> pos(static_cast<size_t>(t));
  for (auto& p : pos) p = int32_t(rng() % uint64_t(max_pos));
  pos[0] = 0;
  pos[size_t(t - 1)] = max_pos - 1;
  DeviceBuffer d_q, d_lat, d_pos, d_freq;
  MLA_TRY(to_device(q, &d_q));
  MLA_TRY(to_device(lat, &d_lat));
  MLA_TRY(to_device(pos, &d_pos));
  MLA_TRY(to_device(rt.inv_freq, &d_freq));
  const RopeMlaParams p{.q = view2d(d_q, DType::kBf16, t, h * dq),
                        .latent = view2d(d_lat, DType::kBf16, t, D, ld_lat),
                        .positions = TensorView::contiguous(d_pos.data(), DType::kInt32, {t}),
                        .inv_freq = TensorView::contiguous(d_freq.data(), DType::kFp32, {int64_t(rt.inv_freq.size())}),
                        .num_heads = int(h),
                        .qk_nope_dim = int(c.qk_nope_head_dim),
                        .attention_factor = rt.attention_factor};
  MLA_TRY(cuda::rope_mla(p, nullptr));
  std::vector<float> got_q, got_lat;
  MLA_TRY(from_device(d_q, DType::kBf16, q.f.size(), &got_q));
  MLA_TRY(from_device(d_lat, DType::kBf16, lat.f.size(), &got_lat));
  std::vector<float> want_q = q.f, want_lat = lat.f;  // everything but the rotary parts stays as it was
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t j = 0; j < h; ++j)
      model::apply_rope_interleaved(&want_q[size_t(i * h * dq + j * dq + c.qk_nope_head_dim)], pos[size_t(i)], rt);
    model::apply_rope_interleaved(&want_lat[size_t(i * ld_lat + c.kv_lora_rank)], pos[size_t(i)], rt);
  }
  rep->add("q", compare_f(got_q, want_q));
  rep->add("latent", compare_f(got_lat, want_lat));
  MLA_TRY(d_q.check_guards("q"));
  MLA_TRY(d_lat.check_guards("latent"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// silu_mul

Status run_silu_mul(int64_t t, int64_t n, bool alias, CaseReport* rep) {
  auto rng = case_rng("silu_mul" + std::to_string(n) + std::to_string(alias));
  const HostArray g = HostArray::randn(DType::kBf16, rng, size_t(t * n), 1.5f);
  const HostArray u = HostArray::randn(DType::kBf16, rng, size_t(t * n), 1.f);
  DeviceBuffer d_g, d_u, d_out;
  MLA_TRY(to_device(g, &d_g));
  MLA_TRY(to_device(u, &d_u));
  if (!alias) MLA_TRY(d_out.alloc(size_t(t * n) * 2));
  const SiluMulParams p{.gate = view2d(d_g, DType::kBf16, t, n),
                        .up = view2d(d_u, DType::kBf16, t, n),
                        .out = view2d(alias ? d_g : d_out, DType::kBf16, t, n)};
  MLA_TRY(cuda::silu_mul(p, nullptr));
  std::vector<float> got, want(g.f.size());
  MLA_TRY(from_device(alias ? d_g : d_out, DType::kBf16, want.size(), &got));
  for (size_t i = 0; i < want.size(); ++i) want[i] = model::cpu::silu(g.f[i]) * u.f[i];
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_g.check_guards("gate"));
  if (!alias) MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// gather_rows / scatter_rows

Status run_row_copy(bool scatter, DType dt, int64_t m, int64_t n, int64_t cols, CaseReport* rep) {
  auto rng = case_rng(std::string("rows") + (scatter ? "s" : "g") + std::string(dtype_name(dt)));
  std::vector<int32_t> rows(static_cast<size_t>(n));
  if (scatter) {  // distinct targets
    std::vector<int32_t> all(static_cast<size_t>(m));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    std::copy_n(all.begin(), n, rows.begin());
  } else {
    for (auto& r : rows) r = int32_t(rng() % uint64_t(m));  // repeats allowed
  }
  const int64_t x_rows = scatter ? n : m, out_rows = scatter ? m : n;
  const HostArray x = HostArray::randn(dt, rng, size_t(x_rows * cols));
  DeviceBuffer d_x, d_rows, d_out;
  MLA_TRY(to_device(x, &d_x));
  MLA_TRY(to_device(rows, &d_rows));
  MLA_TRY(d_out.alloc(size_t(out_rows * cols) * dtype_size(dt)));
  const RowCopyParams p{.x = view2d(d_x, dt, x_rows, cols),
                        .rows = TensorView::contiguous(d_rows.data(), DType::kInt32, {n}),
                        .out = view2d(d_out, dt, out_rows, cols)};
  MLA_TRY(scatter ? cuda::scatter_rows(p, nullptr) : cuda::gather_rows(p, nullptr));
  std::vector<float> got, want(size_t(out_rows * cols), std::nanf(""));  // rows not scattered to keep the poison
  MLA_TRY(from_device(d_out, dt, want.size(), &got));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = scatter ? i : rows[size_t(i)], dst = scatter ? rows[size_t(i)] : i;
    std::copy_n(&x.f[size_t(src * cols)], cols, &want[size_t(dst * cols)]);
  }
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// moe_routing

struct RoutingSpec {
  int E, k;
  bool grouped;
  int n_group, topk_group;
  bool norm;
  float scale;
};

// Smallest relative gap between consecutive entries of the first `n` of `v` sorted descending, where a
// tie would let two correct implementations pick differently.
double min_gap(std::vector<double> v, size_t n) {
  std::sort(v.begin(), v.end(), std::greater<>());
  double g = 1e30;
  for (size_t i = 0; i + 1 < std::min(n, v.size()); ++i) g = std::min(g, (v[i] - v[i + 1]) / std::max(v[i], 1e-30));
  return g;
}

Status run_routing(const RoutingSpec& s, int64_t t, CaseReport* rep) {
  auto rng = case_rng("routing" + std::to_string(s.E) + std::to_string(s.k) + std::to_string(s.grouped));
  model::ModelConfig c;
  c.n_routed_experts = s.E;
  c.num_experts_per_tok = s.k;
  c.topk_method = s.grouped ? model::TopkMethod::kGroupLimitedGreedy : model::TopkMethod::kGreedy;
  c.n_group = s.n_group;
  c.topk_group = s.topk_group;
  c.norm_topk_prob = s.norm;
  c.routed_scaling_factor = s.scale;
  const int64_t ld = s.E + 8;  // strided rows, as a GEMM output with padding might be
  const HostArray logits = HostArray::randn(DType::kFp32, rng, size_t(t * ld), 2.f);
  DeviceBuffer d_logits, d_ids, d_w;
  MLA_TRY(to_device(logits, &d_logits));
  MLA_TRY(d_ids.alloc(size_t(t * s.k) * 4));
  MLA_TRY(d_w.alloc(size_t(t * s.k) * 4));
  MoeRoutingParams p{.logits = view2d(d_logits, DType::kFp32, t, s.E, ld),
                     .topk_ids = TensorView::contiguous(d_ids.data(), DType::kInt32, {t, s.k}),
                     .topk_weights = TensorView::contiguous(d_w.data(), DType::kFp32, {t, s.k})};
  p.group_limited = s.grouped, p.n_group = s.n_group, p.topk_group = s.topk_group;
  p.norm_topk_prob = s.norm, p.routed_scaling_factor = s.scale;
  MLA_TRY(cuda::moe_routing(p, nullptr));
  std::vector<float> got_ids, got_w;
  MLA_TRY(from_device(d_ids, DType::kInt32, size_t(t * s.k), &got_ids));
  MLA_TRY(from_device(d_w, DType::kFp32, size_t(t * s.k), &got_w));
  std::vector<float> want_ids, want_w, cmp_ids, cmp_wg, cmp_ww;
  size_t skipped = 0;
  for (int64_t i = 0; i < t; ++i) {
    const float* l = &logits.f[size_t(i * ld)];
    std::vector<int> ex(static_cast<size_t>(s.k));
    std::vector<float> wt(static_cast<size_t>(s.k));
    model::cpu::route(l, c, ex.data(), wt.data());
    // Near-ties (in float64 softmax) among the decisions the rule takes: skip such tokens, count them.
    std::vector<double> sm(static_cast<size_t>(s.E));
    double mx = *std::max_element(l, l + s.E), sum = 0;
    for (int e = 0; e < s.E; ++e) sum += sm[size_t(e)] = std::exp(double(l[e]) - mx);
    for (auto& v : sm) v /= sum;
    double gap = min_gap(sm, size_t(s.k + 1));
    if (s.grouped) {
      const int per = s.E / s.n_group;
      std::vector<double> best(size_t(s.n_group), 0);
      for (int e = 0; e < s.E; ++e) best[size_t(e / per)] = std::max(best[size_t(e / per)], sm[size_t(e)]);
      gap = std::min(gap, min_gap(best, size_t(s.topk_group + 1)));
      std::vector<double> kept;
      std::vector<size_t> order(best.size());
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return best[a] > best[b]; });
      for (int g = 0; g < s.topk_group; ++g)
        for (int e = 0; e < per; ++e) kept.push_back(sm[order[size_t(g)] * size_t(per) + size_t(e)]);
      gap = std::min(gap, min_gap(kept, size_t(s.k + 1)));
    }
    if (gap < 1e-5) {
      ++skipped;
      continue;
    }
    for (int j = 0; j < s.k; ++j) {
      cmp_ids.push_back(got_ids[size_t(i * s.k + j)]);
      want_ids.push_back(float(ex[size_t(j)]));
      cmp_ww.push_back(got_w[size_t(i * s.k + j)] / s.scale);
      want_w.push_back(wt[size_t(j)] / s.scale);
    }
  }
  if (skipped * 10 > size_t(t)) return Status::internal("moe_routing test", "too many near-tie tokens skipped");
  rep->add("ids", compare_f(cmp_ids, want_ids));
  rep->add("weights/scale", compare_f(cmp_ww, want_w));
  rep->note = std::to_string(skipped) + " of " + std::to_string(t) + " tokens skipped as near-ties (gap < 1e-5)";
  MLA_TRY(d_ids.check_guards("ids"));
  MLA_TRY(d_w.check_guards("weights"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// moe_combine

Status run_combine(int64_t t, int64_t k, int64_t H, bool shared, CaseReport* rep) {
  auto rng = case_rng("combine" + std::to_string(H) + std::to_string(shared));
  const int64_t n = t * k;
  const HostArray y = HostArray::randn(DType::kBf16, rng, size_t(n * H));
  const HostArray sh = HostArray::randn(DType::kBf16, rng, size_t(t * H));
  std::vector<int32_t> src(static_cast<size_t>(n));
  std::iota(src.begin(), src.end(), 0);
  std::shuffle(src.begin(), src.end(), rng);
  std::vector<float> w(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (auto& x : w) x = u(rng);
  DeviceBuffer d_y, d_src, d_w, d_sh, d_out;
  MLA_TRY(to_device(y, &d_y));
  MLA_TRY(to_device(src, &d_src));
  MLA_TRY(to_device(w, &d_w));
  MLA_TRY(to_device(sh, &d_sh));
  MLA_TRY(d_out.alloc(size_t(t * H) * 2));
  const MoeCombineParams p{.expert_out = view2d(d_y, DType::kBf16, n, H),
                           .src_rows = TensorView::contiguous(d_src.data(), DType::kInt32, {t, k}),
                           .topk_weights = TensorView::contiguous(d_w.data(), DType::kFp32, {t, k}),
                           .shared = shared ? view2d(d_sh, DType::kBf16, t, H) : TensorView{},
                           .out = view2d(d_out, DType::kBf16, t, H)};
  MLA_TRY(cuda::moe_combine(p, nullptr));
  std::vector<float> got, want(static_cast<size_t>(t * H));
  MLA_TRY(from_device(d_out, DType::kBf16, want.size(), &got));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t d = 0; d < H; ++d) {
      float acc = shared ? sh.f[size_t(i * H + d)] : 0.f;
      for (int64_t j = 0; j < k; ++j) acc += w[size_t(i * k + j)] * y.f[size_t(src[size_t(i * k + j)] * H + d)];
      want[size_t(i * H + d)] = acc;
    }
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// GEMM (cuBLASLt): nn.Linear layout, and the head-batched strided products of weight absorption.

struct GemmSpec {
  int64_t m, n, k;
  int batch;
  bool b_is_nk;
  DType c_dt;
  int64_t lda_pad, ldc_pad;  // extra row stride, as in column-sliced activations
};

Status run_gemm(const GemmSpec& s, CaseReport* rep) {
  auto rng = case_rng("gemm" + std::to_string(s.m) + "_" + std::to_string(s.n) + "_" + std::to_string(s.k) + "_" +
                      std::to_string(s.batch));
  // Interleaved batches, as per-head slices of one activation row: A[b] at column b·(k + lda_pad).
  const int64_t sa = s.k + s.lda_pad, lda = sa * s.batch;
  const int64_t sc = s.n + s.ldc_pad, ldc = sc * s.batch;
  const int64_t sb = s.n * s.k;  // weights back to back
  const HostArray a = HostArray::randn(DType::kBf16, rng, size_t(s.m * lda));
  const HostArray b = HostArray::randn(DType::kBf16, rng, size_t(sb * s.batch), 1.f / std::sqrt(float(s.k)));
  DeviceBuffer d_a, d_b, d_c, d_ws;
  MLA_TRY(to_device(a, &d_a));
  MLA_TRY(to_device(b, &d_b));
  MLA_TRY(d_c.alloc(size_t(s.m * ldc) * dtype_size(s.c_dt)));
  MLA_TRY(d_ws.alloc(size_t(32) << 20));
  model::cuda_backend::Gemm gemm;
  model::cuda_backend::GemmTuneOptions tune;
  tune.enabled = true;  // m <= 256: the tuner's pick is the algorithm checked here (no flush: warm timing)
  MLA_TRY(gemm.init(d_ws.data(), d_ws.bytes(), tune));
  model::cuda_backend::GemmArgs g;
  g.a = d_a.data(), g.lda = lda, g.stride_a = sa;
  g.b = d_b.data(), g.ldb = s.b_is_nk ? s.k : s.n, g.stride_b = sb, g.b_is_nk = s.b_is_nk;
  g.c = d_c.data(), g.ldc = ldc, g.stride_c = sc, g.c_dtype = s.c_dt;
  g.m = s.m, g.n = s.n, g.k = s.k, g.batch = s.batch;
  MLA_TRY(gemm.run("gemm test", g, nullptr));
  std::vector<float> got;
  MLA_TRY(from_device(d_c, s.c_dt, size_t(s.m * ldc), &got));
  std::vector<float> want(static_cast<size_t>(s.m * ldc), std::nanf(""));  // padding columns keep the poison
  for (int bi = 0; bi < s.batch; ++bi) {
    // The CPU backend's linear over [n, k] weight rows (a [k, n] operand is transposed into that first).
    std::vector<uint16_t> wnk(static_cast<size_t>(sb));
    for (int64_t r = 0; r < s.n; ++r)
      for (int64_t q = 0; q < s.k; ++q) {
        const size_t src = s.b_is_nk ? size_t(r * s.k + q) : size_t(q * s.n + r);
        std::memcpy(&wnk[size_t(r * s.k + q)], &b.raw[(size_t(bi * sb) + src) * 2], 2);
      }
    const TensorView wv = TensorView::contiguous(wnk.data(), DType::kBf16, {s.n, s.k});
    std::vector<float> out(static_cast<size_t>(s.m * s.n));
    model::cpu::linear(&a.f[size_t(bi * sa)], lda, s.m, wv, out.data(), s.n);
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        float v = out[size_t(i * s.n + j)];
        if (s.c_dt == DType::kBf16) v = round_bf16(v);
        want[size_t(i * ldc + bi * sc + j)] = v;
      }
  }
  rep->add("c", compare_f(got, want));
  MLA_TRY(d_c.check_guards("c"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// small_m_linear: a dense product of t <= 256 rows on the grouped kernel through the precomputed one-expert
// tables (model/cuda/small_m_gemm.h), with either epilogue, against the CPU backend's linear.

Status run_small_m(int64_t t, int64_t n, int64_t k, bool silu, int64_t x_pad, int64_t out_pad, CaseReport* rep,
                   int block_m = 0) {
  auto rng = case_rng("small_m" + std::to_string(t) + "_" + std::to_string(n) + "_" + std::to_string(silu));
  const int64_t wn = silu ? 2 * n : n, ldx = k + x_pad, ldo = n + out_pad;
  const HostArray x = HostArray::randn(DType::kBf16, rng, size_t(t * ldx));
  const HostArray w = HostArray::randn(DType::kBf16, rng, size_t(wn * k), 1.f / std::sqrt(float(k)));
  DeviceBuffer d_x, d_w, d_out, d_tab;
  MLA_TRY(to_device(x, &d_x));
  MLA_TRY(to_device(w, &d_w));
  MLA_TRY(d_out.alloc(size_t(t * ldo) * 2));
  MLA_TRY(d_tab.alloc(size_t(model::cuda_backend::small_m_table_bytes(model::cuda_backend::kSmallMMaxRows))));
  model::cuda_backend::SmallMTables tab;
  MLA_TRY(
      model::cuda_backend::init_small_m_tables(model::cuda_backend::kSmallMMaxRows, d_tab.data(), nullptr, 0, &tab));
  TensorView xv = TensorView::contiguous(d_x.data(), DType::kBf16, {t, k});
  xv.stride[0] = ldx;
  TensorView ov = TensorView::contiguous(d_out.data(), DType::kBf16, {t, n});
  ov.stride[0] = ldo;
  const TensorView wv = TensorView::contiguous(d_w.data(), DType::kBf16, {wn, k});
  MLA_TRY(model::cuda_backend::small_m_linear(tab, xv, wv, silu ? GroupedEpilogue::kSiluMul : GroupedEpilogue::kStore,
                                              ov, nullptr, block_m));
  std::vector<float> got;
  MLA_TRY(from_device(d_out, DType::kBf16, size_t(t * ldo), &got));
  std::vector<float> y(size_t(t * wn));
  model::cpu::linear(x.f.data(), ldx, t,
                     TensorView::contiguous(const_cast<uint8_t*>(w.raw.data()), DType::kBf16, {wn, k}), y.data(), wn);
  std::vector<float> want(size_t(t * ldo), std::nanf(""));  // padding columns keep the device's poison
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const float g = round_bf16(y[size_t(i * wn + j)]);
      want[size_t(i * ldo + j)] =
          silu ? round_bf16(model::cpu::silu(g) * round_bf16(y[size_t(i * wn + n + j)])) : g;
    }
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_out.check_guards("out"));
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------------
// moe_align and grouped_gemm

// k distinct experts per token, uniformly.
std::vector<int32_t> random_topk(int64_t t, int64_t k, int64_t E, std::mt19937_64& rng) {
  std::vector<int32_t> ids, all(static_cast<size_t>(E));
  for (int64_t i = 0; i < t; ++i) {
    std::iota(all.begin(), all.end(), 0);
    for (int64_t j = 0; j < k; ++j) {
      std::swap(all[size_t(j)], all[size_t(j + int64_t(rng() % uint64_t(E - j)))]);
      ids.push_back(all[size_t(j)]);
    }
  }
  return ids;
}

// k = 1: expert e gets exactly counts[e] tokens, the tokens in random order (so the sort moves them).
std::vector<int32_t> ids_from_counts(const std::vector<int>& counts, std::mt19937_64& rng) {
  std::vector<int32_t> ids;
  for (size_t e = 0; e < counts.size(); ++e) ids.insert(ids.end(), size_t(counts[e]), int32_t(e));
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

struct AlignHost {
  std::vector<int32_t> offsets, perm, src, tiles, error;
};

MoeAlignParams align_params(const int32_t* ids, int64_t t, int64_t k, int E, int bm, void* off, void* perm, void* src,
                            void* tiles, void* err) {
  const int64_t n = t * k;
  return {.topk_ids = TensorView::contiguous(ids, DType::kInt32, {t, k}),
          .num_experts = E,
          .block_m = bm,
          .expert_offsets = TensorView::contiguous(off, DType::kInt32, {E + 1}),
          .perm = TensorView::contiguous(perm, DType::kInt32, {n}),
          .src = TensorView::contiguous(src, DType::kInt32, {t, k}),
          .tiles = TensorView::contiguous(tiles, DType::kInt32, {moe_align_max_tiles(n, E, bm), 2}),
          .error = TensorView::contiguous(err, DType::kInt32, {1})};
}

Status host_align(const std::vector<int32_t>& ids, int64_t t, int64_t k, int E, int bm, AlignHost* h) {
  const int64_t n = t * k;
  h->offsets.assign(size_t(E + 1), 0x5A5A5A5A), h->perm.assign(size_t(n), 0x5A5A5A5A);
  h->src.assign(size_t(n), 0x5A5A5A5A), h->tiles.assign(size_t(2 * moe_align_max_tiles(n, E, bm)), 0x5A5A5A5A);
  h->error.assign(1, 0);
  return ref::moe_align(align_params(ids.data(), t, k, E, bm, h->offsets.data(), h->perm.data(), h->src.data(),
                                     h->tiles.data(), h->error.data()));
}

std::vector<float> as_float(const std::vector<int32_t>& v) { return std::vector<float>(v.begin(), v.end()); }

// ids: [t, k]; `corrupt` plants out-of-range ids and repeats within a token (the error path).
Status run_moe_align(int64_t t, int64_t k, int E, int bm, int skew, bool corrupt, CaseReport* rep) {
  auto rng = case_rng("moe_align" + std::to_string(t) + "_" + std::to_string(E) + std::to_string(skew) +
                      std::to_string(corrupt));
  std::vector<int32_t> ids = random_topk(t, k, E, rng);
  if (skew > 0)  // every token on the same k experts (rotated per token: the order within a token differs)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < k; ++j) ids[size_t(i * k + j)] = int32_t((j + i) % k) * skew % E;
  if (corrupt)
    for (int64_t i = 0; i < t; i += 7) {
      ids[size_t(i * k + int64_t(rng() % uint64_t(k)))] = (i / 7) % 3 == 0 ? E : (i / 7) % 3 == 1 ? -5 : 1 << 30;
      if (k > 1 && i % 2 == 0) ids[size_t(i * k + k - 1)] = ids[size_t(i * k)];  // a repeat
    }
  AlignHost h;
  MLA_TRY(host_align(ids, t, k, E, bm, &h));
  if (corrupt != (h.error[0] == 1)) return Status::internal("moe_align test", "reference error flag wrong");
  const int64_t n = t * k, max_tiles = moe_align_max_tiles(n, E, bm);
  DeviceBuffer d_ids, d_off, d_perm, d_src, d_tiles, d_err;
  MLA_TRY(to_device(ids, &d_ids));
  for (auto [b, bytes] : {std::pair{&d_off, size_t(E + 1) * 4}, {&d_perm, size_t(n) * 4}, {&d_src, size_t(n) * 4},
                          {&d_tiles, size_t(max_tiles) * 8}}) {
    MLA_TRY(b->alloc(bytes));
    MLA_TRY(b->fill(0x5A));  // not 0xFF: -1 is a value the op writes
  }
  MLA_TRY(d_err.alloc(4));
  MLA_TRY(d_err.fill(0));
  MLA_TRY(cuda::moe_align(align_params(d_ids.as<int32_t>(), t, k, E, bm, d_off.data(), d_perm.data(), d_src.data(),
                                       d_tiles.data(), d_err.data()), nullptr));
  std::vector<float> got;
  for (auto [name, d, want] : {std::tuple{"offsets", &d_off, &h.offsets}, {"perm", &d_perm, &h.perm},
                               {"src", &d_src, &h.src}, {"tiles", &d_tiles, &h.tiles}, {"error", &d_err, &h.error}}) {
    MLA_TRY(from_device(*d, DType::kInt32, want->size(), &got));
    rep->add(name, compare_f(got, as_float(*want)));
    MLA_TRY(d->check_guards(name));
  }
  int64_t used = 0;
  while (used < max_tiles && h.tiles[size_t(2 * used)] >= 0) ++used;
  rep->note = std::to_string(h.offsets[size_t(E)]) + " valid rows, " + std::to_string(used) + " of " +
              std::to_string(max_tiles) + " tiles";
  return Status::ok();
}

struct GroupedSpec {
  int64_t E, N, K;
  GroupedEpilogue epi;
  int bm;
  bool gather;               // A rows through a_rows (the activations [t, K]) instead of sorted rows [n, K]
  int64_t lda_pad, ldo_pad;  // extra row stride
};

Status run_grouped(const GroupedSpec& s, int64_t t, int64_t k, const std::vector<int32_t>& ids, CaseReport* rep) {
  auto rng = case_rng("grouped" + std::to_string(s.N) + "_" + std::to_string(s.K) + "_" + std::to_string(s.bm) + "_" +
                      std::to_string(t) + std::to_string(int(s.epi)));
  const int64_t n = t * k, E = s.E;
  AlignHost h;
  MLA_TRY(host_align(ids, t, k, int(E), s.bm, &h));
  const bool silu = s.epi == GroupedEpilogue::kSiluMul;
  const int64_t n_out = silu ? s.N / 2 : s.N, m_a = s.gather ? t : n;
  const int64_t lda = s.K + s.lda_pad, ldo = n_out + s.ldo_pad;
  const HostArray a = HostArray::randn(DType::kBf16, rng, size_t(m_a * lda));
  // |out| stays below ~6 (A ~ N(0, 1), W ~ N(0, 0.25 / K)): the tolerance below counts bf16 ulps at that size.
  const HostArray w = HostArray::randn(DType::kBf16, rng, size_t(E * s.N * s.K), 0.5f / std::sqrt(float(s.K)));
  DeviceBuffer d_a, d_w, d_off, d_tiles, d_perm, d_out;
  MLA_TRY(to_device(a, &d_a));
  MLA_TRY(to_device(w, &d_w));
  MLA_TRY(to_device(h.offsets, &d_off));
  MLA_TRY(to_device(h.tiles, &d_tiles));
  MLA_TRY(to_device(h.perm, &d_perm));
  MLA_TRY(d_out.alloc(size_t(n * ldo) * 2));  // NaN-poisoned: rows and columns the op must not write stay NaN
  auto bind = [&](const void* ap, const void* wp, const void* offp, const void* tilep, const void* permp, void* outp) {
    GroupedGemmParams p;
    p.a = TensorView::contiguous(ap, DType::kBf16, {m_a, s.K});
    p.a.stride[0] = lda;
    if (s.gather) p.a_rows = TensorView::contiguous(permp, DType::kInt32, {n});
    p.w = TensorView::contiguous(wp, DType::kBf16, {E, s.N, s.K});
    p.expert_offsets = TensorView::contiguous(offp, DType::kInt32, {E + 1});
    p.tiles = TensorView::contiguous(tilep, DType::kInt32, {int64_t(h.tiles.size() / 2), 2});
    p.block_m = s.bm;
    p.epilogue = s.epi;
    p.out = TensorView::contiguous(outp, DType::kBf16, {n, n_out});
    p.out.stride[0] = ldo;
    return p;
  };
  MLA_TRY(cuda::grouped_gemm(bind(d_a.data(), d_w.data(), d_off.data(), d_tiles.data(), d_perm.data(), d_out.data()),
                             nullptr));
  std::vector<float> got;
  MLA_TRY(from_device(d_out, DType::kBf16, size_t(n * ldo), &got));
  std::vector<uint16_t> ref_out(size_t(n * ldo), 0xFFFF);  // the device's poison where nothing is written
  MLA_TRY(ref::grouped_gemm(
      bind(a.raw.data(), w.raw.data(), h.offsets.data(), h.tiles.data(), h.perm.data(), ref_out.data())));
  std::vector<float> want(ref_out.size());
  for (size_t i = 0; i < ref_out.size(); ++i) want[i] = bf16_to_float(ref_out[i]);
  rep->add("out", compare_f(got, want));
  MLA_TRY(d_out.check_guards("out"));
  int lo = 1 << 30, hi = 0, empty = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int m = h.offsets[size_t(e + 1)] - h.offsets[size_t(e)];
    lo = std::min(lo, m), hi = std::max(hi, m), empty += m == 0;
  }
  rep->note =
      "rows per expert " + std::to_string(lo) + ".." + std::to_string(hi) + ", " + std::to_string(empty) + " empty";
  return Status::ok();
}

// The same with block_m 128 on the mma.sync kernel instead of wgmma (MLA_GROUPED_GEMM_MMA_SYNC, read per call).
Status run_grouped_mma_sync(const GroupedSpec& s, int64_t t, int64_t k, const std::vector<int32_t>& ids,
                            CaseReport* rep) {
  setenv("MLA_GROUPED_GEMM_MMA_SYNC", "1", 1);
  const Status st = run_grouped(s, t, k, ids, rep);
  unsetenv("MLA_GROUPED_GEMM_MMA_SYNC");
  return st;
}

// Both sides sum fp32 products in different orders and round to bf16 (one ulp apart at worst, 2^-8 relative);
// kSiluMul rounds g and u first, so a flip there adds one more ulp of |out| < ~6: max_abs <= 2 · 2^-8 · 8.
constexpr Tolerance kGrouped{3e-3, 6e-2,
                             "fp32 sums in another order, bf16 g/u and out roundings (<= 2 ulps), |out| < ~6"};

// ---------------------------------------------------------------------------------------------------
// prefill_attention: the backend's layout (k_nope and v interleaved per head in the kv_b_proj output,
// k_pe inside 576-wide latent rows), several sequences with cached prefixes, against ref::prefill_attention.

struct PrefillSeq {
  int q_len, k_len;
};

Status run_prefill(int64_t h, const std::vector<PrefillSeq>& seqs_in, CaseReport* rep) {
  auto rng = case_rng("prefill" + std::to_string(h) + "_" + std::to_string(seqs_in.size()));
  std::vector<int32_t> seqs;
  int64_t tq = 0, tk = 0;
  int max_q = 0;
  for (const auto& q : seqs_in) {
    tq += 3;  // a gap of rows no sequence owns: must stay untouched
    seqs.insert(seqs.end(), {int32_t(tq), q.q_len, int32_t(tk), q.k_len});
    tq += q.q_len, tk += q.k_len;
    max_q = std::max(max_q, q.q_len);
  }
  const int64_t dkv = kPrefillDimNope + kPrefillDimV;
  const HostArray q = HostArray::randn(DType::kBf16, rng, size_t(tq * h * kPrefillDimQK));
  const HostArray kv = HostArray::randn(DType::kBf16, rng, size_t(tk * h * dkv));
  const HostArray lat = HostArray::randn(DType::kBf16, rng, size_t(tk * 576));
  const float scale = 1.f / std::sqrt(192.f) * 1.3f;
  DeviceBuffer d_q, d_kv, d_lat, d_out, d_lse, d_seqs;
  MLA_TRY(to_device(q, &d_q));
  MLA_TRY(to_device(kv, &d_kv));
  MLA_TRY(to_device(lat, &d_lat));
  MLA_TRY(to_device(seqs, &d_seqs));
  MLA_TRY(d_out.alloc(size_t(tq * h * kPrefillDimV) * 2));
  MLA_TRY(d_lse.alloc(size_t(h * tq) * 4));
  auto bind = [&](const void* qp, const void* kvp, const void* latp, void* outp, void* lsep, const void* seqp) {
    auto v3 = [](const void* d, int64_t r, int64_t hh, int64_t w, int64_t rs, int64_t hs) {
      TensorView v = TensorView::contiguous(d, DType::kBf16, {r, hh, w});
      v.stride[0] = rs, v.stride[1] = hs;
      return v;
    };
    PrefillAttentionParams p;
    p.q = v3(qp, tq, h, kPrefillDimQK, h * kPrefillDimQK, kPrefillDimQK);
    p.k_nope = v3(kvp, tk, h, kPrefillDimNope, h * dkv, dkv);
    p.v = v3(static_cast<const uint16_t*>(kvp) + kPrefillDimNope, tk, h, kPrefillDimV, h * dkv, dkv);
    p.k_pe = TensorView::contiguous(static_cast<const uint16_t*>(latp) + 512, DType::kBf16, {tk, kPrefillDimRope});
    p.k_pe.stride[0] = 576;
    p.out = v3(outp, tq, h, kPrefillDimV, h * kPrefillDimV, kPrefillDimV);
    p.lse = TensorView::contiguous(lsep, DType::kFp32, {h, tq});
    p.seqs = TensorView::contiguous(seqp, DType::kInt32, {int64_t(seqs_in.size()), kPrefillSeqFields});
    p.max_q_len = max_q;
    p.softmax_scale = scale;
    return p;
  };
  MLA_TRY(cuda::prefill_attention(
      bind(d_q.data(), d_kv.data(), d_lat.data(), d_out.data(), d_lse.data(), d_seqs.data()), nullptr));
  std::vector<float> got_out, got_lse;
  MLA_TRY(from_device(d_out, DType::kBf16, size_t(tq * h * kPrefillDimV), &got_out));
  MLA_TRY(from_device(d_lse, DType::kFp32, size_t(h * tq), &got_lse));
  // The reference on buffers holding the device's poison (NaN) where no sequence writes.
  std::vector<uint16_t> ref_out(size_t(tq * h * kPrefillDimV), 0xFFFF);
  std::vector<float> ref_lse(size_t(h * tq), std::nanf(""));
  MLA_TRY(ref::prefill_attention(
      bind(q.raw.data(), kv.raw.data(), lat.raw.data(), ref_out.data(), ref_lse.data(), seqs.data())));
  std::vector<float> want_out(ref_out.size());
  for (size_t i = 0; i < ref_out.size(); ++i) want_out[i] = bf16_to_float(ref_out[i]);
  rep->add("out", compare_f(got_out, want_out));
  rep->add("lse", compare_f(got_lse, ref_lse));
  MLA_TRY(d_out.check_guards("out"));
  MLA_TRY(d_lse.check_guards("lse"));
  return Status::ok();
}

// P is rounded to bf16 for the MMA (2^-9 relative per weight, averaging out over keys) and out is rounded
// once more: relative L2 ~2e-3 observed in FlashAttention-style kernels; |out| < ~3 (averages of N(0, 1)
// values), so 1-2 bf16 ulps stay under 0.05; lse (~ln k_len) moves by ~1e-3.
constexpr Tolerance kPrefill{1e-2, 5e-2, "bf16 P in P·V plus bf16 output rounding; |out| < ~3"};

// bf16-rounded references vs bf16 outputs: a result on either side of a rounding boundary differs by one
// bf16 ulp (2^-8 relative), rarely; rel_l2 stays far below 3e-3.
constexpr Tolerance kGemmBf16{3e-3, 4e-2, "fp32 accumulation in another order, both sides rounded to bf16 (1 ulp)"};

MLA_GPU_CASES([](std::vector<GpuCase>& cases) {
  cases.push_back({"embedding", "v1000_h2048_t37_bf16", kExact,
                   [](CaseReport* r) { return run_embedding(1000, 2048, 37, DType::kBf16, 2048, r); }});
  cases.push_back({"embedding", "v512_h128_t5_fp32_strided", kExact,
                   [](CaseReport* r) { return run_embedding(512, 128, 5, DType::kFp32, 136, r); }});

  cases.push_back({"rmsnorm", "t33_n512_ld576_in_place", kBf16Out,
                   [](CaseReport* r) { return run_rmsnorm(33, 512, 576, DType::kBf16, true, r); }});
  cases.push_back({"rmsnorm", "t7_n2048_fp32_in", kBf16Out,
                   [](CaseReport* r) { return run_rmsnorm(7, 2048, 2048, DType::kFp32, false, r); }});
  cases.push_back({"rmsnorm", "t65_n5120", kBf16Out,
                   [](CaseReport* r) { return run_rmsnorm(65, 5120, 5120, DType::kBf16, false, r); }});
  cases.push_back({"rmsnorm", "t3_n1536_q_lora", kBf16Out,
                   [](CaseReport* r) { return run_rmsnorm(3, 1536, 1536, DType::kBf16, true, r); }});

  cases.push_back({"add_rmsnorm", "t41_n2048_fp32_residual", kBf16Out,
                   [](CaseReport* r) { return run_add_rmsnorm(41, 2048, DType::kFp32, r); }});
  cases.push_back({"add_rmsnorm", "t3_n128_bf16_residual", kBf16Out,
                   [](CaseReport* r) { return run_add_rmsnorm(3, 128, DType::kBf16, r); }});

  cases.push_back({"rope_mla", "tiny_h4_t19", kBf16Out, [](CaseReport* r) { return run_rope("tiny", 19, 2048, r); }});
  cases.push_back({"rope_mla", "v2_lite_h16_t57", kBf16Out,
                   [](CaseReport* r) { return run_rope("deepseek-v2-lite", 57, 163840, r); }});
  cases.push_back(
      {"rope_mla", "v2_h128_t9", kBf16Out, [](CaseReport* r) { return run_rope("deepseek-v2", 9, 32768, r); }});

  cases.push_back({"silu_mul", "t29_n1408", kBf16Out, [](CaseReport* r) { return run_silu_mul(29, 1408, false, r); }});
  cases.push_back(
      {"silu_mul", "t5_n10944_in_place", kBf16Out, [](CaseReport* r) { return run_silu_mul(5, 10944, true, r); }});

  cases.push_back({"gather_rows", "bf16_m50_n37_c2048", kExact,
                   [](CaseReport* r) { return run_row_copy(false, DType::kBf16, 50, 37, 2048, r); }});
  cases.push_back({"gather_rows", "fp32_m9_n4_c512", kExact,
                   [](CaseReport* r) { return run_row_copy(false, DType::kFp32, 9, 4, 512, r); }});
  cases.push_back({"scatter_rows", "bf16_m64_n40_c3072", kExact,
                   [](CaseReport* r) { return run_row_copy(true, DType::kBf16, 64, 40, 3072, r); }});

  cases.push_back({"moe_routing", "tiny_E8_k3_greedy", kRouting, [](CaseReport* r) {
                     return run_routing({8, 3, false, 1, 1, false, 1.f}, 300, r);
                   }});
  cases.push_back({"moe_routing", "lite_E64_k6_greedy", kRouting, [](CaseReport* r) {
                     return run_routing({64, 6, false, 1, 1, false, 1.f}, 300, r);
                   }});
  cases.push_back({"moe_routing", "v2_E160_k6_group8_3_scale16", kRouting, [](CaseReport* r) {
                     return run_routing({160, 6, true, 8, 3, false, 16.f}, 300, r);
                   }});
  cases.push_back({"moe_routing", "E256_k8_group8_4_norm", kRouting, [](CaseReport* r) {
                     return run_routing({256, 8, true, 8, 4, true, 2.5f}, 300, r);
                   }});

  cases.push_back(
      {"moe_align", "t1_k6_E64_bm16", kExact, [](CaseReport* r) { return run_moe_align(1, 6, 64, 16, 0, false, r); }});
  cases.push_back({"moe_align", "t64_k6_E64_bm16", kExact,
                   [](CaseReport* r) { return run_moe_align(64, 6, 64, 16, 0, false, r); }});
  cases.push_back({"moe_align", "t256_k6_E64_bm64", kExact,
                   [](CaseReport* r) { return run_moe_align(256, 6, 64, 64, 0, false, r); }});
  cases.push_back({"moe_align", "t3001_k6_E64_bm128_chunks", kExact,
                   [](CaseReport* r) { return run_moe_align(3001, 6, 64, 128, 0, false, r); }});
  cases.push_back({"moe_align", "t1500_k8_E256_bm128_skewed", kExact,
                   [](CaseReport* r) { return run_moe_align(1500, 8, 256, 128, 5, false, r); }});
  cases.push_back({"moe_align", "t700_k6_E64_bm64_invalid_ids", kExact,
                   [](CaseReport* r) { return run_moe_align(700, 6, 64, 64, 0, true, r); }});
  cases.push_back(
      {"moe_align", "t9_k1_E3_bm16", kExact, [](CaseReport* r) { return run_moe_align(9, 1, 3, 16, 0, false, r); }});
  cases.push_back({"moe_align", "t128_k6_E64_bm32", kExact,
                   [](CaseReport* r) { return run_moe_align(128, 6, 64, 32, 0, false, r); }});
  cases.push_back({"moe_align", "t300_k6_E64_bm32_skewed", kExact,
                   [](CaseReport* r) { return run_moe_align(300, 6, 64, 32, 3, false, r); }});

  cases.push_back({"grouped_gemm", "bm16_t1_k6_E8_gate_up_2816x2048_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids1");
                     return run_grouped({8, 2816, 2048, GroupedEpilogue::kSiluMul, 16, true, 0, 0}, 1, 6,
                                        random_topk(1, 6, 8, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm16_t64_k6_E16_down_2048x1408_multi_tile", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids2");
                     return run_grouped({16, 2048, 1408, GroupedEpilogue::kStore, 16, false, 0, 0}, 64, 6,
                                        random_topk(64, 6, 16, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm16_edge_counts_tiny_128x64_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids3");
                     return run_grouped({8, 128, 64, GroupedEpilogue::kSiluMul, 16, true, 8, 0}, 84, 1,
                                        ids_from_counts({0, 1, 15, 16, 17, 33, 0, 2}, rng), r); }});
  cases.push_back({"grouped_gemm", "bm16_tiny_down_128x64_strided", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids4");
                     return run_grouped({8, 128, 64, GroupedEpilogue::kStore, 16, false, 16, 8}, 40, 3,
                                        random_topk(40, 3, 8, rng), r);
                   }});
  // block_m 32 (decode b128–b256): tile boundaries at 31/32/33 rows, the real gate|up and down shapes.
  cases.push_back({"grouped_gemm", "bm32_edge_counts_tiny_128x64_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids12");
                     return run_grouped({8, 128, 64, GroupedEpilogue::kSiluMul, 32, true, 8, 0}, 172, 1,
                                        ids_from_counts({0, 1, 31, 32, 33, 65, 0, 10}, rng), r); }});
  // (Routing as at b128 / b256 with narrow weights, and V2-Lite's own gate|up width at 12 rows per expert:
  // the CPU reference of a full-width b128 layer, 4.4 GMAC, took longer than the whole suite.)
  cases.push_back({"grouped_gemm", "bm32_t128_k6_E64_N384_K256_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids13");
                     return run_grouped({64, 384, 256, GroupedEpilogue::kSiluMul, 32, true, 0, 0}, 128, 6,
                                        random_topk(128, 6, 64, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm32_t256_k6_E64_N256_K200_store_strided", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids14");
                     return run_grouped({64, 256, 200, GroupedEpilogue::kStore, 32, false, 8, 8}, 256, 6,
                                        random_topk(256, 6, 64, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm32_t16_k6_E8_gate_up_2816x2048_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids15");
                     return run_grouped({8, 2816, 2048, GroupedEpilogue::kSiluMul, 32, true, 0, 0}, 16, 6,
                                        random_topk(16, 6, 8, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm64_edge_counts_N200_K136_store_gather_strided", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids5");
                     return run_grouped({8, 200, 136, GroupedEpilogue::kStore, 64, true, 8, 24}, 330, 1,
                                        ids_from_counts({0, 1, 63, 64, 65, 0, 130, 7}, rng), r); }});
  cases.push_back({"grouped_gemm", "bm64_edge_counts_N208_K72_silu", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids6");
                     return run_grouped({8, 208, 72, GroupedEpilogue::kSiluMul, 64, false, 0, 8}, 330, 1,
                                        ids_from_counts({0, 1, 63, 64, 65, 0, 130, 7}, rng), r); }});
  cases.push_back({"grouped_gemm", "bm64_t256_k6_E64_N384_K256_silu_gather", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids7");
                     return run_grouped({64, 384, 256, GroupedEpilogue::kSiluMul, 64, true, 0, 0}, 256, 6,
                                        random_topk(256, 6, 64, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm128_all_rows_one_expert_N256_K512_silu", kGrouped, [](CaseReport* r) {
                     std::vector<int> counts(16, 0);
                     counts[5] = 300;
                     auto rng = case_rng("gg_ids8");
                     return run_grouped({16, 256, 512, GroupedEpilogue::kSiluMul, 128, true, 0, 0}, 300, 1,
                                        ids_from_counts(counts, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm128_t600_k6_E64_N392_K200_store", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids9");
                     return run_grouped({64, 392, 200, GroupedEpilogue::kStore, 128, true, 0, 8}, 600, 6,
                                        random_topk(600, 6, 64, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm128_edge_counts_N2048_K1408_store", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids10");
                     return run_grouped({6, 2048, 1408, GroupedEpilogue::kStore, 128, false, 0, 0}, 520, 1,
                                        ids_from_counts({127, 0, 1, 128, 129, 135}, rng), r); }});

  cases.push_back({"grouped_gemm", "bm128_gate_up_2816x2048_silu_gather_counts", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids11");
                     return run_grouped({4, 2816, 2048, GroupedEpilogue::kSiluMul, 128, true, 0, 0}, 300, 1,
                                        ids_from_counts({0, 129, 40, 131}, rng), r); }});
  cases.push_back({"grouped_gemm", "bm128_mma_sync_t600_k6_E64_N392_K200_store", kGrouped, [](CaseReport* r) {
                     auto rng = case_rng("gg_ids9");
                     return run_grouped_mma_sync({64, 392, 200, GroupedEpilogue::kStore, 128, true, 0, 8}, 600, 6,
                                                 random_topk(600, 6, 64, rng), r);
                   }});
  cases.push_back({"grouped_gemm", "bm128_mma_sync_all_rows_one_expert_N256_K512_silu", kGrouped, [](CaseReport* r) {
                     std::vector<int> counts(16, 0);
                     counts[5] = 300;
                     auto rng = case_rng("gg_ids8");
                     return run_grouped_mma_sync({16, 256, 512, GroupedEpilogue::kSiluMul, 128, true, 0, 0}, 300, 1,
                                                 ids_from_counts(counts, rng), r);
                   }});

  cases.push_back({"moe_combine", "t21_k6_h2048_shared", kBf16Out,
                   [](CaseReport* r) { return run_combine(21, 6, 2048, true, r); }});
  cases.push_back({"moe_combine", "t4_k3_h128_no_shared", kBf16Out,
                   [](CaseReport* r) { return run_combine(4, 3, 128, false, r); }});

  cases.push_back({"prefill_attention", "h4_one_seq_q100_k100", kPrefill, [](CaseReport* r) {
                     return run_prefill(4, {{100, 100}}, r);
                   }});
  cases.push_back({"prefill_attention", "h16_mixed_prefixes", kPrefill, [](CaseReport* r) {
                     return run_prefill(16, {{37, 200}, {64, 64}, {130, 300}, {1, 65}, {5, 5}}, r); }});
  cases.push_back({"prefill_attention", "h128_q64_k300", kPrefill, [](CaseReport* r) {
                     return run_prefill(128, {{64, 300}}, r);
                   }});
  cases.push_back({"gemm", "linear_m37_n576_k2048", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({37, 576, 2048, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "linear_m1_n3072_k2048", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({1, 3072, 2048, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "lm_head_m5_n512_k128_fp32", kFp32Out, [](CaseReport* r) {
                     return run_gemm({5, 512, 128, 1, true, DType::kFp32, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "w_uk_m13_n512_k128_h4", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({13, 512, 128, 4, false, DType::kBf16, 64, 64}, r);
                   }});
  cases.push_back({"gemm", "w_uv_m13_n128_k512_h16", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({13, 128, 512, 16, true, DType::kBf16, 0, 0}, r);
                   }});
  // One-expert tables: t at 1, a partial 16-row tile, the 32- and 64-row heights, the 256-row maximum.
  cases.push_back({"small_m_linear", "t1_kv_a_576x2048", kGemmBf16,
                   [](CaseReport* r) { return run_small_m(1, 576, 2048, false, 0, 0, r); }});
  cases.push_back({"small_m_linear", "t13_q_3072x2048_strided", kGemmBf16,
                   [](CaseReport* r) { return run_small_m(13, 3072, 2048, false, 8, 16, r); }});
  cases.push_back({"small_m_linear", "t31_shared_gate_up_2816x2048_silu", kGrouped,
                   [](CaseReport* r) { return run_small_m(31, 2816, 2048, true, 0, 2816, r); }});
  cases.push_back({"small_m_linear", "t100_o_2048x2048", kGemmBf16,
                   [](CaseReport* r) { return run_small_m(100, 2048, 2048, false, 0, 0, r); }});
  cases.push_back({"small_m_linear", "t40_bm16_q_3072x2048", kGemmBf16,
                   [](CaseReport* r) { return run_small_m(40, 3072, 2048, false, 0, 0, r, 16); }});
  cases.push_back({"small_m_linear", "t45_bm32_shared_gate_up_2816x2048_silu", kGrouped,
                   [](CaseReport* r) { return run_small_m(45, 2816, 2048, true, 0, 0, r, 32); }});
  cases.push_back({"small_m_linear", "t256_n512_k264", kGemmBf16,
                   [](CaseReport* r) { return run_small_m(256, 512, 264, false, 0, 0, r); }});
  cases.push_back({"small_m_linear", "t200_tiny_silu_48x72", kGrouped,
                   [](CaseReport* r) { return run_small_m(200, 48, 72, true, 8, 8, r); }});
  // The decode step's shapes at b128/b256: m <= 256 is autotuned (gemm.h), so these run the algorithms the
  // tuner picks for the model's own products (kv_a, q, o, shared down, router, both absorbed ones).
  cases.push_back({"gemm", "tuned_kv_a_m128_n576_k2048", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({128, 576, 2048, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "tuned_q_m64_n3072_k2048", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({64, 3072, 2048, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "tuned_o_m64_n2048_k2048", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({64, 2048, 2048, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "tuned_shared_down_m128_n2048_k2816", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({128, 2048, 2816, 1, true, DType::kBf16, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "tuned_router_m256_n64_k2048_fp32", kFp32Out, [](CaseReport* r) {
                     return run_gemm({256, 64, 2048, 1, true, DType::kFp32, 0, 0}, r);
                   }});
  cases.push_back({"gemm", "tuned_w_uk_m128_n512_k128_h16", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({128, 512, 128, 16, false, DType::kBf16, 64, 64}, r);
                   }});
  cases.push_back({"gemm", "tuned_w_uv_m256_n128_k512_h16", kGemmBf16, [](CaseReport* r) {
                     return run_gemm({256, 128, 512, 16, true, DType::kBf16, 0, 0}, r);
                   }});
});

}  // namespace
}  // namespace mla::test

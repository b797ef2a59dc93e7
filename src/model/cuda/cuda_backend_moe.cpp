// MoE on the CUDA backend, a correct first version: route on the GPU (moe_routing), bring the chosen
// expert ids to the host (one small copy and a stream sync per MoE layer), sort the (token, expert) pairs
// by expert there, gather the tokens' rows in that order, run each non-empty expert's SwiGLU as three
// cuBLASLt GEMMs over its contiguous rows, then add the shared experts and the weighted expert rows per
// token (moe_combine). A grouped GEMM over all experts, with the sort on the GPU, can replace the middle.
#include <string>
#include <vector>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/gather_rows.h"
#include "mla/ops/moe_combine.h"
#include "mla/ops/moe_routing.h"
#include "mla/ops/silu_mul.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "moe";

// Rows [r0, r0 + n) of a contiguous 2-d view.
TensorView rows(const TensorView& v, int64_t r0, int64_t n) {
  TensorView o = v;
  o.data = static_cast<uint8_t*>(v.data) + r0 * v.stride[0] * static_cast<int64_t>(dtype_size(v.dtype));
  o.shape[0] = n;
  return o;
}

}  // namespace

Status CudaBackend::moe(const TensorView& x, const MoeWeights& w, TensorView out) {
  State& s = *s_;
  const ModelConfig& c = s.w.config;
  const Stream st = stream();
  const int64_t H = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  const int64_t I = c.moe_intermediate_size;
  if (!(x.rank == 2 && x.dtype == DType::kBf16 && x.shape[1] == H && x.data && x.stride[1] == 1))
    return Status::invalid(kOp, "x: expected bf16[t, " + std::to_string(H) + "], got " + x.str());
  if (static_cast<int64_t>(w.experts.size()) != E)
    return Status::invalid(kOp, std::to_string(w.experts.size()) + " experts given, config says " + std::to_string(E));
  const int64_t t = x.shape[0], n = t * k;
  auto linear_into = [&](const char* what, const TensorView& a, const TensorView& wt, TensorView c_out) {
    cuda_backend::GemmArgs g;
    g.a = a.data, g.lda = a.stride[0];
    g.b = wt.data, g.ldb = wt.shape[1], g.b_is_nk = true;
    g.c = c_out.data, g.ldc = c_out.stride[0], g.c_dtype = c_out.dtype;
    g.m = a.shape[0], g.n = wt.shape[0], g.k = wt.shape[1];
    if (a.shape[1] != wt.shape[1] || c_out.shape[1] != wt.shape[0] || c_out.shape[0] != a.shape[0])
      return Status::invalid(kOp, std::string(what) + ": " + a.str() + " · " + wt.str() + "ᵀ → " + c_out.str());
    return s.gemm.run(what, g, st);
  };

  s.scratch.reset();
  TensorView logits = s.scratch_view(DType::kFp32, t, E);
  TensorView ids = s.scratch_view(DType::kInt32, t, k), wts = s.scratch_view(DType::kFp32, t, k);
  TensorView perm = s.scratch_view(DType::kInt32, n, 1), src = s.scratch_view(DType::kInt32, t, k);
  TensorView xs = s.scratch_view(DType::kBf16, n, H), ys = s.scratch_view(DType::kBf16, n, H);
  TensorView g = s.scratch_view(DType::kBf16, n, I), u = s.scratch_view(DType::kBf16, n, I);
  const int64_t Is = I * c.n_shared_experts;
  TensorView sg, su, sh;
  if (c.n_shared_experts > 0) {
    sg = s.scratch_view(DType::kBf16, t, Is), su = s.scratch_view(DType::kBf16, t, Is);
    sh = s.scratch_view(DType::kBf16, t, H);
  }
  for (const TensorView* v : {&logits, &ids, &wts, &perm, &src, &xs, &ys, &g, &u})
    if (!v->defined()) return Status::oom(kOp, "scratch arena too small for " + std::to_string(t) + " tokens");
  if (c.n_shared_experts > 0 && (!sg.defined() || !su.defined() || !sh.defined()))
    return Status::oom(kOp, "scratch arena too small for the shared experts of " + std::to_string(t) + " tokens");

  // Router in fp32 out (bf16 inputs, fp32 accumulation): the softmax and top-k see unrounded logits.
  MLA_TRY(linear_into("moe router", x, w.gate, logits));
  MoeRoutingParams rp{.logits = logits, .topk_ids = ids, .topk_weights = wts};
  rp.group_limited = c.topk_method == TopkMethod::kGroupLimitedGreedy;
  rp.n_group = static_cast<int>(c.n_group);
  rp.topk_group = static_cast<int>(c.topk_group);
  rp.norm_topk_prob = c.norm_topk_prob;
  rp.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  MLA_TRY(cuda::moe_routing(rp, st));

  // Counting sort of the (token, slot) pairs by expert, tokens ascending within an expert.
  std::vector<int32_t> h_ids(static_cast<size_t>(n));
  MLA_CUDA_TRY(kOp, cudaMemcpyAsync(h_ids.data(), ids.data, n * sizeof(int32_t), cudaMemcpyDeviceToHost, s.stream));
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s.stream));
  std::vector<int64_t> offset(static_cast<size_t>(E + 1), 0);
  for (int32_t e : h_ids) {
    if (e < 0 || e >= E) return Status::internal(kOp, "router produced expert " + std::to_string(e));
    ++offset[static_cast<size_t>(e) + 1];
  }
  for (int64_t e = 0; e < E; ++e) offset[e + 1] += offset[e];
  std::vector<int64_t> fill(offset.begin(), offset.end() - 1);
  std::vector<int32_t> h_perm(static_cast<size_t>(n)), h_src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = fill[static_cast<size_t>(h_ids[i])]++;
    h_perm[static_cast<size_t>(row)] = static_cast<int32_t>(i / k);  // sorted row → token
    h_src[static_cast<size_t>(i)] = static_cast<int32_t>(row);       // (token, slot) → sorted row
  }
  MLA_CUDA_TRY(kOp, cudaMemcpyAsync(perm.data, h_perm.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, s.stream));
  MLA_CUDA_TRY(kOp, cudaMemcpyAsync(src.data, h_src.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, s.stream));
  MLA_TRY(cuda::gather_rows({.x = x, .rows = TensorView::contiguous(perm.data, DType::kInt32, {n}), .out = xs}, st));

  // Each expert's SwiGLU over its rows.
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = offset[static_cast<size_t>(e)], m = offset[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const MlpWeights& ew = w.experts[static_cast<size_t>(e)];
    MLA_TRY(linear_into("moe expert gate_proj", rows(xs, r0, m), ew.gate_proj, rows(g, r0, m)));
    MLA_TRY(linear_into("moe expert up_proj", rows(xs, r0, m), ew.up_proj, rows(u, r0, m)));
  }
  MLA_TRY(cuda::silu_mul({.gate = g, .up = u, .out = g}, st));
  for (int64_t e = 0; e < E; ++e) {
    const int64_t r0 = offset[static_cast<size_t>(e)], m = offset[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    MLA_TRY(linear_into("moe expert down_proj", rows(g, r0, m), w.experts[static_cast<size_t>(e)].down_proj, rows(ys, r0, m)));
  }

  if (c.n_shared_experts > 0) {
    MLA_TRY(linear_into("moe shared gate_proj", x, w.shared.gate_proj, sg));
    MLA_TRY(linear_into("moe shared up_proj", x, w.shared.up_proj, su));
    MLA_TRY(cuda::silu_mul({.gate = sg, .up = su, .out = sg}, st));
    MLA_TRY(linear_into("moe shared down_proj", sg, w.shared.down_proj, sh));
  }
  const MoeCombineParams cp{.expert_out = ys, .src_rows = src, .topk_weights = wts, .shared = sh, .out = out};
  return cuda::moe_combine(cp, st);
}

}  // namespace mla::model

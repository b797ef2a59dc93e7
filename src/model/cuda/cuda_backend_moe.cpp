// MoE on the CUDA backend, all on the device with no host sync (so a decode step can be captured in a
// CUDA graph), and nothing allocated per step (the scratch arena):
//
//   router GEMM (cuBLASLt, fp32 logits) → moe_routing (top-k ids, weights) → moe_align (sort by expert,
//   tile list) → grouped_gemm gate|up with the row gather and SiLU·mul fused → grouped_gemm down →
//   shared experts (one gate|up GEMM, silu_mul, down) → moe_combine
//
// The experts' weights are stacked per layer at upload ([E, 2I, H] and [E, H, I], device_weights.cpp).
// MLA_MOE_PATH=per_expert runs the first version instead, for comparison: routing ids copied to
// the host (one stream sync per layer), a host counting sort, and three cuBLASLt GEMMs per non-empty expert.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/ops/gather_rows.h"
#include "mla/ops/grouped_gemm.h"
#include "mla/ops/moe_align.h"
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

// Columns [c0, c0 + n) of a 2-d view.
TensorView cols(const TensorView& v, int64_t c0, int64_t n) {
  TensorView o = v;
  o.data = static_cast<uint8_t*>(v.data) + c0 * static_cast<int64_t>(dtype_size(v.dtype));
  o.shape[1] = n;
  return o;
}

// Read on every call (a getenv per MoE layer costs nothing next to it), so a benchmark can switch paths
// between steps of one process.
bool per_expert_path() {
  const char* e = std::getenv("MLA_MOE_PATH");
  return e && std::strcmp(e, "per_expert") == 0;
}

// The layer's expert stacks, when upload_weights laid them out (it always does; a caller-built weight set
// might not, and then the per-expert path runs).
bool stacked(const MoeWeights& w, TensorView* gate_up, TensorView* down) {
  const int64_t E = static_cast<int64_t>(w.experts.size());
  if (E == 0) return false;
  const TensorView& g0 = w.experts[0].gate_proj;
  const int64_t I = g0.shape[0], H = g0.shape[1];
  const size_t mat = static_cast<size_t>(I * H) * 2;
  const uint8_t* gu = static_cast<const uint8_t*>(g0.data);
  const uint8_t* dn = static_cast<const uint8_t*>(w.experts[0].down_proj.data);
  for (int64_t e = 0; e < E; ++e) {
    const MlpWeights& x = w.experts[static_cast<size_t>(e)];
    if (x.gate_proj.data != gu + 2 * e * mat || x.up_proj.data != gu + (2 * e + 1) * mat ||
        x.down_proj.data != dn + e * mat)
      return false;
  }
  *gate_up = TensorView::contiguous(gu, DType::kBf16, {E, 2 * I, H});
  *down = TensorView::contiguous(dn, DType::kBf16, {E, H, I});
  return true;
}

}  // namespace

Status CudaBackend::State::check_moe_error() {
  if (!moe_error_host || *moe_error_host == 0) return Status::ok();
  *moe_error_host = 0;  // reported once; a later step that routes cleanly passes
  return Status::internal(kOp,
                          "the router produced an out-of-range expert id (NaN router logits from NaN hidden "
                          "states?) in a step since the previous check (the flag is read at the syncs of sampling and "
                          "downloads, so a prefill chunk that samples nothing reports at the next one): those "
                          "tokens got no routed-expert output");
}

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
  // tune = false for the per-expert path's GEMMs: a new row count almost every call, each seen once.
  auto linear_into = [&](const char* what, const TensorView& a, const TensorView& wt, TensorView c_out,
                         bool tune = true) {
    cuda_backend::GemmArgs g;
    g.tune = tune;
    g.a = a.data, g.lda = a.stride[0];
    g.b = wt.data, g.ldb = wt.shape[1], g.b_is_nk = true;
    g.c = c_out.data, g.ldc = c_out.stride[0], g.c_dtype = c_out.dtype;
    g.m = a.shape[0], g.n = wt.shape[0], g.k = wt.shape[1];
    if (a.shape[1] != wt.shape[1] || c_out.shape[1] != wt.shape[0] || c_out.shape[0] != a.shape[0])
      return Status::invalid(kOp, std::string(what) + ": " + a.str() + " · " + wt.str() + "ᵀ → " + c_out.str());
    return s.gemm.run(what, g, st);
  };
  TensorView w_gate_up, w_down;
  // grouped_gemm's SiLU·mul epilogue pairs 8-column groups of gate and up: I % 8 == 0 (V2: 1408, 1536).
  const bool grouped = !per_expert_path() && I % 8 == 0 && stacked(w, &w_gate_up, &w_down);

  s.scratch.reset();
  int bm = 0;
  MLA_TRY(grouped_gemm_block_m(n, E, &bm));
  const int64_t max_tiles = moe_align_max_tiles(n, E, bm);
  TensorView logits = s.scratch_view(DType::kFp32, t, E);
  TensorView ids = s.scratch_view(DType::kInt32, t, k), wts = s.scratch_view(DType::kFp32, t, k);
  TensorView perm = s.scratch_view(DType::kInt32, n, 1), src = s.scratch_view(DType::kInt32, t, k);
  TensorView ys = s.scratch_view(DType::kBf16, n, H);
  // Grouped: h = silu(gate)·up [n, I], offsets, tiles. Per expert: the gathered rows and g, u.
  TensorView offsets, tiles, h, xs, g, u;
  if (grouped) {
    offsets = s.scratch_view(DType::kInt32, E + 1, 1), tiles = s.scratch_view(DType::kInt32, max_tiles, 2);
    h = s.scratch_view(DType::kBf16, n, I);
  } else {
    xs = s.scratch_view(DType::kBf16, n, H), g = s.scratch_view(DType::kBf16, n, I),
    u = s.scratch_view(DType::kBf16, n, I);
  }
  const int64_t Is = I * c.n_shared_experts;
  TensorView sgu, sh;
  if (c.n_shared_experts > 0) sgu = s.scratch_view(DType::kBf16, t, 2 * Is), sh = s.scratch_view(DType::kBf16, t, H);
  for (const TensorView* v : {&logits, &ids, &wts, &perm, &src, &ys})
    if (!v->defined()) return Status::oom(kOp, "scratch arena too small for " + std::to_string(t) + " tokens");
  if (grouped ? (!offsets.defined() || !tiles.defined() || !h.defined())
              : (!xs.defined() || !g.defined() || !u.defined()))
    return Status::oom(kOp, "scratch arena too small for the experts of " + std::to_string(t) + " tokens");
  if (c.n_shared_experts > 0 && (!sgu.defined() || !sh.defined()))
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

  if (grouped) {
    const TensorView perm1 = TensorView::contiguous(perm.data, DType::kInt32, {n});
    MLA_TRY(cuda::moe_align({.topk_ids = ids,
                             .num_experts = static_cast<int>(E),
                             .block_m = bm,
                             .expert_offsets = TensorView::contiguous(offsets.data, DType::kInt32, {E + 1}),
                             .perm = perm1,
                             .src = src,
                             .tiles = tiles,
                             .error = TensorView::contiguous(s.moe_error, DType::kInt32, {1})},
                            st));
    GroupedGemmParams gp;
    gp.a = x, gp.a_rows = perm1, gp.w = w_gate_up;
    gp.expert_offsets = TensorView::contiguous(offsets.data, DType::kInt32, {E + 1});
    gp.tiles = tiles, gp.block_m = bm, gp.epilogue = GroupedEpilogue::kSiluMul, gp.out = h;
    MLA_TRY(cuda::grouped_gemm(gp, st));
    gp.a = h, gp.a_rows = TensorView{}, gp.w = w_down, gp.epilogue = GroupedEpilogue::kStore, gp.out = ys;
    MLA_TRY(cuda::grouped_gemm(gp, st));
  } else {
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
    for (int64_t e = 0; e < E; ++e) {
      const int64_t r0 = offset[static_cast<size_t>(e)], m = offset[static_cast<size_t>(e) + 1] - r0;
      if (m == 0) continue;
      const MlpWeights& ew = w.experts[static_cast<size_t>(e)];
      MLA_TRY(linear_into("moe expert gate_proj", rows(xs, r0, m), ew.gate_proj, rows(g, r0, m), false));
      MLA_TRY(linear_into("moe expert up_proj", rows(xs, r0, m), ew.up_proj, rows(u, r0, m), false));
    }
    MLA_TRY(cuda::silu_mul({.gate = g, .up = u, .out = g}, st));
    for (int64_t e = 0; e < E; ++e) {
      const int64_t r0 = offset[static_cast<size_t>(e)], m = offset[static_cast<size_t>(e) + 1] - r0;
      if (m == 0) continue;
      MLA_TRY(linear_into("moe expert down_proj", rows(g, r0, m), w.experts[static_cast<size_t>(e)].down_proj,
                          rows(ys, r0, m), false));
    }
    // The host buffers above are pageable: cudaMemcpyAsync from them returns once the bytes are staged, so
    // they may go out of scope here.
  }

  if (c.n_shared_experts > 0) {
    const TensorView& sg_w = w.shared.gate_proj;
    const bool adjacent = static_cast<const uint8_t*>(w.shared.up_proj.data) ==
                          static_cast<const uint8_t*>(sg_w.data) + sg_w.numel() * 2;
    const TensorView sh_in = cols(sgu, 0, Is);  // silu(gate)·up, in place of the gate columns
    if (adjacent) {  // upload_weights puts them side by side: one product for both
      const TensorView sgu_w = TensorView::contiguous(sg_w.data, DType::kBf16, {2 * Is, H});
      // Few rows: the grouped kernel with SiLU·mul fused where it measured faster than cuBLASLt + silu_mul.
      const auto fallback = [&]() -> Status {  // cuBLASLt + silu_mul
        MLA_TRY(linear_into("moe shared gate|up_proj", x, sgu_w, sgu));
        return cuda::silu_mul({.gate = cols(sgu, 0, Is), .up = cols(sgu, Is, Is), .out = sh_in}, st);
      };
      MLA_TRY(cuda_backend::small_m_run(s.small_m, x, sgu_w, GroupedEpilogue::kSiluMul, sh_in, st, fallback));
    } else {
      MLA_TRY(linear_into("moe shared gate_proj", x, sg_w, cols(sgu, 0, Is)));
      MLA_TRY(linear_into("moe shared up_proj", x, w.shared.up_proj, cols(sgu, Is, Is)));
      MLA_TRY(cuda::silu_mul({.gate = cols(sgu, 0, Is), .up = cols(sgu, Is, Is), .out = sh_in}, st));
    }
    MLA_TRY(linear(sh_in, w.shared.down_proj, sh));
  }
  const MoeCombineParams cp{.expert_out = ys, .src_rows = src, .topk_weights = wts, .shared = sh, .out = out};
  return cuda::moe_combine(cp, st);
}

}  // namespace mla::model

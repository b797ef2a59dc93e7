// MLA attention on the CUDA backend (the algebra of both forms is spelled out in src/model/cpu_attention.cpp).
// Absorbed (decode rows):
//   q_lat[r, h, :512] = q_nope[r, h, :] · W_UK_h            (batched over heads, cuBLASLt)
//   q_dec[r, h]       = [q_lat | q_pe]                       (576 wide; heads padded to mla_decode's counts)
//   o_lat[r, h, :512] = mla_decode(q_dec, paged cache)       (each row r: one s_q = 1 query over pos + 1 keys)
//   out[r, h, :v]     = o_lat[r, h, :] · W_UV_hᵀ             (batched over heads, cuBLASLt)
// Expanded (prefill chunks): context latents → kv_b_proj → prefill_attention (d_qk 192, d_v 128).
#include <string>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/concat_and_cache_mla.h"
#include "mla/ops/gather_cache_mla.h"
#include "mla/ops/gather_rows.h"
#include "mla/ops/mla_decode.h"
#include "mla/ops/prefill_attention.h"
#include "mla/ops/quantize_fp8.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "mla_attention";

TensorView cols(TensorView v, int64_t c0, int64_t n) {
  v.data = static_cast<uint8_t*>(v.data) + c0 * static_cast<int64_t>(dtype_size(v.dtype));
  v.shape[1] = n;
  return v;
}

Status check(const char* name, const TensorView& v, int64_t rows, int64_t cols) {
  if (v.rank == 2 && v.dtype == DType::kBf16 && v.data && v.stride[1] == 1 && v.shape[0] == rows &&
      v.shape[1] == cols && v.stride[0] >= cols && v.stride[0] % 8 == 0 &&
      reinterpret_cast<uintptr_t>(v.data) % 16 == 0)
    return Status::ok();
  return Status::invalid(kOp, std::string(name) + ": expected bf16[" + std::to_string(rows) + ", " +
                                  std::to_string(cols) +
                                  "] (unit column stride, row stride % 8 == 0, 16-byte aligned), got " + v.str());
}

}  // namespace

Status CudaBackend::mla_attention(int layer, const TensorView& q, const TensorView& latent, const AttentionWeights& w,
                                  AttnPath path, TensorView out) {
  State& s = *s_;
  const ModelConfig& c = s.w.config;
  if (!s.step.valid) return Status::invalid(kOp, "no step begun");
  const int64_t t = s.step.tokens, nh = c.num_attention_heads, dn = c.qk_nope_head_dim, dv = c.v_head_dim;
  MLA_TRY(check("q", q, t, nh * (dn + kDimRope)));
  MLA_TRY(check("latent", latent, t, kDimQK));
  MLA_TRY(check("out", out, t, nh * dv));
  if (layer < 0 || layer >= c.num_hidden_layers)
    return Status::invalid(kOp, "layer " + std::to_string(layer) + " out of range");
  const TensorView& kv_b = w.kv_b_proj;
  if (!(kv_b.rank == 2 && kv_b.dtype == DType::kBf16 && kv_b.shape[0] == nh * (dn + dv) && kv_b.shape[1] == kDimLatent))
    return Status::invalid(kOp,
                           "kv_b_proj: expected bf16[" + std::to_string(nh * (dn + dv)) + ", 512], got " + kv_b.str());
  if (path != s.step.batch.attn_path)
    return Status::invalid(kOp, "path differs from the batch's attn_path (begin_step planned for that one)");
  const TensorView cache = s.kv_cache(layer);

  // The step's latents into the paged cache first: every row then sees itself and its predecessors.
  const ConcatAndCacheMlaParams cp{.kv_c = cols(latent, 0, kDimLatent),
                                   .k_pe = cols(latent, kDimLatent, kDimRope),
                                   .kv_cache = cache,
                                   .slot_mapping = TensorView::contiguous(s.step.slots, DType::kInt64, {t}),
                                   .format = s.opts.kv_format,
                                   .k_scale = s.opts.k_scale};
  auto mark = [&s](AttentionProbe::Part part, bool end) {
    if (s.probe) s.probe->mark(part, end);
  };
  mark(AttentionProbe::kCacheWrite, false);
  MLA_TRY(cuda::concat_and_cache_mla(cp, stream()));
  mark(AttentionProbe::kCacheWrite, true);
  if (s.step.num_abs > 0) {
    mark(AttentionProbe::kDecode, false);
    MLA_TRY(attention_absorbed(layer, q, kv_b, out));
    mark(AttentionProbe::kDecode, true);
  }
  if (s.step.num_exp > 0) MLA_TRY(attention_expanded(layer, q, kv_b, out));

  // The step's tokens count as cached once its last layer has written them.
  if (layer == c.num_hidden_layers - 1)
    for (const auto& [seq, len] : s.step.pending) s.pages.commit(seq, len);
  return Status::ok();
}

Status CudaBackend::attention_absorbed(int layer, const TensorView& q_all, const TensorView& kv_b, TensorView out_all) {
  State& s = *s_;
  const ModelConfig& c = s.w.config;
  const Stream st = stream();
  const int64_t n = s.step.num_abs, nh = c.num_attention_heads, dn = c.qk_nope_head_dim, dv = c.v_head_dim;
  const int64_t dq = dn + kDimRope, hp = s.padded_heads;
  const bool all_rows = n == s.step.tokens;
  const TensorView rows = TensorView::contiguous(s.step.abs_rows, DType::kInt32, {n});
  s.scratch.reset();
  // A subset of the rows (a batch mixing decode and prefill): gather their q, scatter their out.
  TensorView q = q_all, out = out_all;
  if (!all_rows) {
    q = s.scratch_view(DType::kBf16, n, nh * dq);
    out = s.scratch_view(DType::kBf16, n, nh * dv);
    if (!q.defined() || !out.defined()) return Status::oom(kOp, "scratch arena too small for the decode rows");
    MLA_TRY(cuda::gather_rows({.x = q_all, .rows = rows, .out = q}, st));
  }
  TensorView q_dec = s.scratch_view(DType::kBf16, n, hp * kDimQK);  // [n, hp, 576]
  TensorView o_lat = s.scratch_view(DType::kBf16, n, hp * kDimV);   // [n, hp, 512]
  TensorView lse = s.scratch_view(DType::kFp32, n, hp);             // [n, hp, 1]
  if (!q_dec.defined() || !o_lat.defined() || !lse.defined())
    return Status::oom(kOp, "scratch arena (" + std::to_string(s.scratch.capacity()) + " bytes) too small for " +
                                std::to_string(n) + " decode rows × " + std::to_string(hp) + " heads");
  // Padded heads must hold finite values: their outputs are discarded, but the kernel still reads them.
  if (hp > nh) MLA_CUDA_TRY(kOp, cudaMemsetAsync(q_dec.data, 0, q_dec.nbytes(), s.stream));

  // q_lat = q_nope · W_UK per head: A = q[:, h·dq : h·dq + dn], B = kv_b rows [h·(dn+dv), +dn) as [dn, 512].
  cuda_backend::GemmArgs uk;
  uk.a = q.data, uk.lda = q.stride[0], uk.stride_a = dq;
  uk.b = kv_b.data, uk.ldb = kDimLatent, uk.stride_b = (dn + dv) * kDimLatent, uk.b_is_nk = false;
  uk.c = q_dec.data, uk.ldc = hp * kDimQK, uk.stride_c = kDimQK, uk.c_dtype = DType::kBf16;
  uk.m = n, uk.n = kDimLatent, uk.k = dn, uk.batch = static_cast<int>(nh);
  MLA_TRY(s.gemm.run("mla_attention q_nope·W_UK", uk, st));
  // q_pe next to q_lat (128 bytes per row and head). When the heads are not padded and q's rows are packed,
  // (row, head) pairs sit at one pitch on both sides: one 2-d copy of n·nh rows instead of one per head
  // (each copy is a node of the decode graph, ~2 µs of GPU time, 27 layers per step).
  if (hp == nh && q.stride[0] == nh * dq) {
    MLA_CUDA_TRY(kOp, cudaMemcpy2DAsync(q_dec.ptr<uint16_t>() + kDimLatent, kDimQK * 2, q.ptr<const uint16_t>() + dn,
                                        dq * 2, kDimRope * 2, n * nh, cudaMemcpyDeviceToDevice, s.stream));
  } else {
    for (int64_t h = 0; h < nh; ++h)
      MLA_CUDA_TRY(kOp, cudaMemcpy2DAsync(q_dec.ptr<uint16_t>() + h * kDimQK + kDimLatent, hp * kDimQK * 2,
                                          q.ptr<const uint16_t>() + h * dq + dn, q.stride[0] * 2, kDimRope * 2, n,
                                          cudaMemcpyDeviceToDevice, s.stream));
  }

  MlaDecodeParams dp;
  dp.q = TensorView::contiguous(q_dec.data, DType::kBf16, {n, 1, hp, kDimQK});
  if (s.opts.kv_format == KvFormat::kFp8) {
    // fp8: both products run on e4m3, so the query is quantized too (per tensor, q_scale).
    void* q8 = s.scratch.alloc(static_cast<size_t>(n * hp * kDimQK));
    if (!q8) return Status::oom(kOp, "scratch arena too small for the fp8 decode query");
    const TensorView q8v = TensorView::contiguous(q8, DType::kE4m3, {n, 1, hp, kDimQK});
    MLA_TRY(cuda::quantize_fp8_per_tensor({.x = dp.q, .out = q8v, .scale = s.opts.q_scale}, st));
    dp.q = q8v;
    dp.q_scale = s.opts.q_scale;
    dp.k_scale = s.opts.k_scale;
  }
  dp.kv_cache = s.kv_cache(layer);
  dp.block_table = TensorView::contiguous(s.step.dec_block_table, DType::kInt32, {n, s.step.table_width});
  dp.seqlens = TensorView::contiguous(s.step.dec_seqlens, DType::kInt32, {n});
  dp.out = TensorView::contiguous(o_lat.data, DType::kBf16, {n, 1, hp, kDimV});
  dp.lse = TensorView::contiguous(lse.data, DType::kFp32, {n, hp, 1});
  dp.format = s.opts.kv_format;
  dp.softmax_scale = s.softmax_scale;
  dp.causal = false;
  MLA_TRY(cuda::mla_decode(dp, s.step.geom, s.step.plan, s.step.dec_workspace, s.step.dec_workspace_bytes, st));

  // out = o_lat · W_UVᵀ per head: B = kv_b rows [h·(dn+dv) + dn, +dv) as an [dv, 512] weight.
  cuda_backend::GemmArgs uv;
  uv.a = o_lat.data, uv.lda = hp * kDimV, uv.stride_a = kDimV;
  uv.b = kv_b.ptr<const uint16_t>() + dn * kDimLatent, uv.ldb = kDimLatent, uv.stride_b = (dn + dv) * kDimLatent;
  uv.b_is_nk = true;
  uv.c = out.data, uv.ldc = out.stride[0], uv.stride_c = dv, uv.c_dtype = DType::kBf16;
  uv.m = n, uv.n = dv, uv.k = kDimLatent, uv.batch = static_cast<int>(nh);
  MLA_TRY(s.gemm.run("mla_attention o_lat·W_UV", uv, st));
  if (!all_rows) MLA_TRY(cuda::scatter_rows({.x = out, .rows = rows, .out = out_all}, st));
  return Status::ok();
}

// Prefill chunks: the sequences' whole cached context [Σ L, 576] → kv_b_proj → [Σ L, h, 128 + 128]
// (k_nope | v per head) → prefill_attention with k_pe read from the gathered latents (shared by heads).
Status CudaBackend::attention_expanded(int layer, const TensorView& q, const TensorView& kv_b, TensorView out) {
  State& s = *s_;
  const ModelConfig& c = s.w.config;
  const Stream st = stream();
  const int64_t t = s.step.tokens, nh = c.num_attention_heads, L = s.step.exp_ctx_rows, b = s.step.num_exp;
  const int64_t dkv = kPrefillDimNope + kPrefillDimV;
  if (s.probe) s.probe->mark(AttentionProbe::kExpand, false);
  s.scratch.reset();
  TensorView ctx = s.scratch_view(DType::kBf16, L, kDimQK);
  TensorView kv = s.scratch_view(DType::kBf16, L, nh * dkv);
  if (!ctx.defined() || !kv.defined())
    return Status::oom(kOp, "scratch arena too small to expand " + std::to_string(L) + " context rows");
  GatherCacheMlaParams gp;
  gp.kv_cache = s.kv_cache(layer);
  gp.dst = ctx;
  gp.block_table = TensorView::contiguous(s.step.exp_block_table, DType::kInt32, {b, s.step.table_width});
  gp.cu_seq_lens = TensorView::contiguous(s.step.exp_cu_ctx, DType::kInt32, {b + 1});
  gp.format = s.opts.kv_format;  // fp8: dequantized (× k_scale) to bf16 on the way out
  gp.k_scale = s.opts.k_scale;
  MLA_TRY(cuda::gather_and_maybe_dequant_cache_mla(gp, st));

  cuda_backend::GemmArgs g;
  g.a = ctx.data, g.lda = kDimQK;  // kv_c: the first 512 columns
  g.b = kv_b.data, g.ldb = kDimLatent, g.b_is_nk = true;
  g.c = kv.data, g.ldc = nh * dkv, g.c_dtype = DType::kBf16;
  g.m = L, g.n = nh * dkv, g.k = kDimLatent;
  MLA_TRY(s.gemm.run("mla_attention kv_b_proj", g, st));

  auto view3 = [](void* data, int64_t rows, int64_t heads, int64_t width, int64_t row_stride, int64_t head_stride) {
    TensorView v = TensorView::contiguous(data, DType::kBf16, {rows, heads, width});
    v.stride[0] = row_stride;
    v.stride[1] = head_stride;
    return v;
  };
  PrefillAttentionParams pp;
  pp.q = view3(q.data, t, nh, kPrefillDimQK, q.stride[0], kPrefillDimQK);
  pp.k_nope = view3(kv.data, L, nh, kPrefillDimNope, nh * dkv, dkv);
  pp.k_pe = TensorView::contiguous(ctx.ptr<uint16_t>() + kDimLatent, DType::kBf16, {L, kDimRope});
  pp.k_pe.stride[0] = kDimQK;
  pp.v = view3(kv.ptr<uint16_t>() + kPrefillDimNope, L, nh, kPrefillDimV, nh * dkv, dkv);
  pp.out = view3(out.data, t, nh, kPrefillDimV, out.stride[0], kPrefillDimV);
  pp.seqs = TensorView::contiguous(s.step.exp_seqs, DType::kInt32, {b, kPrefillSeqFields});
  pp.max_q_len = static_cast<int>(s.step.exp_max_q);
  pp.softmax_scale = s.softmax_scale;
  if (!s.probe) return cuda::prefill_attention(pp, st);
  s.probe->mark(AttentionProbe::kExpand, true);
  s.probe->mark(AttentionProbe::kPrefillKernel, false);
  MLA_TRY(cuda::prefill_attention(pp, st));
  s.probe->mark(AttentionProbe::kPrefillKernel, true);
  return Status::ok();
}

}  // namespace mla::model

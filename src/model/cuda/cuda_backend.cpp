// CudaBackend: creation (all device memory, once), the small ops, and host-side argument checks. The
// step setup is in cuda_backend_step.cpp, attention in cuda_backend_attention.cpp, MoE in cuda_backend_moe.cpp.
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/embedding.h"
#include "mla/ops/gather_rows.h"
#include "mla/ops/moe_routing.h"
#include "mla/ops/rmsnorm.h"
#include "mla/ops/rope_mla.h"
#include "mla/ops/silu_mul.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "cuda_backend";

Status check_config(const ModelConfig& c, const CudaBackendOptions& o) {
  if (c.kv_lora_rank != kDimLatent || c.qk_rope_head_dim != kDimRope)
    return Status::unsupported(kOp, "the CUDA backend needs kv_lora_rank 512 and qk_rope_head_dim 64 (mla_decode's "
                                    "geometry), got " + std::to_string(c.kv_lora_rank) + " / " +
                                    std::to_string(c.qk_rope_head_dim));
  if (c.num_attention_heads < 1 || c.num_attention_heads > 128)
    return Status::unsupported(kOp, "num_attention_heads " + std::to_string(c.num_attention_heads) + " (1..128 run)");
  if (c.n_routed_experts > kMoeMaxExperts || c.num_experts_per_tok > kMoeMaxTopK)
    return Status::unsupported(kOp, "MoE routing runs E <= 256 and top-k <= 16, got E " +
                                        std::to_string(c.n_routed_experts) + ", k " +
                                        std::to_string(c.num_experts_per_tok));
  if (c.qk_nope_head_dim % 8 != 0 || c.v_head_dim % 8 != 0 || c.hidden_size % 8 != 0)
    return Status::unsupported(kOp, "qk_nope_head_dim, v_head_dim and hidden_size must be multiples of 8");
  if (o.kv_format != KvFormat::kBf16 && o.kv_format != KvFormat::kFp8 && o.kv_format != KvFormat::kFp8Ds)
    return Status::unsupported(kOp, std::string("kv cache format ") + std::string(kv_format_name(o.kv_format)) +
                                    ": the CUDA backend runs bf16, fp8 and fp8_ds");
  if (!(o.k_scale > 0.f && o.k_scale < 3e38f) || !(o.q_scale > 0.f && o.q_scale < 3e38f))
    return Status::invalid(kOp, "k_scale and q_scale must be finite and > 0, got " + std::to_string(o.k_scale) + ", " +
                                    std::to_string(o.q_scale));
  if (o.num_pages < 1 || o.num_pages > (int64_t{1} << 30) || o.max_batch_tokens < 1)
    return Status::invalid(kOp, "num_pages and max_batch_tokens must be positive");
  return Status::ok();
}

// The fixed step-input block (step_io.h), sized for the worst step: every per-token array at
// max_batch_tokens rows, and block tables of max_pages_per_seq pages for max_num_seqs rows -- or for every
// token row when that still fits 32 MB per table (forced absorbed attention over a whole prefill).
Status init_step_io(CudaBackend::State* s) {
  CudaBackendOptions& o = s->opts;
  const int64_t max_pos_pages = (s->w.config.max_position_embeddings + kDecodePageSize - 1) / kDecodePageSize;
  if (o.max_pages_per_seq <= 0) o.max_pages_per_seq = std::min<int64_t>(max_pos_pages, o.num_pages);
  if (o.max_num_seqs < 1) return Status::invalid(kOp, "max_num_seqs must be >= 1");
  const int64_t t = o.max_batch_tokens, w = o.max_pages_per_seq;
  const int64_t table_rows = std::min<int64_t>(t, std::max<int64_t>(o.max_num_seqs, (int64_t{32} << 20) / (w * 4)));
  const int64_t per_token = 4 + 4 + 8 + 4 + 4 + 4 + 4 * 4 + 4 + static_cast<int64_t>(sizeof(SamplingRow));
  const size_t bytes = static_cast<size_t>(t * per_token + 2 * table_rows * w * 4 + 16 * 256);
  MLA_CUDA_TRY(kOp, s->io.init(bytes, t));
  return Status::ok();
}

}  // namespace

TensorView CudaBackend::State::kv_cache(int layer) const {
  const int64_t per_layer = opts.num_pages * kDecodePageSize * kv_bytes_per_token(opts.kv_format);
  return TensorView::contiguous(static_cast<uint8_t*>(kv_pool) + layer * per_layer, kv_cache_dtype(opts.kv_format),
                                {opts.num_pages, kDecodePageSize, kv_token_elems(opts.kv_format)});
}

TensorView CudaBackend::State::scratch_view(DType dtype, int64_t rows, int64_t cols) {
  void* p = scratch.alloc(static_cast<size_t>(rows * cols) * dtype_size(dtype));
  if (!p) return TensorView{};
  return TensorView::contiguous(p, dtype, {rows, cols});
}

CudaBackend::State::~State() {
  if (stream) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  for (void* p : allocations) cudaFree(p);
  if (moe_error_host) cudaFreeHost(const_cast<int32_t*>(moe_error_host));
}

CudaBackend::CudaBackend(std::unique_ptr<State> s) : s_(std::move(s)) {}
CudaBackend::~CudaBackend() = default;

Status CudaBackend::create(const ModelWeights& host, const CudaBackendOptions& opts,
                           std::unique_ptr<CudaBackend>* out) {
  MLA_TRY(validate_config(host.config));
  MLA_TRY(check_config(host.config, opts));
  const ModelConfig& c = host.config;
  auto s = std::make_unique<State>();
  s->opts = opts;
  s->rope = make_rope_table(c);
  s->softmax_scale = static_cast<float>(c.softmax_scale());
  for (int h : {16, 32, 64, 128})
    if (s->padded_heads == 0 && h >= c.num_attention_heads) s->padded_heads = h;
  int dev = 0;
  MLA_CUDA_TRY(kOp, cudaGetDevice(&dev));
  MLA_CUDA_TRY(kOp, cudaDeviceGetAttribute(&s->num_sms, cudaDevAttrMultiProcessorCount, dev));
  MLA_CUDA_TRY(kOp, cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  MLA_TRY(upload_weights(host, s.get()));

  const size_t kv_bytes =
      static_cast<size_t>(c.num_hidden_layers * opts.num_pages) * kDecodePageSize * kv_bytes_per_token(opts.kv_format);
  MLA_TRY(alloc_tracked(s.get(), kOp, kv_bytes, &s->kv_pool, "the KV cache"));
  void* p = nullptr;
  MLA_TRY(alloc_tracked(s.get(), kOp, opts.activation_bytes, &p, "the activation arena"));
  s->act.init(p, opts.activation_bytes);
  MLA_TRY(alloc_tracked(s.get(), kOp, opts.scratch_bytes, &p, "the scratch arena"));
  s->scratch.init(p, opts.scratch_bytes);
  // The GEMM autotuner flushes L2 by reading the scratch arena (never writing it; nothing of it lives across ops).
  cuda_backend::GemmTuneOptions tune;
  int l2 = 0;
  MLA_CUDA_TRY(kOp, cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  tune.flush = p, tune.flush_bytes = std::min(opts.scratch_bytes, 2 * static_cast<size_t>(l2));
  MLA_TRY(alloc_tracked(s.get(), kOp, opts.gemm_workspace_bytes, &p, "the cuBLASLt workspace"));
  MLA_TRY(s->gemm.init(p, opts.gemm_workspace_bytes, tune));
  const int64_t small_rows = std::min<int64_t>(opts.max_batch_tokens, cuda_backend::kSmallMMaxRows);
  MLA_TRY(alloc_tracked(s.get(), kOp, static_cast<size_t>(cuda_backend::small_m_table_bytes(small_rows)), &p,
                        "small-m GEMM tables"));
  MLA_TRY(cuda_backend::init_small_m_tables(small_rows, p, tune.flush, tune.flush_bytes, &s->small_m));
  MLA_TRY(alloc_tracked(s.get(), kOp, s->rope.inv_freq.size() * sizeof(float), &p, "the RoPE table"));
  s->inv_freq = static_cast<float*>(p);
  MLA_CUDA_TRY(kOp, cudaMemcpy(s->inv_freq, s->rope.inv_freq.data(), s->rope.inv_freq.size() * sizeof(float),
                               cudaMemcpyHostToDevice));
  s->pages.init(opts.num_pages);
  MLA_TRY(init_step_io(s.get()));
  out->reset(new CudaBackend(std::move(s)));
  return Status::ok();
}

const ModelWeights& CudaBackend::weights() const { return s_->w; }
Stream CudaBackend::stream() const { return reinterpret_cast<Stream>(s_->stream); }
int64_t CudaBackend::cached_tokens(int64_t seq_id) const { return s_->pages.committed(seq_id); }
int64_t CudaBackend::free_pages() const { return s_->pages.free_pages(); }
void CudaBackend::release_sequence(int64_t seq_id) { s_->pages.release(seq_id); }

TensorView CudaBackend::alloc(int64_t rows, int64_t cols) {
  void* p = s_->act.alloc(static_cast<size_t>(rows * cols) * 2);
  // Exhaustion gives a view with null data: the op it is passed to fails, naming itself and the view.
  return TensorView::contiguous(p, DType::kBf16, {rows, cols});
}

TensorView CudaBackend::alloc_fp32(int64_t rows, int64_t cols) {
  void* p = s_->act.alloc(static_cast<size_t>(rows * cols) * 4);
  return TensorView::contiguous(p, DType::kFp32, {rows, cols});
}

Status CudaBackend::embed(TensorView out) {
  if (!s_->step.valid) return Status::invalid("embed", "no step begun");
  const EmbeddingParams p{.table = s_->w.embed_tokens,
                          .token_ids = TensorView::contiguous(s_->step.token_ids, DType::kInt32, {s_->step.tokens}),
                          .out = out};
  return cuda::embedding(p, stream());
}

Status CudaBackend::rmsnorm(const TensorView& x, const TensorView& w, float eps, TensorView out) {
  return cuda::rmsnorm({.x = x, .w = w, .out = out, .eps = eps}, stream());
}

Status CudaBackend::add_rmsnorm(const TensorView& x, TensorView residual, const TensorView& w, float eps,
                                TensorView out) {
  return cuda::add_rmsnorm({.x = x, .residual = residual, .w = w, .out = out, .eps = eps}, stream());
}

Status CudaBackend::linear(const TensorView& x, const TensorView& w, TensorView out) {
  constexpr const char* op = "linear";
  if (!(w.rank == 2 && w.dtype == DType::kBf16 && w.is_contiguous() && w.data))
    return Status::invalid(op, "w: expected contiguous bf16[n, k], got " + w.str());
  const bool x_ok = x.rank == 2 && x.dtype == DType::kBf16 && x.data && x.stride[1] == 1 && x.shape[1] == w.shape[1] &&
                    x.stride[0] >= x.shape[1];
  const bool out_ok = out.rank == 2 && (out.dtype == DType::kBf16 || out.dtype == DType::kFp32) && out.data &&
                      out.stride[1] == 1 && out.shape[0] == x.shape[0] && out.shape[1] == w.shape[0] &&
                      out.stride[0] >= out.shape[1];
  if (!x_ok || !out_ok)
    return Status::invalid(op, "x " + x.str() + " · w " + w.str() + "ᵀ → out " + out.str() +
                                   ": expected bf16 x [t, k] and bf16|fp32 out [t, n] with unit column strides");
  cuda_backend::GemmArgs g;
  g.a = x.data, g.lda = x.stride[0];
  g.b = w.data, g.ldb = w.shape[1], g.b_is_nk = true;
  g.c = out.data, g.ldc = out.stride[0], g.c_dtype = out.dtype;
  g.m = x.shape[0], g.n = w.shape[0], g.k = w.shape[1];
  // Decode-size products: cuBLASLt or the grouped kernel, whichever measured faster for the shape.
  return cuda_backend::small_m_run(s_->small_m, x, w, GroupedEpilogue::kStore, out, stream(),
                                   [&] { return s_->gemm.run(op, g, stream()); });
}

Status CudaBackend::rope(TensorView q, TensorView latent) {
  if (!s_->step.valid) return Status::invalid("rope", "no step begun");
  const ModelConfig& c = s_->w.config;
  const RopeMlaParams p{.q = q,
                        .latent = latent,
                        .positions = TensorView::contiguous(s_->step.positions, DType::kInt32, {s_->step.tokens}),
                        .inv_freq = TensorView::contiguous(s_->inv_freq, DType::kFp32,
                                                           {static_cast<int64_t>(s_->rope.inv_freq.size())}),
                        .num_heads = static_cast<int>(c.num_attention_heads),
                        .qk_nope_dim = static_cast<int>(c.qk_nope_head_dim),
                        .attention_factor = s_->rope.attention_factor};
  if (latent.rank != 2 || latent.shape[1] != c.latent_dim())
    return Status::invalid("rope", "latent: expected [t, " + std::to_string(c.latent_dim()) + "], got " + latent.str());
  return cuda::rope_mla(p, stream());
}

Status CudaBackend::silu_mul(const TensorView& gate, const TensorView& up, TensorView out) {
  return cuda::silu_mul({.gate = gate, .up = up, .out = out}, stream());
}

Status CudaBackend::gather_logit_rows(const TensorView& x, TensorView out) {
  if (!s_->step.valid) return Status::invalid("gather_logit_rows", "no step begun");
  const int64_t n = static_cast<int64_t>(s_->step.batch.logits_rows.size());
  if (x.rank != 2 || x.shape[0] != s_->step.tokens)
    return Status::invalid("gather_logit_rows",
                           "x: expected [" + std::to_string(s_->step.tokens) + ", cols], got " + x.str());
  const RowCopyParams p{.x = x, .rows = TensorView::contiguous(s_->step.logits_rows, DType::kInt32, {n}), .out = out};
  return cuda::gather_rows(p, stream());
}

Status CudaBackend::download(const TensorView& v, std::vector<float>* out) const {
  constexpr const char* op = "cuda_backend download";
  if (v.rank != 2 || !v.data || v.stride[1] != 1 || (v.dtype != DType::kBf16 && v.dtype != DType::kFp32))
    return Status::invalid(op, "expected a 2-d bf16|fp32 device view, got " + v.str());
  const size_t es = dtype_size(v.dtype), rows = static_cast<size_t>(v.shape[0]), cols = static_cast<size_t>(v.shape[1]);
  std::vector<uint8_t> raw(rows * cols * es);
  MLA_CUDA_TRY(op, cudaStreamSynchronize(s_->stream));
  MLA_TRY(s_->check_moe_error());
  if (!raw.empty())
    MLA_CUDA_TRY(op, cudaMemcpy2D(raw.data(), cols * es, v.data, static_cast<size_t>(v.stride[0]) * es, cols * es, rows,
                                  cudaMemcpyDeviceToHost));
  out->resize(rows * cols);
  for (size_t i = 0; i < out->size(); ++i) {
    if (v.dtype == DType::kFp32) {
      std::memcpy(&(*out)[i], &raw[i * 4], 4);
    } else {
      uint16_t b;
      std::memcpy(&b, &raw[i * 2], 2);
      (*out)[i] = bf16_to_float(b);
    }
  }
  return Status::ok();
}

}  // namespace mla::model

// Start-up memory sizing: the runner profiles a max-size step on a provisional (generous) activation arena
// and a small KV pool, then re-allocates both: the arena at the measured peak, the pool from what is left.
#include <algorithm>
#include <string>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "cuda_backend resize_cache";

}  // namespace

void free_tracked(CudaBackend::State* s, void* p) {
  if (!p) return;
  cudaFree(p);
  s->allocations.erase(std::remove(s->allocations.begin(), s->allocations.end(), p), s->allocations.end());
}

Status alloc_tracked(CudaBackend::State* s, const char* op, size_t bytes, void** out, const char* what) {
  const cudaError_t e = cudaMalloc(out, bytes);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *out = nullptr;
    return Status::oom(op, std::string("cudaMalloc of ") + std::to_string(bytes) + " bytes for " + what + ": " +
                               cudaGetErrorString(e));
  }
  s->allocations.push_back(*out);
  return Status::ok();
}

size_t CudaBackend::activation_peak() const { return s_->act.peak(); }
size_t CudaBackend::activation_capacity() const { return s_->act.capacity(); }
int64_t CudaBackend::num_pages() const { return s_->opts.num_pages; }
size_t CudaBackend::kv_cache_bytes() const {
  return static_cast<size_t>(s_->w.config.num_hidden_layers * s_->opts.num_pages) * kDecodePageSize *
         kv_bytes_per_token(s_->opts.kv_format);
}

Status CudaBackend::resize_cache(size_t activation_bytes, const std::function<int64_t(size_t)>& num_pages) {
  State& s = *s_;
  if (s.pages.free_pages() != s.opts.num_pages)
    return Status::invalid(kOp, std::to_string(s.opts.num_pages - s.pages.free_pages()) + " KV pages still held");
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s.stream));
  free_tracked(&s, s.kv_pool);
  s.kv_pool = nullptr;
  free_tracked(&s, s.act.base());
  s.act.init(nullptr, 0);
  const int64_t pages = num_pages(activation_bytes);
  if (pages < 1 || pages > (int64_t{1} << 30))
    return Status::oom(kOp, "no room for the KV cache after a " + std::to_string(activation_bytes >> 20) +
                                " MB activation arena (" + std::to_string(pages) + " pages)");
  s.opts.num_pages = pages;
  void* p = nullptr;
  MLA_TRY(alloc_tracked(&s, kOp, activation_bytes, &p, "the activation arena"));
  s.act.init(p, activation_bytes);
  s.opts.activation_bytes = activation_bytes;
  MLA_TRY(alloc_tracked(&s, kOp, kv_cache_bytes(), &s.kv_pool, "the KV cache"));
  s.pages.init(pages);
  return Status::ok();
}

}  // namespace mla::model

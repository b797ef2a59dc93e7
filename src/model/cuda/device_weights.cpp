// Weight upload: every tensor the model lists, converted to bf16 on the host (fp32 checkpoints round
// to nearest even) and copied into one device block, 256-byte aligned per tensor.
#include <cstring>
#include <vector>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/half.h"

namespace mla::model {

Status upload_weights(const ModelWeights& host, CudaBackend::State* s) {
  constexpr const char* kOp = "cuda_backend upload";
  ModelWeights d = host;
  d.storage.clear();  // the device copy keeps no host memory alive
  std::vector<WeightSpec> specs = list_weights(&d);
  size_t total = 0;
  for (const auto& sp : specs) {
    MLA_TRY(check_host_weight(sp, kOp));
    total += (static_cast<size_t>(sp.slot->numel()) * 2 + 255) / 256 * 256;
  }
  void* block = nullptr;
  MLA_CUDA_TRY(kOp, cudaMalloc(&block, total == 0 ? 256 : total));
  s->allocations.push_back(block);
  size_t off = 0;
  std::vector<uint16_t> buf;
  for (const auto& sp : specs) {
    TensorView& v = *sp.slot;
    const size_t n = static_cast<size_t>(v.numel());
    const void* src = v.data;
    if (v.dtype == DType::kFp32) {
      buf.resize(n);
      const float* f = v.ptr<const float>();
      for (size_t i = 0; i < n; ++i) buf[i] = float_to_bf16(f[i]);
      src = buf.data();
    }
    uint8_t* dst = static_cast<uint8_t*>(block) + off;
    MLA_CUDA_TRY(kOp, cudaMemcpy(dst, src, n * 2, cudaMemcpyHostToDevice));
    v.data = dst;
    v.dtype = DType::kBf16;
    off += (n * 2 + 255) / 256 * 256;
  }
  if (host.config.tie_word_embeddings) d.lm_head = d.embed_tokens;
  if (!d.lm_head.defined() || d.lm_head.dtype != DType::kBf16 || d.lm_head.data == host.lm_head.data)
    return Status::invalid(kOp, "lm_head is not set (or was not uploaded)");
  s->w = std::move(d);
  return Status::ok();
}

}  // namespace mla::model

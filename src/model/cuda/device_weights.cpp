// Weight upload: every tensor the model lists, converted to bf16 on the host (fp32 checkpoints round
// to nearest even) and copied into one device block, 256-byte aligned per tensor, except where the MoE
// wants tensors side by side:
//   - each MoE layer's routed experts are stacked, [E, 2I, H] (expert e's gate_proj rows, then its up_proj
//     rows) and [E, H, I] (down_proj), so one grouped GEMM per projection covers every expert
//     (grouped_gemm's kSiluMul reads the gate|up stack);
//   - the shared experts' gate_proj and up_proj are adjacent, one [2·Is, H] GEMM.
// The expert views (host types unchanged) point into those stacks, so the per-expert path reads the same
// bytes. A 256-byte tail holds the MoE error flag (moe_align), zeroed here.
#include <cstring>
#include <unordered_map>
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
  for (const auto& sp : specs) MLA_TRY(check_host_weight(sp, kOp));

  // Placement (byte offsets in the block).
  std::unordered_map<const TensorView*, size_t> at;
  size_t total = 0;
  auto reserve = [&total](size_t bytes) {
    const size_t o = total;
    total += (bytes + 255) / 256 * 256;
    return o;
  };
  for (LayerWeights& l : d.layers) {
    if (!l.is_moe) continue;
    if (!l.moe.experts.empty()) {
      const size_t mat = static_cast<size_t>(l.moe.experts[0].gate_proj.numel()) * 2;  // I · H bf16
      for (const MlpWeights& e : l.moe.experts)
        if (size_t(e.gate_proj.numel()) * 2 != mat || size_t(e.up_proj.numel()) * 2 != mat ||
            size_t(e.down_proj.numel()) * 2 != mat)
          return Status::invalid(kOp, "MoE experts of one layer differ in size: cannot stack them");
      const size_t n = l.moe.experts.size(), gate_up = reserve(2 * n * mat), down = reserve(n * mat);
      for (size_t e = 0; e < n; ++e) {
        at[&l.moe.experts[e].gate_proj] = gate_up + 2 * e * mat;
        at[&l.moe.experts[e].up_proj] = gate_up + (2 * e + 1) * mat;
        at[&l.moe.experts[e].down_proj] = down + e * mat;
      }
    }
    if (l.moe.shared.gate_proj.defined() && l.moe.shared.up_proj.defined()) {
      const size_t g = static_cast<size_t>(l.moe.shared.gate_proj.numel()) * 2;
      const size_t both = reserve(2 * g);
      at[&l.moe.shared.gate_proj] = both;
      at[&l.moe.shared.up_proj] = both + g;
    }
  }
  for (const auto& sp : specs)
    if (!at.count(sp.slot)) at[sp.slot] = reserve(static_cast<size_t>(sp.slot->numel()) * 2);

  void* block = nullptr;
  MLA_CUDA_TRY(kOp, cudaMalloc(&block, total));
  s->allocations.push_back(block);
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
    uint8_t* dst = static_cast<uint8_t*>(block) + at.at(sp.slot);
    MLA_CUDA_TRY(kOp, cudaMemcpy(dst, src, n * 2, cudaMemcpyHostToDevice));
    v.data = dst;
    v.dtype = DType::kBf16;
  }
  void* flag = nullptr;
  void* flag_dev = nullptr;
  MLA_CUDA_TRY(kOp, cudaHostAlloc(&flag, sizeof(int32_t), cudaHostAllocMapped));
  s->moe_error_host = static_cast<int32_t*>(flag);
  *s->moe_error_host = 0;
  MLA_CUDA_TRY(kOp, cudaHostGetDevicePointer(&flag_dev, flag, 0));
  s->moe_error = static_cast<int32_t*>(flag_dev);
  if (host.config.tie_word_embeddings) d.lm_head = d.embed_tokens;
  if (!d.lm_head.defined() || d.lm_head.dtype != DType::kBf16 || d.lm_head.data == host.lm_head.data)
    return Status::invalid(kOp, "lm_head is not set (or was not uploaded)");
  s->w = std::move(d);
  return Status::ok();
}

}  // namespace mla::model

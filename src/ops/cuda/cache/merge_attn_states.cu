// Launcher of merge_attn_states: validate, check 16-byte alignment of the vectorized operands, launch.
#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"
#include "mla/ops/merge_attn_states.h"
#include "ops/common/cache_args.h"
#include "ops/cuda/cache/merge_attn_states_kernel.cuh"

namespace mla::cuda {
namespace {

template <class T>
Status launch(const cache::MergeKernelParams& kp, Stream stream) {
  int64_t blocks = (kp.total_packs + 255) / 256;
  if (blocks > (int64_t{1} << 20)) blocks = int64_t{1} << 20;  // grid-stride beyond ~268M packs
  cache::merge_attn_states_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(kp);
  MLA_CUDA_TRY_LAUNCH("merge_attn_states");
  return Status::ok();
}

}  // namespace

Status merge_attn_states(const MergeAttnStatesParams& p, Stream stream) {
  MLA_TRY(validate_merge_attn_states(p));
  for (const TensorView* t : {&p.out, &p.out_a, &p.out_b}) {
    if (!cache::aligned16(t->data))
      return Status::invalid("merge_attn_states", "out, out_a and out_b must be 16-byte aligned, got " + t->str());
  }
  const cache::MergeKernelParams kp{
      .out = p.out.data,
      .lse = p.lse.defined() ? p.lse.ptr<float>() : nullptr,
      .out_a = p.out_a.data,
      .lse_a = p.lse_a.ptr<const float>(),
      .out_b = p.out_b.data,
      .lse_b = p.lse_b.ptr<const float>(),
      .n_tokens = p.out.shape[0],
      .n_heads = p.out.shape[1],
      .packs_per_row = p.out.shape[2] / 8,
      .total_packs = p.out.numel() / 8,
  };
  if (kp.total_packs == 0) return Status::ok();
  switch (p.out.dtype) {
    case DType::kBf16: return launch<cache::Bf16>(kp, stream);
    case DType::kFp16: return launch<cache::Fp16>(kp, stream);
    default: return launch<cache::Fp32>(kp, stream);
  }
}

}  // namespace mla::cuda

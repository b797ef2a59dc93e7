// merge_attn_states kernel + launcher: one thread per 8 consecutive outputs of one (token, head), so
// every access is a 16-byte (bf16/fp16) or 2 x 16-byte (fp32) vector; the lse pair is re-read by the
// head_dim / 8 threads of a row, which hit the same L1 line.
#include <cuda_runtime.h>

#include "mla/core/cuda_check.h"
#include "mla/ops/merge_attn_states.h"
#include "ops/common/cache_args.h"
#include "ops/common/cache_codec.h"
#include "ops/common/merge_weights.h"
#include "ops/cuda/cache/vec.cuh"

namespace mla::cuda {
namespace {

struct MergeKernelParams {
  void* out;          // [n, h, d] T
  float* lse;         // [h, n] or null
  const void* out_a;  // [n, h, d] T
  const float* lse_a; // [h, n]
  const void* out_b;  // [n, h, d] T
  const float* lse_b; // [h, n]
  int64_t n_tokens;
  int64_t n_heads;
  int64_t packs_per_row;  // d / 8
  int64_t total_packs;    // n * h * d / 8
};

template <class T>
__global__ void __launch_bounds__(256) merge_attn_states_kernel(const __grid_constant__ MergeKernelParams p) {
  using R = typename T::raw;
  using P = cache::Pack8<R>;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.total_packs;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / p.packs_per_row;  // token * n_heads + head
    const int64_t token = row / p.n_heads, head = row % p.n_heads;
    const int64_t l = head * p.n_tokens + token;
    const merge::Weights w = merge::weights(p.lse_a[l], p.lse_b[l]);
    P a{}, b{}, o;
    if (w.use_a) a = cache::load8(static_cast<const R*>(p.out_a) + i * 8);
    if (w.use_b) b = cache::load8(static_cast<const R*>(p.out_b) + i * 8);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float va = w.use_a ? cache::to_float(T{}, a.v[j]) : 0.f;
      const float vb = w.use_b ? cache::to_float(T{}, b.v[j]) : 0.f;
      o.v[j] = cache::from_float(T{}, merge::combine(w, va, vb));
    }
    cache::store_bytes<sizeof(P)>(static_cast<R*>(p.out) + i * 8, &o);
    if (p.lse && i % p.packs_per_row == 0) p.lse[l] = w.lse;
  }
}

template <class T>
Status launch(const MergeKernelParams& kp, Stream stream) {
  int64_t blocks = (kp.total_packs + 255) / 256;
  if (blocks > (int64_t{1} << 20)) blocks = int64_t{1} << 20;  // grid-stride beyond ~268M packs
  merge_attn_states_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(kp);
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
  const MergeKernelParams kp{
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

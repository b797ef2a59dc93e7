// rope_mla: one block per token row; each thread rotates 4 consecutive pairs (8 bf16 values, one 16-byte
// access) of one head's rotary part, or of the latent row's k_pe.
#include "mla/ops/rope_mla.h"

#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "rope_mla";
constexpr int kPairs = kDimRope / 2;       // 32 frequencies
constexpr int kChunksPerHead = kDimRope / 8;  // 8 chunks of 4 pairs

struct RopeKernelParams {
  __nv_bfloat16* q;       // [t, ld_q]: head j's rotary values at j·head_dim + nope
  __nv_bfloat16* latent;  // [t, ld_latent]: k_pe at rope_offset
  const int32_t* positions;
  const float* inv_freq;  // [32]
  int64_t ld_q, ld_latent;
  int num_heads, head_dim, nope, latent_rope_offset;
  float attention_factor;
};

__global__ void rope_kernel(const __grid_constant__ RopeKernelParams p) {
  const int64_t row = blockIdx.x;
  const float pos = static_cast<float>(p.positions[row]);
  const int chunks = (p.num_heads + 1) * kChunksPerHead;
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    const int head = c / kChunksPerHead, k = c % kChunksPerHead;
    __nv_bfloat16* x = head < p.num_heads ? p.q + row * p.ld_q + int64_t(head) * p.head_dim + p.nope
                                          : p.latent + row * p.ld_latent + p.latent_rope_offset;
    x += k * 8;
    float v[8];
    model_ops::load8(x, v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      // The float32 angle, as the reference computes it; sincosf is accurate over the full range
      // (no fast-math), so large positions keep their precision.
      const float angle = p.inv_freq[k * 4 + i] * pos;
      float s, co;
      sincosf(angle, &s, &co);
      co *= p.attention_factor;
      s *= p.attention_factor;
      const float x0 = v[2 * i], x1 = v[2 * i + 1];
      v[2 * i] = x0 * co - x1 * s;
      v[2 * i + 1] = x0 * s + x1 * co;
    }
    model_ops::store8(x, v);
  }
}

}  // namespace

Status rope_mla(const RopeMlaParams& p, Stream stream) {
  if (p.num_heads < 1 || p.qk_nope_dim < 0 || p.qk_nope_dim % 8 != 0)
    return Status::invalid(kOp, "num_heads " + std::to_string(p.num_heads) + " / qk_nope_dim " +
                                    std::to_string(p.qk_nope_dim) + ": need >= 1 heads and nope % 8 == 0");
  const int64_t head_dim = p.qk_nope_dim + kDimRope;
  MLA_TRY(model_ops::check_rows_view(kOp, "q", p.q, {DType::kBf16}, -1, p.num_heads * head_dim));
  const int64_t t = p.q.shape[0];
  MLA_TRY(model_ops::check_rows_view(kOp, "latent", p.latent, {DType::kBf16}, t, -1));
  if (p.latent.shape[1] < kDimRope) return Status::invalid(kOp, "latent rows narrower than 64: " + p.latent.str());
  MLA_TRY(model_ops::check_array(kOp, "positions", p.positions, DType::kInt32, t));
  MLA_TRY(model_ops::check_array(kOp, "inv_freq", p.inv_freq, DType::kFp32, kPairs));
  if (t == 0) return Status::ok();
  const RopeKernelParams kp{.q = p.q.ptr<__nv_bfloat16>(),
                            .latent = p.latent.ptr<__nv_bfloat16>(),
                            .positions = p.positions.ptr<const int32_t>(),
                            .inv_freq = p.inv_freq.ptr<const float>(),
                            .ld_q = p.q.stride[0],
                            .ld_latent = p.latent.stride[0],
                            .num_heads = p.num_heads,
                            .head_dim = static_cast<int>(head_dim),
                            .nope = p.qk_nope_dim,
                            .latent_rope_offset = static_cast<int>(p.latent.shape[1] - kDimRope),
                            .attention_factor = p.attention_factor};
  const int chunks = (p.num_heads + 1) * kChunksPerHead;
  const int threads = chunks >= 256 ? 256 : (chunks + 31) / 32 * 32;
  rope_kernel<<<static_cast<unsigned>(t), threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

// prefill_attention on sm_90 with mma.sync (m16n8k16, bf16 in, fp32 accumulate), FlashAttention-2 style:
// a CTA owns 64 query rows of one head of one sequence (4 warps × 16 rows); Q stays in registers as A
// fragments; K (nope | rope, 192 wide) and V (transposed, so its B fragments are contiguous pairs) go
// through shared memory 64 keys at a time; the softmax is online in base 2 (scale folded with log2 e);
// key tiles past the tile's last visible key are never loaded.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, c = lane % 4):
//   A 16×16 row : a0 (g, 2c..2c+1)  a1 (g+8, 2c..)  a2 (g, 2c+8..)  a3 (g+8, 2c+8..)
//   B 16×8  col : b0 (k 2c..2c+1, n g)  b1 (k 2c+8.., n g)
//   C 16×8      : c0 c1 (g, 2c..2c+1)  c2 c3 (g+8, 2c..2c+1)
// Two adjacent C tiles of S (keys 0-7, 8-15) are exactly the A fragment of P for one k-step of P·V.
#include "mla/ops/prefill_attention.h"

#include <cuda_bf16.h>

#include "mla/core/cuda_check.h"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "prefill_attention";
constexpr int kTileQ = 64;
constexpr int kTileK = 64;
constexpr int kWarps = kTileQ / 16;
constexpr int kThreads = kWarps * 32;
constexpr int kQkSteps = kPrefillDimQK / 16;   // 12 k-steps of Q·Kᵀ
constexpr int kKeyTiles = kTileK / 8;          // 8 n-tiles of S
constexpr int kVTiles = kPrefillDimV / 8;      // 16 n-tiles of O
// Row pitches padded by 16 bytes: the 8 rows × 4 pairs a fragment load touches fall in 32 distinct banks.
constexpr int kKPitch = kPrefillDimQK + 8;  // sK[key][d]
constexpr int kVPitch = kTileK + 8;         // sVt[d][key]
constexpr int kNopeChunks = kPrefillDimNope / 8, kRopeChunks = kPrefillDimRope / 8, kVChunks = kPrefillDimV / 8;
static_assert(kPrefillDimQK % 16 == 0 && kTileK % 16 == 0 && kPrefillDimV % 8 == 0);
static_assert((kTileK * kKPitch + kPrefillDimV * kVPitch) * 2 <= 48 * 1024, "static shared memory limit");

struct PrefillKernelParams {
  const __nv_bfloat16* q;       // [tq, h, 192]
  const __nv_bfloat16* k_nope;  // [tk, h, 128]
  const __nv_bfloat16* k_pe;    // [tk, 64]
  const __nv_bfloat16* v;       // [tk, h, 128]
  __nv_bfloat16* out;           // [tq, h, 128]
  float* lse;                   // [h, tq] or null
  const int32_t* seqs;          // [b, 4]
  int64_t q_row, kn_row, kn_head, pe_row, v_row, v_head, o_row, o_head, tq;
  float scale_log2;  // softmax_scale · log2(e)
};

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t ld32(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo: the lower column
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xFFFFFFFFu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xFFFFFFFFu, x, 1);
  return x + __shfl_xor_sync(0xFFFFFFFFu, x, 2);
}

__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(const __grid_constant__ PrefillKernelParams p) {
  __shared__ __align__(16) __nv_bfloat16 sK[kTileK * kKPitch];
  __shared__ __align__(16) __nv_bfloat16 sVt[kPrefillDimV * kVPitch];
  const int head = blockIdx.y, b = blockIdx.z;
  const int q_start = p.seqs[b * 4], q_len = p.seqs[b * 4 + 1], k_start = p.seqs[b * 4 + 2], k_len = p.seqs[b * 4 + 3];
  const int q0 = blockIdx.x * kTileQ;
  if (q0 >= q_len) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int causal_offset = k_len - q_len;  // query i sees keys j <= causal_offset + i
  const int r_lo = q0 + warp * 16 + g, r_hi = r_lo + 8;
  const bool lo_ok = r_lo < q_len, hi_ok = r_hi < q_len;

  // Q as A fragments for all 12 k-steps (rows past q_len are zeros and are never stored).
  uint32_t qf[kQkSteps][4];
  {
    const __nv_bfloat16* qlo = p.q + (int64_t(q_start) + (lo_ok ? r_lo : 0)) * p.q_row + int64_t(head) * kPrefillDimQK;
    const __nv_bfloat16* qhi = p.q + (int64_t(q_start) + (hi_ok ? r_hi : 0)) * p.q_row + int64_t(head) * kPrefillDimQK;
#pragma unroll
    for (int ks = 0; ks < kQkSteps; ++ks) {
      const int col = ks * 16 + 2 * c;
      qf[ks][0] = lo_ok ? ld32(qlo + col) : 0u;
      qf[ks][1] = hi_ok ? ld32(qhi + col) : 0u;
      qf[ks][2] = lo_ok ? ld32(qlo + col + 8) : 0u;
      qf[ks][3] = hi_ok ? ld32(qhi + col + 8) : 0u;
    }
  }

  float o[kVTiles][4];
#pragma unroll
  for (int n = 0; n < kVTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.f, l_hi = 0.f;  // running max (base-2 units), partial sums
  const int last_row = min(q0 + kTileQ, q_len) - 1;
  const int k_end = min(k_len, causal_offset + last_row + 1);  // keys any row of this tile sees

  for (int kt = 0; kt < k_end; kt += kTileK) {
    __syncthreads();  // the previous tile's fragments have been read
    // K tile: per key 16 nope chunks then 8 rope chunks of 8 values; keys past k_len are zeros.
    for (int i = threadIdx.x; i < kTileK * (kNopeChunks + kRopeChunks); i += kThreads) {
      const int key = i / (kNopeChunks + kRopeChunks), ch = i % (kNopeChunks + kRopeChunks), j = kt + key;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (j < k_len) {
        const int64_t row = int64_t(k_start) + j;
        const __nv_bfloat16* src = ch < kNopeChunks ? p.k_nope + row * p.kn_row + int64_t(head) * p.kn_head + ch * 8
                                                    : p.k_pe + row * p.pe_row + (ch - kNopeChunks) * 8;
        val = *reinterpret_cast<const uint4*>(src);
      }
      *reinterpret_cast<uint4*>(&sK[key * kKPitch + ch * 8]) = val;
    }
    // V tile, transposed into sVt[d][key]; keys past k_len are zeros (P is 0 there, and 0 · NaN would not be).
    for (int i = threadIdx.x; i < kTileK * kVChunks; i += kThreads) {
      const int key = i / kVChunks, ch = i % kVChunks, j = kt + key;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (j < k_len) val = *reinterpret_cast<const uint4*>(p.v + (int64_t(k_start) + j) * p.v_row + int64_t(head) * p.v_head + ch * 8);
      const __nv_bfloat16* e = reinterpret_cast<const __nv_bfloat16*>(&val);
#pragma unroll
      for (int d = 0; d < 8; ++d) sVt[(ch * 8 + d) * kVPitch + key] = e[d];
    }
    __syncthreads();

    // S = Q·Kᵀ for 16 rows × 64 keys per warp.
    float s[kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kQkSteps; ++ks)
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) {
        const __nv_bfloat16* kr = &sK[(n * 8 + g) * kKPitch + ks * 16 + 2 * c];
        mma_bf16(s[n], qf[ks], ld32(kr), ld32(kr + 8));
      }

    // Scale into base-2 units and mask (causal, and keys past the sequence).
    const int lim_lo = causal_offset + r_lo, lim_hi = causal_offset + r_hi;
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = kt + n * 8 + 2 * c + e;
        s[n][e] = j <= lim_lo && j < k_len ? s[n][e] * p.scale_log2 : -INFINITY;
        s[n][2 + e] = j <= lim_hi && j < k_len ? s[n][2 + e] * p.scale_log2 : -INFINITY;
        mx_lo = fmaxf(mx_lo, s[n][e]);
        mx_hi = fmaxf(mx_hi, s[n][2 + e]);
      }
    const float new_lo = fmaxf(m_lo, quad_max(mx_lo)), new_hi = fmaxf(m_hi, quad_max(mx_hi));
    // A row that has seen no key yet keeps max -inf: exponentiate against 0 instead, giving 0s, not NaNs.
    const float base_lo = new_lo == -INFINITY ? 0.f : new_lo, base_hi = new_hi == -INFINITY ? 0.f : new_hi;
    const float alpha_lo = exp2f(m_lo - base_lo), alpha_hi = exp2f(m_hi - base_hi);
    m_lo = new_lo, m_hi = new_hi;
    l_lo *= alpha_lo, l_hi *= alpha_hi;
#pragma unroll
    for (int n = 0; n < kVTiles; ++n) o[n][0] *= alpha_lo, o[n][1] *= alpha_lo, o[n][2] *= alpha_hi, o[n][3] *= alpha_hi;
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) {
      // P rounded to bf16 here, so the normalizer sums exactly the weights the MMA multiplies.
      s[n][0] = round_bf16(exp2f(s[n][0] - base_lo));
      s[n][1] = round_bf16(exp2f(s[n][1] - base_lo));
      s[n][2] = round_bf16(exp2f(s[n][2] - base_hi));
      s[n][3] = round_bf16(exp2f(s[n][3] - base_hi));
      l_lo += s[n][0] + s[n][1];
      l_hi += s[n][2] + s[n][3];
    }

    // O += P·V: 4 k-steps of 16 keys, 16 n-tiles of 8 output columns.
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int n = 0; n < kVTiles; ++n) {
        const __nv_bfloat16* vr = &sVt[(n * 8 + g) * kVPitch + kk * 16 + 2 * c];
        mma_bf16(o[n], a, ld32(vr), ld32(vr + 8));
      }
    }
  }

  // Epilogue: the quad's partial sums → 1/l, bf16 pairs out, lse in natural log.
  l_lo = quad_sum(l_lo), l_hi = quad_sum(l_hi);
  const float inv_lo = l_lo > 0.f ? 1.f / l_lo : 0.f, inv_hi = l_hi > 0.f ? 1.f / l_hi : 0.f;
  if (lo_ok) {
    __nv_bfloat16* dst = p.out + (int64_t(q_start) + r_lo) * p.o_row + int64_t(head) * p.o_head + 2 * c;
#pragma unroll
    for (int n = 0; n < kVTiles; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) = __floats2bfloat162_rn(o[n][0] * inv_lo, o[n][1] * inv_lo);
  }
  if (hi_ok) {
    __nv_bfloat16* dst = p.out + (int64_t(q_start) + r_hi) * p.o_row + int64_t(head) * p.o_head + 2 * c;
#pragma unroll
    for (int n = 0; n < kVTiles; ++n)
      *reinterpret_cast<__nv_bfloat162*>(dst + n * 8) = __floats2bfloat162_rn(o[n][2] * inv_hi, o[n][3] * inv_hi);
  }
  if (p.lse && c == 0) {
    constexpr float kLn2 = 0.6931471805599453f;
    if (lo_ok) p.lse[int64_t(head) * p.tq + q_start + r_lo] = l_lo > 0.f ? (m_lo + log2f(l_lo)) * kLn2 : -INFINITY;
    if (hi_ok) p.lse[int64_t(head) * p.tq + q_start + r_hi] = l_hi > 0.f ? (m_hi + log2f(l_hi)) * kLn2 : -INFINITY;
  }
}

}  // namespace

Status prefill_attention(const PrefillAttentionParams& p, Stream stream) {
  MLA_TRY(validate_prefill_attention(p));
  const int64_t b = p.seqs.shape[0], h = p.q.shape[1];
  if (b == 0 || p.max_q_len == 0) return Status::ok();
  const PrefillKernelParams kp{.q = p.q.ptr<const __nv_bfloat16>(),
                               .k_nope = p.k_nope.ptr<const __nv_bfloat16>(),
                               .k_pe = p.k_pe.ptr<const __nv_bfloat16>(),
                               .v = p.v.ptr<const __nv_bfloat16>(),
                               .out = p.out.ptr<__nv_bfloat16>(),
                               .lse = p.lse.defined() ? p.lse.ptr<float>() : nullptr,
                               .seqs = p.seqs.ptr<const int32_t>(),
                               .q_row = p.q.stride[0],
                               .kn_row = p.k_nope.stride[0],
                               .kn_head = p.k_nope.stride[1],
                               .pe_row = p.k_pe.stride[0],
                               .v_row = p.v.stride[0],
                               .v_head = p.v.stride[1],
                               .o_row = p.out.stride[0],
                               .o_head = p.out.stride[1],
                               .tq = p.q.shape[0],
                               .scale_log2 = p.softmax_scale * 1.4426950408889634f};
  const dim3 grid(static_cast<unsigned>((p.max_q_len + kTileQ - 1) / kTileQ), static_cast<unsigned>(h),
                  static_cast<unsigned>(b));
  prefill_attention_kernel<<<grid, kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

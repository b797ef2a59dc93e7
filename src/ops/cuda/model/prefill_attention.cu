// prefill_attention on sm_90 with mma.sync (m16n8k16, bf16 in, fp32 accumulate), FlashAttention-2 style:
// a CTA owns 64 query rows of one head of one sequence (4 warps × 16 rows); Q stays in registers as A
// fragments; K (nope | rope, 192 wide) and V go through shared memory 64 keys at a time, row-major as they
// lie in global memory, copied by cp.async into two stages so the next tile loads while this one computes.
// B fragments come from ldmatrix: K rows are already the "col" B layout of Q·Kᵀ; V's B layout for P·V is the
// transpose, which ldmatrix.trans produces on the way into registers (no transposed copy in shared memory).
// The softmax is online in base 2 (scale folded with log2 e); key tiles past the tile's last visible key are
// never loaded, and only tiles that cross the diagonal (or the sequence end) are masked. The heaviest query
// tiles (the last, seeing the most keys) are scheduled first, so the causal tail is short.
//
// Fragment layouts (PTX ISA, mma.m16n8k16, g = lane / 4, c = lane % 4):
//   A 16×16 row : a0 (g, 2c..2c+1)  a1 (g+8, 2c..)  a2 (g, 2c+8..)  a3 (g+8, 2c+8..)
//   B 16×8  col : b0 (k 2c..2c+1, n g)  b1 (k 2c+8.., n g)
//   C 16×8      : c0 c1 (g, 2c..2c+1)  c2 c3 (g+8, 2c..2c+1)
// ldmatrix gives lane t of an 8×8 matrix the pair (row t/4, cols 2(t%4)..+1), with .trans the pair
// (rows 2(t%4)..+1, col t/4): for sK[key][d] (rows = n, cols = k) plain ldmatrix is b0/b1; for sV[key][d]
// (rows = k, cols = n) ldmatrix.trans is.
// Two adjacent C tiles of S (keys 0-7, 8-15) are exactly the A fragment of P for one k-step of P·V.
#include "mla/ops/prefill_attention.h"

#include <cuda_bf16.h>


#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"
#include "ptx.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "prefill_attention";
// Query rows per CTA = 16 per warp. 4 warps (64 rows, 2 CTAs per SM by registers) is the default; 8 warps (128
// rows, one CTA per SM: the same 8 warps per SM, each K/V tile read from L2 once for twice the rows) is opt-in,
// MLA_PREFILL_WARPS=8 (4 or unset: the default; anything else is an error). H200 run E3 (bench/model/NOTES_engine.md):
// 8 warps +2-7 % on 2 k-8 k prompts, -6 % on 32 x 512: the kernel is not bound by its L2 reads, so the default stays.
constexpr int kTileK = 64;
constexpr int kQkSteps = kPrefillDimQK / 16;   // 12 k-steps of Q·Kᵀ
constexpr int kKeyTiles = kTileK / 8;          // 8 n-tiles of S
constexpr int kVTiles = kPrefillDimV / 8;      // 16 n-tiles of O
// Row pitches padded by 16 bytes (400 and 272 bytes, both ≡ 16 mod 128): the 8 row addresses of one
// ldmatrix fall in 8 distinct 16-byte bank groups.
constexpr int kKPitch = kPrefillDimQK + 8;  // sK[key][d]
constexpr int kVPitch = kPrefillDimV + 8;   // sV[key][d]
constexpr int kNopeChunks = kPrefillDimNope / 8, kRopeChunks = kPrefillDimRope / 8, kVChunks = kPrefillDimV / 8;
constexpr int kKChunks = kNopeChunks + kRopeChunks;  // 16-byte copies per key of K
constexpr int kStageElems = kTileK * (kKPitch + kVPitch);
constexpr int kStages = 2;
constexpr size_t kSmemBytes = size_t(kStages) * kStageElems * 2;  // 86016 bytes: two CTAs per SM
static_assert(kPrefillDimQK % 16 == 0 && kTileK % 16 == 0 && kPrefillDimV % 16 == 0);
static_assert((kKPitch * 2) % 128 == 16 && (kVPitch * 2) % 128 == 16, "conflict-free ldmatrix rows");

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

__device__ __forceinline__ uint32_t ld32(const __nv_bfloat16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// 16 bytes global → shared, asynchronously; `valid` false writes 16 zero bytes (src-size 0 reads nothing).
__device__ __forceinline__ void cp_async16_or_zero(void* dst, const void* src, bool valid) {
  cp_async_16(smem_u32(dst), src, valid ? 16 : 0);
}

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

// One key tile (keys kt .. kt + 63 of the sequence) into a stage: K as 16 nope + 8 rope chunks per key, V as
// 16 chunks; keys past k_len are zero-filled (P is 0 there, and 0 · NaN would not be).
template <int kThreads>
__device__ __forceinline__ void load_tile(const PrefillKernelParams& p, __nv_bfloat16* sK, __nv_bfloat16* sV, int kt,
                                          int k_start, int k_len, int head) {
  for (int i = threadIdx.x; i < kTileK * kKChunks; i += kThreads) {
    const int key = i / kKChunks, ch = i % kKChunks, j = kt + key;
    const bool ok = j < k_len;
    const int64_t row = int64_t(k_start) + (ok ? j : 0);
    const __nv_bfloat16* src = ch < kNopeChunks ? p.k_nope + row * p.kn_row + int64_t(head) * p.kn_head + ch * 8
                                                : p.k_pe + row * p.pe_row + (ch - kNopeChunks) * 8;
    cp_async16_or_zero(&sK[key * kKPitch + ch * 8], src, ok);
  }
  for (int i = threadIdx.x; i < kTileK * kVChunks; i += kThreads) {
    const int key = i / kVChunks, ch = i % kVChunks, j = kt + key;
    const bool ok = j < k_len;
    const int64_t row = int64_t(k_start) + (ok ? j : 0);
    cp_async16_or_zero(&sV[key * kVPitch + ch * 8], p.v + row * p.v_row + int64_t(head) * p.v_head + ch * 8, ok);
  }
}

template <int kWarps>
__global__ void __launch_bounds__(kWarps * 32, 8 / kWarps)
    prefill_attention_kernel(const __grid_constant__ PrefillKernelParams p) {
  constexpr int kTileQ = kWarps * 16, kThreads = kWarps * 32;
  extern __shared__ __align__(128) __nv_bfloat16 smem[];
  const int head = blockIdx.y, b = blockIdx.z;
  const int q_start = p.seqs[b * 4], q_len = p.seqs[b * 4 + 1], k_start = p.seqs[b * 4 + 2], k_len = p.seqs[b * 4 + 3];
  const int q0 = (gridDim.x - 1 - blockIdx.x) * kTileQ;  // last (heaviest) tiles first
  if (q0 >= q_len) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int causal_offset = k_len - q_len;  // query i sees keys j <= causal_offset + i
  const int r_lo = q0 + warp * 16 + g, r_hi = r_lo + 8;
  const bool lo_ok = r_lo < q_len, hi_ok = r_hi < q_len;

  const int last_row = min(q0 + kTileQ, q_len) - 1;
  const int k_end = min(k_len, causal_offset + last_row + 1);  // keys any row of this tile sees
  const int num_tiles = (k_end + kTileK - 1) / kTileK;
  if (num_tiles > 0) load_tile<kThreads>(p, smem, smem + kTileK * kKPitch, 0, k_start, k_len, head);
  cp_async_commit();

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
  // ldmatrix lane roles: lane / 8 picks one of the four 8×8 matrices, lane % 8 its row.
  const int lm_row = lane % 8, lm_hi8 = (lane / 8) % 2 * 8, lm_hi16 = lane / 16 * 8;
  const int warp_first = q0 + warp * 16;  // the warp's first row: a tile wholly below its diagonal needs no mask

  for (int it = 0; it < num_tiles; ++it) {
    const int kt = it * kTileK;
    cp_async_wait<0>();
    __syncthreads();  // this tile has landed for every thread, and every warp is done with the other stage
    if (it + 1 < num_tiles) {
      __nv_bfloat16* next = smem + ((it + 1) % kStages) * kStageElems;
      load_tile<kThreads>(p, next, next + kTileK * kKPitch, kt + kTileK, k_start, k_len, head);
    }
    cp_async_commit();
    const __nv_bfloat16* sK = smem + (it % kStages) * kStageElems;
    const __nv_bfloat16* sV = sK + kTileK * kKPitch;

    // S = Q·Kᵀ for 16 rows × 64 keys per warp; one ldmatrix.x4 = b0/b1 of two 8-key n-tiles.
    float s[kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kQkSteps; ++ks)
#pragma unroll
      for (int np = 0; np < kKeyTiles / 2; ++np) {
        uint32_t bk[4];
        ldmatrix_x4(bk, smem_u32(&sK[(np * 16 + lm_hi16 + lm_row) * kKPitch + ks * 16 + lm_hi8]));
        mma_bf16(s[2 * np], qf[ks], bk[0], bk[1]);
        mma_bf16(s[2 * np + 1], qf[ks], bk[2], bk[3]);
      }

    // Scale into base-2 units; mask (causal, and keys past the sequence) only where the tile needs it.
    const bool masked = kt + kTileK - 1 > causal_offset + warp_first || kt + kTileK > k_len;
    const int lim_lo = causal_offset + r_lo, lim_hi = causal_offset + r_hi;
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int j = kt + n * 8 + 2 * c + e;
        s[n][e] = !masked || (j <= lim_lo && j < k_len) ? s[n][e] * p.scale_log2 : -INFINITY;
        s[n][2 + e] = !masked || (j <= lim_hi && j < k_len) ? s[n][2 + e] * p.scale_log2 : -INFINITY;
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
    for (int n = 0; n < kVTiles; ++n)
      o[n][0] *= alpha_lo, o[n][1] *= alpha_lo, o[n][2] *= alpha_hi, o[n][3] *= alpha_hi;
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

    // O += P·V: 4 k-steps of 16 keys; one ldmatrix.x4.trans = b0/b1 of two 8-column n-tiles.
#pragma unroll
    for (int kk = 0; kk < kTileK / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < kVTiles / 2; ++np) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, smem_u32(&sV[(kk * 16 + lm_hi8 + lm_row) * kVPitch + np * 16 + lm_hi16]));
        mma_bf16(o[2 * np], a, bv[0], bv[1]);
        mma_bf16(o[2 * np + 1], a, bv[2], bv[3]);
      }
    }
  }
  cp_async_wait<0>();  // nothing may still be landing in shared memory when the CTA exits

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

template <int kWarps>
Status launch(const PrefillKernelParams& kp, int max_q_len, int64_t h, int64_t b, Stream stream) {
  constexpr int kTileQ = kWarps * 16;
  // Above 48 KB of dynamic shared memory needs an opt-in, once per process and variant (not a stream
  // operation, so also fine while a graph is being captured).
  static const cudaError_t attr = cudaFuncSetAttribute(
      prefill_attention_kernel<kWarps>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kSmemBytes));
  if (attr != cudaSuccess) return cuda_status(attr, kOp, "cudaFuncSetAttribute(max dynamic shared memory)");
  const dim3 grid(static_cast<unsigned>((max_q_len + kTileQ - 1) / kTileQ), static_cast<unsigned>(h),
                  static_cast<unsigned>(b));
  prefill_attention_kernel<kWarps><<<grid, kWarps * 32, kSmemBytes, reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  return Status::ok();
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
  static const EnvKnob warps = read_env_knob("MLA_PREFILL_WARPS", {"4", "8"});
  MLA_TRY(warps.status);
  if (warps.index == 1) {
    MLA_TRY(launch<8>(kp, p.max_q_len, h, b, stream));
  } else {
    MLA_TRY(launch<4>(kp, p.max_q_len, h, b, stream));
  }
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda

#pragma once
// Mainloop pieces of the warp-specialized 64-row variant (kernel_ws.cuh): TMA issue (producer thread),
// and per page, for the consumer warpgroup that owns it, S = Q K^T over all 64 keys (wgmma m64n64k16),
// masking, softmax and P; for both consumer warpgroups, O_half = O_half * alpha + P V_half.
//
// Where P lives: columns 512..575 of a page (its 64-column RoPE slab) feed S only. Once the owner's S
// is complete that slab is dead, and P (64 x 64 16-bit, the same 128B-swizzled K-major layout) is
// written over it. P then lives exactly as long as its page's stage, so no extra buffer (none would
// fit next to Q and two stages) and no extra "P consumed" barrier: the stage's empty barrier covers both.
#include <cstdint>

#include "ops/cuda/sm90/decode/config.h"
#include "ops/cuda/sm90/decode/mainloop.cuh"
#include "ops/cuda/sm90/decode/params.h"
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/wgmma.h"

namespace mla::sm90::decode {

// Named barriers of the consumer warpgroups (0 is __syncthreads): "P of a page owned by warpgroup w is
// ready" is kBarPReady + w (arrive by w, sync by the other); each warpgroup's own 128-thread barrier
// is kBarWg + w; the epilogue's row-sum exchange is kBarEpilogue.
constexpr int kBarPReady = 1;
constexpr int kBarEpilogue = 3;
constexpr int kBarWg = 4;

constexpr int kSlabBytes = kBlockN * 128;   // 64 rows x 64 columns of 16-bit values
constexpr int kRopeSlab = kDimV / 64;       // slab 8: RoPE dims of K, then P
static_assert(kRopeSlab * 64 + 64 == kDimQK, "one RoPE slab after the V slabs");
constexpr int kSlabsPerPage = kChunksPerRow / 8;  // 9

struct WsBarriers {
  uint32_t base;
  // full(stage, slab): the slab's bytes landed (TMA; fp8_ds latent slabs: dequantized by the producer
  // warpgroup).
  __device__ uint32_t full(int stage, int slab) const { return base + 8 * (stage * kSlabsPerPage + slab); }
  __device__ uint32_t empty(int stage) const { return base + 8 * (kWsStages * kSlabsPerPage + stage); }
  __device__ uint32_t q_full() const { return base + 8 * (kWsStages * kSlabsPerPage + kWsStages); }
  __device__ uint32_t q_empty() const { return q_full() + 8; }
  // fp8_ds: raw latent slab `slab` (0..7) of a stage landed; slab 0 also carries the scale box.
  __device__ uint32_t raw(int stage, int slab) const { return q_empty() + 8 + 8 * (stage * kRopeSlab + slab); }
};
// Who releases a stage: each consumer thread for the 16-bit formats, lane 0 for its warp after __syncwarp for fp8_ds.
// Session 67, H200s, 5 interleaved passes of same-tree binaries, per thread against per warp: bf16 rows 14-18
// -0.23..-0.43 % (c1); fp8_ds's owner-converts kernel (ws64) rows 14 / 15 / 17 / 18 +1.5 / +1.6 / +1.0 / +1.0 % (c4), a
// loss, so fp8_ds (that kernel and the producer-converts path of mla_decode_ws_kernel, which no timed row runs) keeps
// the warp's one arrival. Per thread needs no warp sync: a thread's wgmma reads are waited for by that thread, and the
// TMA-store release follows the epilogue's named_sync after the stores' read wait (epilogue_tma_ws.cuh).
template <class Traits>
constexpr bool kWsReleasePerThread = Traits::kFormat != KvFormat::kFp8Ds;
template <class Traits>
constexpr int kWsReleaseArrivals =
    kWsReleasePerThread<Traits> ? kWsConsumerThreads : kWsConsumerThreads / 32 * kRcArrivalsPerWarp;

// This consumer thread (or warp) is done with `stage`: its wgmma reads completed, its generic writes fenced.
template <class Traits>
__device__ __forceinline__ void release_stage(const WsBarriers& bars, int stage) {
  if constexpr (kWsReleasePerThread<Traits>) {
    mbar_arrive(bars.empty(stage));
  } else {
    mbar_arrive_warp(bars.empty(stage));
  }
}
static_assert(8 * (kWsStages * kSlabsPerPage + kWsStages + 2) <= kWsBarrierBytes, "barrier area");
static_assert(8 * (kWsStages * kSlabsPerPage + kWsStages + 2 + kWsStages * kRopeSlab) <= kWsDequantBarrierBytes,
              "barrier area (fp8_ds)");

// Producer: one 64 x 64 slab of a page, or a Q tile, onto an mbarrier expecting its bytes. Rows of the Q
// box past the end of q are zero-filled by the TMA unit (and still counted); rows past this tile's valid
// rows read the next sequence's q: finite, computed, never written out.
__device__ __forceinline__ void issue_slab_tma(const DecodeKernelParams& p, int32_t page, int slab, uint32_t dst,
                                               uint32_t bar) {
  mbar_expect_tx(bar, kSlabBytes);
  tma_load_2d(dst + slab * kSlabBytes, &p.tmap_kv, bar, slab * 64, page * kBlockN);
}
__device__ __forceinline__ void issue_q_tma(const DecodeKernelParams& p, int b, int tile_row0, uint32_t dst, uint32_t bar) {
  mbar_expect_tx(bar, kRowsPerCta * kRowBytes);
#pragma unroll
  for (int slab = 0; slab < kChunksPerRow / 8; ++slab)
    tma_load_2d(dst + slab * kRowsPerCta * 128, &p.tmap_q, bar, slab * 64, b * p.rows + tile_row0);
}

// A TMA page brings the whole page, garbage (maybe NaN) past the sequence end included: the owner
// warpgroup zeroes those tokens' V columns (slabs 0..7) so 0 * NaN cannot reach O. Their scores are
// masked to -inf, so the RoPE slab may keep its garbage.
__device__ __forceinline__ void zero_page_tail_wg(uint8_t* stage, int valid_tokens, int tid) {
  const int n = (kBlockN - valid_tokens) * kRopeSlab * 8;  // 16-byte chunks to clear
  for (int i = tid; i < n; i += 128) {
    const int chunk = i & 7, slab = (i >> 3) & 7, row = valid_tokens + (i >> 6);
    *reinterpret_cast<uint4*>(stage + slab * kSlabBytes + row * 128 + chunk * 16) = make_uint4(0, 0, 0, 0);
  }
}

// S (64 rows x 64 keys) = Q (64 x 576) . K^T for one warpgroup; s[t][e] has the mma.sync fragment
// layout (warp w of the group: rows 16 w + g (+8), keys 8 t + 2 t4 (+1)).
// Waits for each slab's own full barrier (slab_bar0 + 8 * slab, `parity`) before its MMAs. release >= 0: the
// stage of a P.V group issued just before (no wait), released once that group is done: after slab 0 is
// queued behind it if slab 0 is already there, else right away.
template <class Traits>
__device__ __forceinline__ void compute_scores_page(float (&s)[8][4], uint32_t s_q_tile, uint32_t s_kv,
                                                    uint32_t slab_bar0, uint32_t parity, const WsBarriers& bars,
                                                    int release = -1) {
  float(&d)[32] = reinterpret_cast<float(&)[32]>(s);
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  fence_operands(d);
  wgmma_fence();
  uint64_t da = make_smem_desc(s_q_tile, 16, 1024);
  uint64_t db = make_smem_desc(s_kv, 16, 1024);
  // The release must not wait for this page: if slab 0 has not landed yet (a page late from L2, or fp8_ds
  // slabs still converting), finish the P.V and release its stage first, so the refill of page j + 1
  // never depends on page j's arrival (fp8_ds b1 s8192 31.4 -> 26.2 µs, 16-bit rows unchanged: runs 12-13).
  // Decided per warp (the vote keeps the wait and the arrive convergent); warps of the group may differ.
  if (release >= 0 && !__all_sync(0xffffffffu, mbar_test(slab_bar0, parity))) {
    wgmma_wait_all();
    release_stage<Traits>(bars, release);
    release = -1;
  }
  // 16-bit formats: the nine slabs straight-line (36 HGMMA, no loop counter / back edge; run 23: -4 to -7 % on the
  // bf16 b32/b128 long rows). fp8_ds keeps the loop (not measured unrolled).
  constexpr int kSlabUnroll = Traits::kFormat == KvFormat::kFp8Ds ? 1 : kDimQK / 64;
#pragma unroll kSlabUnroll
  for (int slab = 0; slab < kDimQK / 64; ++slab) {
    mbar_wait_warp(slab_bar0 + 8 * slab, parity);
    // The accumulators cross the loop's back edge (and the barrier's spin loop): state the register
    // fence here rather than have ptxas inject one (C7519). It orders register accesses only; the
    // wgmma of earlier slabs stay in flight (no wait), so S keeps streaming slab after slab.
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) Traits::wgmma_qk64(d, da + 2 * k, db + 2 * k);
    wgmma_commit();  // one group per slab, inside the loop (a commit after it gets another injected fence)
    // A P.V group issued before this S (pv_issue, no wait) is the only one older than slab 0's: once it
    // is done, release its stage. Waiting here, not before S, keeps the tensor pipe fed across the
    // P.V -> S boundary (slab 0 is queued behind the P.V) and frees the stage as early as before.
    if (slab == 0 && release >= 0) {
      wgmma_wait_group<1>();
      release_stage<Traits>(bars, release);
    }
    da += kSlabBytes >> 4;
    db += kSlabBytes >> 4;
  }
  wgmma_wait_all();
  fence_operands(d);
}

// Stores P (this thread's row `row`, keys 8 t + 2 t4 (+1), packed) into the page's RoPE slab, K-major 128B swizzle.
__device__ __forceinline__ void store_p(uint8_t* p_slab, int row, int t4, const uint32_t (&pw)[8]) {
#pragma unroll
  for (int t = 0; t < 8; ++t) *reinterpret_cast<uint32_t*>(p_slab + row * 128 + ((t ^ (row & 7)) << 4) + 4 * t4) = pw[t];
}

// Keys of page blk visible to this thread's two rows (row_i[h]: sequence end, causal diagonal; rows past the
// tile's valid rows are clamped to seqlen), as limit[h] = visible keys - the page's first key; returns whether every
// row of the warp sees the whole page (warp-uniform). mask_row_max_tree's first step.
__device__ __forceinline__ bool page_key_limits(const DecodeKernelParams& p, int seqlen, int blk, const int (&row_i)[2],
                                                int (&limit)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int visible = p.causal ? min(seqlen, seqlen - p.s_q + 1 + row_i[h]) : seqlen;
    limit[h] = visible - blk * kBlockN;
  }
  return __all_sync(0xffffffffu, limit[0] >= kBlockN && limit[1] >= kBlockN);
}

// Both rows' maxima of a 64-row consumer's S fragment (sc[t][2h + e]: row g + 8h, key 8t + 2 t4 + e), reduced over the
// quad: each row's 16 scores as a tree (depth 4, not a 16-long FMNMX chain), the two rows independent, so ptxas
// interleaves them. fmaxf is exact in any order: the serial chain's maxima bit for bit.
__device__ __forceinline__ void row_max_tree(const float (&sc)[8][4], float (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m[8];
#pragma unroll
    for (int t = 0; t < 8; ++t) m[t] = fmaxf(sc[t][2 * h], sc[t][2 * h + 1]);
#pragma unroll
    for (int w = 4; w >= 1; w >>= 1)
#pragma unroll
      for (int t = 0; t < w; ++t) m[t] = fmaxf(m[t], m[t + w]);
    mx[h] = fmaxf(m[0], __shfl_xor_sync(0xffffffffu, m[0], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
  }
}

// The page softmax of the two 64-row consumers (kernel_ws.cuh, decode_fp8ds/kernel_ws64.cuh), in two steps.
// Scores sc[t][2h + e] of this thread: row g + 8h of its warp's 16, key 8t + 2 t4 + e of the page.
//
// Step 1: masks keys past each row's visible length (sequence end, causal diagonal; rows past the tile's valid rows are
// clamped to seqlen) to -inf and returns the page's row maxima, reduced over the quad. The mask is a warp-uniform
// branch that only partial pages take: written as a select per score with the `whole` test inside (the form before
// 3f469b6), the compiler folds the test into a compare and a select on each of the 64 scores of every page, on the path
// from S to the P-ready arrive while the tensor pipe idles (bench/decode/NOTES.md run 30). Each row's 16 maxima reduce
// as a tree (depth 4, not a 16-long FMNMX chain); fmaxf is exact in any order, so the maxima (and P) are the serial
// chain's bit for bit. bf16 h128 rows -1.9 to -2.6 % (NOTES.md run 31); fp8_ds: NOTES_fp8_ds.md "Session 9, tidy".
__device__ __forceinline__ void mask_row_max_tree(float (&sc)[8][4], const DecodeKernelParams& p, int seqlen, int blk,
                                                  const int (&row_i)[2], int t4, float (&mx)[2]) {
  int limit[2];
  if (!page_key_limits(p, seqlen, blk, row_i, limit)) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int t = 0; t < 8; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (t * 8 + 2 * t4 + e >= limit[h]) sc[t][2 * h + e] = -INFINITY;
  }
  row_max_tree(sc, mx);
}

// Shared-memory addresses of this thread's P words in the RoPE slab of its warpgroup's own stage (own pages are
// j with j % 2 == wg, always in stage wg; store_p's layout, row g + 8 is +1024 bytes with the same swizzle since
// row & 7 is equal): computed once per CTA instead of ~35 integer instructions per page between the softmax and
// the P-ready arrive (run 31: a further -0.2 to -0.5 % on the b128 rows).
static_assert(kWsStages == 2, "PStoreAddrs: a warpgroup's own pages (j % 2 == wg) sit in stage wg only with two stages");
struct PStoreAddrs {
  uint32_t a[8];
  __device__ __forceinline__ void init(uint32_t s_stage, int row, int t4) {
#pragma unroll
    for (int t = 0; t < 8; ++t) a[t] = s_stage + kRopeSlab * kSlabBytes + row * 128 + ((t ^ (row & 7)) << 4) + 4 * t4;
  }
  __device__ __forceinline__ void store(const uint32_t (&pw)[2][8]) const {
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a[t]), "r"(pw[0][t]) : "memory");
      asm volatile("st.shared.b32 [%0+1024], %1;\n" ::"r"(a[t]), "r"(pw[1][t]) : "memory");
    }
  }
};

// The online-softmax step: m_new = max(running max mp, page max mx) (mp ignored on a segment's first page),
// P = 2^(s * scale_log2 - m_new * scale_log2) packed to the format's 16 bits per key pair (pw[h][t]: row g + 8h,
// keys 8t + 2 t4, +1), and this thread's row sums of P in fp32 (before the packing rounds P, as the reference sums).
template <class Traits>
__device__ __forceinline__ void softmax_page(const float (&sc)[8][4], const float (&mx)[2], bool first,
                                             const float (&mp)[2], float scale_log2, float (&m_new)[2],
                                             float (&rowsum)[2], uint32_t (&pw)[2][8]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_new[h] = fmaxf(first ? -INFINITY : mp[h], mx[h]);
    const float ms = m_new[h] == -INFINITY ? 0.f : m_new[h] * scale_log2;
    float p0[8], p1[8];
    float sum = 0.f;
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      p0[t] = ex2_ftz(fmaf(sc[t][2 * h], scale_log2, -ms));
      p1[t] = ex2_ftz(fmaf(sc[t][2 * h + 1], scale_log2, -ms));
      sum += p0[t] + p1[t];
    }
    rowsum[h] = sum;
#pragma unroll
    for (int t = 0; t < 8; ++t) pw[h][t] = Traits::pack(p0[t], p1[t]);
  }
}

// This thread's warpgroup, warp-uniform by construction (shuffled from lane 0): ptxas then sees each role's wgmma on
// a convergent path and keeps them pipelined instead of serializing them.
__device__ __forceinline__ int ws_warpgroup() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}

// Per-thread state of a consumer warpgroup: its 256 output columns of rows g, g + 8 of its warp's 16,
// the max m_o these are relative to, and its share of the row sum (pages it computed P for).
struct WsState {
  float o[32][4];
  float m[2];
  float l[2];
  __device__ __forceinline__ void reset() {
#pragma unroll
    for (int t = 0; t < 32; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[t][e] = 0.f;
    m[0] = m[1] = -INFINITY;
    l[0] = l[1] = 0.f;
  }
};

// O_half *= exp(m_o - m_page); l likewise, plus this warpgroup's own row sums (zero for the other
// warpgroup's page). m_page: the page's running max (as the owner used it). A warp whose alphas are all exactly 1
// skips the 128 multiplies per thread. In practice that almost never happens: ptxas contracts m s - fl(m_page s) into
// an FFMA whose result is the rounding error of m s, not 0, so a row whose max stayed gets alpha 1 +- an ulp (session
// 73's ncu of bf16 row 17: the skip taken 0 times in 65536). Forcing alpha = 1 there lets it fire on about half the
// pages (FMULs 1056 -> 527 a page-tile) and measured no gain worth its cost on H100s (bench/decode/NOTES.md "Session
// 73" 5): bf16 rows 14 / 15 / 17 / 18 -0.6..0.0 %, rows 13 / 16 +1.2 / +0.6 %; fp8_ds rows 17 / 18 -1.9..+0.1 %, row 13
// -0.5..+2.5 % over four machines. On an H200 (session 74, BENCHMARKS.md "Session 74") bf16 rows 15 / 17 / 18 read
// -0.4 / -0.5 / -0.4 % and rows 13 / 16 +0.9 / +0.9 %: the non-owner's rescale sits on the page chain (phase sums,
// ~577 cycles with the P.V issue), but the multiplies are a small part of it.
__device__ __forceinline__ void rescale_o(WsState& st, const float (&m_page)[2], const float (&rowsum)[2],
                                          float scale_log2) {
  float alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // A row that has seen no key keeps m = -inf: subtract 0 then, so alpha = exp2(-inf) = 0, not NaN.
    const float ms = m_page[h] == -INFINITY ? 0.f : m_page[h] * scale_log2;
    alpha[h] = ex2_ftz(st.m[h] * scale_log2 - ms);
    st.m[h] = m_page[h];
    st.l[h] = st.l[h] * alpha[h] + rowsum[h];
  }
  if (__all_sync(0xffffffffu, alpha[0] == 1.f && alpha[1] == 1.f)) return;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int t = 0; t < 32; ++t) {
      st.o[t][2 * h] *= alpha[h];
      st.o[t][2 * h + 1] *= alpha[h];
    }
}

// Issues O_half += P V_half for the page in `s_kv` (P in its RoPE slab) as one wgmma group, no wait:
// the caller waits (wgmma_wait_all / compute_scores_page's release) before touching st.o again.
template <class Traits>
__device__ __forceinline__ void pv_issue(WsState& st, uint32_t s_kv, int wg) {
  float(&d)[128] = reinterpret_cast<float(&)[128]>(st.o);
  fence_operands(d);
  wgmma_fence();
  const uint32_t s_p = s_kv + kRopeSlab * kSlabBytes;
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    const uint64_t da = make_smem_desc(s_p + ks * 32, 16, 1024);
    // V = K[:, 0:512]: slabs 4 wg .. 4 wg + 3 (64 columns each, lbo apart), keys 16 ks.. (sbo per 8 keys).
    const uint64_t db = make_smem_desc(s_kv + (4 * wg) * kSlabBytes + ks * 16 * 128, kSlabBytes, 1024);
    Traits::wgmma_pv(d, da, db);
  }
  wgmma_commit();
}
__device__ __forceinline__ void pv_wait(WsState& st) {
  wgmma_wait_all();
  fence_operands(reinterpret_cast<float(&)[128]>(st.o));
}

// The owner's O_half = O_half * exp(m_o - m_page) + P_page V_page[:, half] with P from registers (pw: the
// thread's two rows, 8-key tiles, packed as stored), waiting for the product. Key step ks takes tiles 2 ks and
// 2 ks + 1: the wgmma A fragment (wgmma.h).
template <class Traits>
__device__ __forceinline__ void pv_page_rs(WsState& st, const float (&m_page)[2], const float (&rowsum)[2],
                                           const uint32_t (&pw)[2][8], uint32_t s_kv, int wg, float scale_log2) {
  rescale_o(st, m_page, rowsum, scale_log2);
  float(&d)[128] = reinterpret_cast<float(&)[128]>(st.o);
  fence_operands(d);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kBlockN / 16; ++ks) {
    const uint32_t a[4] = {pw[0][2 * ks], pw[1][2 * ks], pw[0][2 * ks + 1], pw[1][2 * ks + 1]};
    const uint64_t db = make_smem_desc(s_kv + (4 * wg) * kSlabBytes + ks * 16 * 128, kSlabBytes, 1024);
    Traits::wgmma_pv_rs(d, a, db);
  }
  wgmma_commit();
  pv_wait(st);
}

// O_half = O_half * exp(m_o - m_page) + P_page V_page[:, half], waiting for the product.
template <class Traits>
__device__ __forceinline__ void pv_page(WsState& st, const float (&m_page)[2], const float (&rowsum)[2], uint32_t s_kv,
                                        int wg, float scale_log2) {
  rescale_o(st, m_page, rowsum, scale_log2);
  pv_issue<Traits>(st, s_kv, wg);
  pv_wait(st);
}

}  // namespace mla::sm90::decode

#pragma once
// fp8_ds, 64-row tiles of h_q >= 64: the warp-specialized kernel of decode/kernel_ws.cuh, where each consumer
// warpgroup dequantizes its own pages ("owner converts") instead of three producer warps.
//
// Why: in kernel_ws.cuh's fp8_ds path (producer_ws_fp8ds.cuh) three converter warps at 72 registers dequantize every
// page between the stage release and S (release -> raw TMA -> convert -> S is the loop of each stage, the converters
// run at ~0.2 IPC: NOTES_fp8_ds.md G1-G3). Page j always lands in stage j % 2, the stage of its owner warpgroup, which
// otherwise waits there for the other's P_{j-1}; so the owner converts it itself: 128 threads with 232 registers,
// one warp per scheduler, no converter -> consumer hand-off (the owner arrives on the page's full barriers; S is
// compute_scores_page's loop, softmax, P.V and epilogue are the bf16 kernel's, unchanged).
// Schedule of an own page j ("hyb", run G5; kernel_ws.cuh's ws_consumer otherwise):
//   Q acquire | convert slabs 0-3 (the other's S_{j-1} / softmax may still run) | wait P_{j-1}, issue
//   P_{j-1} V_{j-1} | convert slabs 4-5 under it | wait it, release its stage (epilogue if its segment ended) |
//   convert slabs 6-7 | S_j | softmax_j, P_j | signal | P_j V_j | release.
// Measured and removed (NOTES_fp8_ds.md G4-G5, b128 s8192 vs the producer-converts kernel in the same call): the
// whole page before waiting for P_{j-1} ("cfirst", +1 %: the other's stage is released only after the conversion);
// wait P_{j-1} first ("pvconv", +11 %: the conversion joins the S -> softmax chain); hyb + S of slabs 0-3 queued
// behind P_{j-1} V_{j-1} (+1 %); an L2 prefetch of raw pages two ahead (cfirst -3 %, hyb + S +4 %). hyb: -6 %.
//   - wg 0, 1: consumers (below);
//   - wg 2: lane 0 of warp 8 issues TMA (producer_ws_fp8ds.cuh ws_issue_fp8ds: raw latent slabs into the upper
//     half of the stage, the scale box, the RoPE slab straight into slab 8); warps 9-11 leave.
// kFused: a second instantiation with the fused merge (decode/fused_merge.cuh, as kernel_ws.cuh's; session 25: fp8_ds
// h128 b128 s512 -2.0 us, s4096 -1.3, s8192 +-0); the combine-mode instantiation's SASS is the kernel's as before.
// Arithmetic and rounding of each value as producer_ws_fp8ds.cuh's dequant4: bf16(f32(e4m3) * scale), the
// reference's (ref::mla_decode's load_token; the tests' "bf16 K" comparison holds it to the bf16 kernel's level).
#include <cstdint>

#include "ops/cuda/sm90/decode/kernel_ws.cuh"
#include "ops/cuda/sm90/decode/producer_ws_fp8ds.cuh"

namespace mla::sm90::decode_fp8ds {
namespace ws64 {

using namespace decode;

// Register split of kernel_ws.cuh's 16-bit path (one producer thread): 40 / 232.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

// The owner warpgroup (tid 0..127) dequantizes page `stage`'s raw latent slabs into bf16 slabs 0-7 and arrives
// on their full barriers. Item i < 256 of a slab = (token i / 4, codes 16 (i % 4) ..): thread tid takes items tid
// and tid + 128 of every slab, two slabs (one scale tile) per step: they share the token's scale load and address.
// Raw slabs live in bf16 slabs 4-7's space (slab 4 + r / 2 covers raw r): steps writing slabs 0-3 touch no raw
// bytes; a step writing slab k >= 4 first waits on the warpgroup barrier, placed after the step's own raw loads, so
// every thread has loaded the raw slabs it overwrites (those of this and earlier steps). Tokens at or past the
// sequence end become zeros (their slots are garbage: 0 * NaN would poison P V); their RoPE slab rows keep garbage,
// masked to -inf by the softmax. `mid_a` runs once slabs 0-3 are converted, `mid_b` once slabs 4-5 are.
template <class MidA, class MidB>
__device__ __forceinline__ void convert_own_page(const WsBarriers& bars, uint8_t* st, const uint8_t* sc, int stage,
                                                 uint32_t parity, int valid, int wg, int tid, MidA&& mid_a,
                                                 MidB&& mid_b) {
  constexpr int kPer = 2, kStep = 2;
  static_assert(kRopeSlab == 8, "steps are whole scale tiles, two per half page");
  // Unrolled: the hooks then sit at compile-time steps, and ptxas sees that a P.V group issued in mid_a is
  // waited for in mid_b (with a runtime step it assumed otherwise and serialized the wgmma, C7515).
#pragma unroll
  for (int s0 = 0; s0 < kRopeSlab; s0 += kStep) {
#pragma unroll
    for (int u = 0; u < kStep; ++u) mbar_wait(bars.raw(stage, s0 + u), parity);
    uint4 codes[kPer][kStep];
    float scale[kPer];
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid + 128 * k;
      const bool live = (i >> 2) < valid;
      const uint8_t* src = st + kRawOffset + s0 * kRawSlabBytes + 16 * i;
#pragma unroll
      for (int u = 0; u < kStep; ++u)
        codes[k][u] = live ? *reinterpret_cast<const uint4*>(src + u * kRawSlabBytes) : make_uint4(0, 0, 0, 0);
      scale[k] = live ? *reinterpret_cast<const float*>(sc + (i >> 2) * 64 + 4 * (s0 / 2)) : 0.f;
    }
    if (s0 + kStep > kRopeSlab / 2) named_sync(kBarWg + wg, 128);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = tid + 128 * k;
      const int row = i >> 2, q = i & 3;
      uint8_t* dst = st + s0 * kSlabBytes + row * 128;
      const int c0 = ((2 * q) ^ (row & 7)) << 4, c1 = ((2 * q + 1) ^ (row & 7)) << 4;
#pragma unroll
      for (int u = 0; u < kStep; ++u) {
        const float s = scale[k];
        uint4 lo, hi;
        dequant4(codes[k][u].x, s, lo.x, lo.y);
        dequant4(codes[k][u].y, s, lo.z, lo.w);
        dequant4(codes[k][u].z, s, hi.x, hi.y);
        dequant4(codes[k][u].w, s, hi.z, hi.w);
        *reinterpret_cast<uint4*>(dst + u * kSlabBytes + c0) = lo;
        *reinterpret_cast<uint4*>(dst + u * kSlabBytes + c1) = hi;
      }
    }
    fence_proxy_async();  // generic stores, read by wgmma (async proxy) once the full barrier completes
#pragma unroll
    for (int u = 0; u < kStep; ++u) mbar_arrive(bars.full(stage, s0 + u));
    if (s0 + kStep == kRopeSlab / 2) mid_a();
    if (s0 == kRopeSlab / 2) mid_b();
  }
}

// S = Q K^T over the page in s_kv (slab by slab on the full barriers, all landed or converted by now): the loop of
// compute_scores_page without its early-release path (this schedule releases the other's stage in mid_b). Kept
// as run G5 measured it (compute_scores_page in its place costs an 8-byte spill).
__device__ __forceinline__ void scores_page(float (&s)[8][4], uint32_t s_q_tile, uint32_t s_kv, const WsBarriers& bars,
                                            int stage, uint32_t parity) {
  float(&d)[32] = reinterpret_cast<float(&)[32]>(s);
#pragma unroll
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  fence_operands(d);
  uint64_t da = make_smem_desc(s_q_tile, 16, 1024);
  uint64_t db = make_smem_desc(s_kv, 16, 1024);
#pragma unroll 1
  for (int slab = 0; slab < kSlabsPerPage; ++slab) {
    mbar_wait(bars.full(stage, slab), parity);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < 4; ++k) Fp8DsTraits::wgmma_qk64(d, da + 2 * k, db + 2 * k);
    wgmma_commit();
    da += kSlabBytes >> 4;
    db += kSlabBytes >> 4;
  }
  fence_operands(d);
  wgmma_wait_all();
  fence_operands(d);
}

// kernel_ws.cuh's ws_consumer (read there for the schedule and its reasons) with the owner's conversion. kFused: the
// fused merge (decode/fused_merge.cuh), as in ws_consumer. kTmaOut: direct segments through the TMA-store epilogue
// (WsPeerSteps).
template <bool kFused, bool kTmaOut>
__device__ __forceinline__ void consumer(const DecodeKernelParams& p, PartCursor cur, const WsBarriers& bars,
                                         uint8_t* smem, int wg, int tid) {
  using Traits = Fp8DsTraits;
  constexpr WsSmemLayout L = ws_smem_layout(true);
  const uint32_t s_q_tile = smem_u32(smem + L.q_offset);
  const uint32_t s_kv0 = smem_u32(smem + L.kv_offset);
  float* s_m = reinterpret_cast<float*>(smem + L.m_offset);  // [stage][64]: running max after the page
  float* s_l = reinterpret_cast<float*>(smem + L.l_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);
  const int32_t* rec = part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];
  int row_local[2], row_i[2];  // the thread's two tile rows and their query positions (causal mask)
  thread_rows(tile_row0, p.h_q, warp, g, row_local, row_i);

  FusedMerges<kFused>::zero_empty(p, wg * 128 + tid, kWsConsumerThreads);
  WsState st;
  st.reset();
  WsPeerSteps<Traits, kFused, kTmaOut && kTmaOutFor<Traits>> peer{
      p, bars, st, s_m, s_l, row_local, s_kv0, wg, warp, lane, tile_row0, valid_rows, first_batch, first_split};

  int j = 0, seg = -1, q_seg = -1;
  bool q_held = false;
  bool prev_end = true;
  int prev_b = 0;
  while (cur.valid()) {
    const bool first = prev_end;
    if (first) ++seg;
    const bool end = cur.last_of_sequence();
    if ((j & 1) == wg) {
      const int stage = j & 1;
      const uint32_t s_kv = s_kv0 + stage * kPageBytes;
      uint8_t* stage_ptr = smem + L.kv_offset + stage * kPageBytes;
      const uint8_t* scale_ptr = smem + L.scale_offset + stage * kWsScaleBoxBytes;
      const uint32_t parity = (j >> 1) & 1;
      const int valid_tokens = cur.seqlen - cur.blk * kBlockN;
      float mp[2] = {-INFINITY, -INFINITY};
      // Q of this segment first (acquire in order, releasing the segments this warpgroup had no page in): the
      // producer issues a segment's first page only after every consumer released the previous segment's Q,
      // and a warpgroup without a page there releases it only here, so this must precede the conversion's
      // wait for the raw page.
      acquire_q(bars, seg, q_seg, q_held);
      bool pv_open = false;
      const bool pe = prev_end;
      const int pb = prev_b;
      auto mid_a = [&] {
        if (j > 0) {
          peer.wait_other(j - 1, mp);
          peer.pv_other_issue(j - 1, mp);
          pv_open = true;
        }
      };
      // The wait is unconditional (nothing is pending when j == 0): on a path ptxas cannot rule out, O would
      // otherwise be written (rescale, epilogue) under an open P.V group, and it serializes every wgmma (C7515).
      auto mid_b = [&] {
        wgmma_wait_all();
        fence_operands(reinterpret_cast<float(&)[128]>(st.o));
        if (!pv_open) return;
        if (pe) {
          peer.epilogue_release(pb, (j - 1) & 1);  // a direct segment is staged there for its TMA stores
        } else {
          release_stage<Fp8DsTraits>(bars, (j - 1) & 1);
        }
      };
      convert_own_page(bars, stage_ptr, scale_ptr, stage, parity, valid_tokens, wg, tid, mid_a, mid_b);
      float sc[8][4];
      scores_page(sc, s_q_tile, s_kv, bars, stage, parity);
      fence_operands(reinterpret_cast<float(&)[128]>(st.o));
      if (cur.hi - cur.blk - 1 < 2 && q_held) {
        mbar_arrive(bars.q_empty());
        q_held = false;
      }
      float mx[2], m_new[2], rowsum[2];
      uint32_t pw[2][8];
      mask_row_max_tree(sc, p, cur.seqlen, cur.blk, row_i, t4, mx);
      softmax_page<Traits>(sc, mx, first, mp, p.scale_log2, m_new, rowsum, pw);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        store_p(stage_ptr + kRopeSlab * kSlabBytes, row_local[h], t4, pw[h]);
        // racecheck: hand-off (s_m for the other warpgroup, ordered by the kBarPReady named barrier)
        if (t4 == 0) s_m[stage * kRowsPerCta + row_local[h]] = m_new[h];
      }
      // Also covers this warpgroup's converted slabs, which the other warpgroup's P V reads after its
      // bar.sync on P-ready.
      fence_proxy_async();
      named_arrive(kBarPReady + stage, kWsConsumerThreads);
      named_sync(kBarWg + wg, 128);
      pv_page<Traits>(st, m_new, rowsum, s_kv, wg, p.scale_log2);
      if (end) {
        peer.epilogue_release(cur.b, stage);
      } else {
        release_stage<Fp8DsTraits>(bars, stage);
      }
    }
    prev_end = end;
    prev_b = cur.b;
    cur.advance(p);
    ++j;
  }
  peer.finish_part(j, prev_b);
  peer.merges.template finish<Traits, float, kWsConsumerThreads>(p, wg * 128 + tid);
}

// kFused: the fused merge (decode/fused_merge.cuh; the combine-mode instantiation has none of its code). kTmaOut:
// direct segments' out through shared memory and TMA stores (session 49); false, plain stores (the kernel as it was
// before), for steps whose sequences are all cut (launch_ws64.h), where every segment is a split partial anyway and
// the TMA epilogue's code cost the whole kernel 1-2 % (h_q 128 b32, session 49 c6 / c8).
template <bool kFused, bool kTmaOut = true>
__global__ void __launch_bounds__(kWsThreads, 1)
    mla_decode_fp8ds_ws64_kernel(const __grid_constant__ DecodeKernelParams p) {
  constexpr WsSmemLayout L = ws_smem_layout(true);
  extern __shared__ __align__(1024) uint8_t smem[];
  // Let the combine grid (programmatic stream serialization) get scheduled as SMs free up.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const WsBarriers bars{smem_u32(smem + L.bar_offset)};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWsStages; ++s) {
      // Latent slabs: the owner warpgroup's 128 threads arrive after converting; RoPE: the TMA.
      for (int slab = 0; slab < kSlabsPerPage; ++slab) mbar_init(bars.full(s, slab), slab < kRopeSlab ? 128 : 1);
      mbar_init(bars.empty(s), kWsReleaseArrivals<Fp8DsTraits>);
      for (int slab = 0; slab < kRopeSlab; ++slab) mbar_init(bars.raw(s, slab), 1);
    }
    mbar_init(bars.q_full(), 1);
    mbar_init(bars.q_empty(), kWsConsumerThreads);
    mbar_init_fence();
  }
  __syncthreads();
  const int32_t* rec = part_record(p);
  PartCursor cur;
  cur.init(p, rec);
  if (!cur.valid()) {  // an empty part: uniform across the CTA
    FusedMerges<kFused>::zero_empty(p, threadIdx.x, blockDim.x);
    return;
  }
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0), tid = threadIdx.x % 128;
  if (wg == 2) {
    setmaxnreg_dec<kProducerRegs>();
    if (tid == 0)
      ws_issue_fp8ds(p, cur, bars, smem_u32(smem + L.q_offset), smem_u32(smem + L.kv_offset),
                     smem_u32(smem + L.scale_offset), blockIdx.y * kRowsPerCta);
    return;
  }
  setmaxnreg_inc<kConsumerRegs>();
  consumer<kFused, kTmaOut>(p, cur, bars, smem, wg, tid);
}

}  // namespace ws64
}  // namespace mla::sm90::decode_fp8ds

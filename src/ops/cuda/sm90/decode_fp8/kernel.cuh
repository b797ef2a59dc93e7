#pragma once
// The split-KV fp8 decode kernel: CTA (part, head tile) walks its plan part page by page with a
// cp.async pipeline of kStages pages (36 KB each), 64 query rows x one 64-token page per step, and
// writes one result per (part, sequence) segment. Same plan, part cursor, partials layout and combine
// as the 16-bit kernel; the math runs on FP8 tensor cores (mma.sync m16n8k32 e4m3, see mainloop.cuh).
//
// Pipeline (per step j, page j in stage j % kStages):
//   wait for page j (and the Q tile when j starts a sequence) -> S = Q K^T -> row max exchange ->
//   P = exp2(S * scale_log2 - m) -> row sums (unrounded), P as e4m3 to shared -> O = O * alpha + P V ->
//   [segment end: epilogue] -> barrier -> [next segment: load its Q tile] -> issue page j + kStages.
// 32- and 64-row tiles only: 16-row tiles (h_q 16, s_q 1) run the wgmma kernel of kernel_h16.cuh.
#include <cstdint>

#include "mla/ops/decode_running_max.h"
#include "ops/cuda/sm90/decode/scheduler.cuh"
#include "ops/cuda/sm90/decode_fp8/epilogue.cuh"

namespace mla::sm90::decode_fp8 {

template <int RG>
__global__ void __launch_bounds__(kThreads, 1) mla_decode_fp8_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  using WS = WarpShape<RG>;
  static_assert(RG == 2 || RG == 4, "16-row tiles run kernel_h16.cuh");
  constexpr int kStages = stages_for(RG);
  constexpr SmemLayout L = smem_layout(RG, WS::kSlices);
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];  // slab layout: 1024-byte swizzle atoms
  // Let the combine grid (programmatic stream serialization) get scheduled as SMs free up; it waits on
  // griddepcontrol.wait for this grid's completion before reading any result.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const uint32_t s_kv0 = decode::smem_u32(smem + L.k_offset);
  const uint32_t s_q_tile = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_p = decode::smem_u32(smem + L.p_offset);
  uint8_t* s_p_ptr = smem + L.p_offset;
  float* s_max = reinterpret_cast<float*>(smem + L.max_offset);  // [kSlices][64]
  float* s_sum = reinterpret_cast<float*>(smem + L.sum_offset);  // [kSlices][64]

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rg = warp % RG, ws = warp / RG;
  const int g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  const int valid_rows = min(kRowsPerCta, p.rows - tile_row0);  // a multiple of 16 (h_q is)
  const bool writes = rg * kRowGroup < valid_rows;  // this warp's rows exist
  // Warps of empty row groups skip the math and only join barriers.
  const bool active = writes;
  const int32_t* rec = decode::part_record(p);
  const int first_batch = rec[kPartBeginBatch], first_split = rec[kPartFirstSplit];

  decode::PartCursor comp, load;
  comp.init(p, rec);
  if (!comp.valid()) return;  // an empty part (more CTAs than work)
  load = comp;
  load.fetch_page(p);
  // Optional L2 prefetch: cursor `pf` runs fp.l2_prefetch pages ahead of `load`; whenever `load` issues
  // page k into shared memory, thread 0 prefetches page k + l2_prefetch into L2 (a page is 36 KB contiguous).
  decode::PartCursor pf = load;
  for (int i = 0; i < fp.l2_prefetch && pf.valid(); ++i) {
    pf.advance(p);
    pf.fetch_page(p);
  }
  auto prefetch_next = [&]() {
    if (pf.valid()) {
      if (threadIdx.x == 0)
        prefetch_l2(static_cast<const uint8_t*>(p.kv_cache) + static_cast<int64_t>(pf.page) * kPageBytes, kPageBytes);
      pf.advance(p);
      pf.fetch_page(p);
    }
  };
  // Issues the load cursor's page into `stage`.
  auto issue_page = [&](uint32_t stage_addr) {
    load_kv_page(p, load.page, load.blk, load.seqlen, stage_addr);
    load.advance(p);
    load.fetch_page(p);
    if (fp.l2_prefetch > 0) prefetch_next();
  };

  // Prologue: the Q tile of the first sequence, then pages 0 .. kStages - 1, one commit group each.
  constexpr int kStageBytes = kSmemPageBytes;
  load_q_tile<RG>(p, comp.b, tile_row0, valid_rows, s_q_tile);
  decode::cp_async_commit();
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (load.valid()) issue_page(s_kv0 + s * kStageBytes);
    decode::cp_async_commit();
  }

  // Causal visibility of this thread's two rows depends on the sequence; recomputed per segment.
  const int row_i[2] = {(tile_row0 + rg * kRowGroup + g) / p.h_q, (tile_row0 + rg * kRowGroup + g + 8) / p.h_q};
  RowState<RG> st;
  st.reset();
  bool q_behind = false;  // a Q tile was committed after pages j + 1 .. j + kStages - 1 (see the wait)
  int stage = 0;
  while (comp.valid()) {
    // Groups still pending, oldest first: pages j .. j + kStages - 1, or, right after a sequence switch,
    // pages j .. j + kStages - 2, the Q tile, page j + kStages - 1. Page j (and its Q) must be complete.
    if (q_behind) {
      decode::cp_async_wait<1>();
    } else {
      decode::cp_async_wait<kStages - 1>();
    }
    q_behind = false;
    __syncthreads();
    const uint32_t s_kv = s_kv0 + stage * kStageBytes;
    const int b = comp.b, blk = comp.blk;
    float sc[WS::kSTiles][4];
    float alpha[2] = {1.f, 1.f};
    if (active) {
      compute_scores<RG>(sc, s_q_tile, s_kv, rg, ws, lane);
      // Mask keys past the row's visible length (sequence end, causal diagonal); partial row maxima.
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int visible = p.causal ? comp.seqlen - p.s_q + 1 + row_i[h] : comp.seqlen;
        const int limit = visible - blk * kBlockN - ws * WS::kKeys;  // first masked key, slice-local
        mx[h] = mask_row_max<WS::kSTiles>(sc, h, limit, t4);
        if (t4 == 0) s_max[ws * kRowsPerCta + rg * kRowGroup + g + 8 * h] = mx[h];
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row_local = rg * kRowGroup + g + 8 * h;
        float page_max = -INFINITY;
#pragma unroll
        for (int w = 0; w < WS::kSlices; ++w) page_max = fmaxf(page_max, s_max[w * kRowsPerCta + row_local]);
        const float m_new = decode_running_max(st.m[h], page_max, p.scale_log2, kDecodeFp8MaxSlackLog2);
        // A row that has seen no key yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
        const float m_scaled = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
        alpha[h] = exp2f(st.m[h] * p.scale_log2 - m_scaled);
        st.m[h] = m_new;
        float sum = 0.f;
        uint8_t* p_row = s_p_ptr + row_local * kPRowBytes;
#pragma unroll
        for (int t = 0; t < WS::kSTiles; ++t) {
          const float p0 = exp2f(fmaf(sc[t][2 * h], p.scale_log2, -m_scaled));
          const float p1 = exp2f(fmaf(sc[t][2 * h + 1], p.scale_log2, -m_scaled));
          sum += p0 + p1;  // the row sum uses unrounded P (as the reference does)
          const int key = ws * WS::kKeys + t * 8 + 2 * t4;
          *reinterpret_cast<uint16_t*>(p_row + p_position(key)) = pack_e4m3x2(p0, p1);
        }
        st.l[h] = st.l[h] * alpha[h] + sum;
      }
    }
    __syncthreads();
    if (active) {
#pragma unroll
      for (int t = 0; t < WS::kOTiles; ++t) {
        st.o[t][0] *= alpha[0];
        st.o[t][1] *= alpha[0];
        st.o[t][2] *= alpha[1];
        st.o[t][3] *= alpha[1];
      }
      accumulate_pv<RG>(st, s_p, s_kv, rg, ws, lane);
    }
    const bool seg_end = comp.last_of_sequence();
    if (seg_end) {
      const int n_splits = p.split_offsets[b + 1] - p.split_offsets[b];
      const int slot = p.split_offsets[b] + (b == first_batch ? first_split : 0);
      write_segment<RG>(fp, st, s_sum, b, slot, n_splits == 1, tile_row0, writes, rg, ws, lane);
      st.reset();
    }
    comp.advance(p);
    __syncthreads();  // stage, P, Q and the reduction buffers are free again
    if (seg_end && comp.valid()) {
      // Its own commit group, ahead of page j + kStages: the next step waits for it (and the pages
      // committed before it) with wait<1>.
      load_q_tile<RG>(p, comp.b, tile_row0, valid_rows, s_q_tile);
      decode::cp_async_commit();
      q_behind = true;
    }
    if (load.valid()) issue_page(s_kv);
    decode::cp_async_commit();
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }
  decode::cp_async_wait<0>();
}

}  // namespace mla::sm90::decode_fp8

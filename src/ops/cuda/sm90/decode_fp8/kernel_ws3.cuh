#pragma once
// Scorer-split warp-specialized 64-row fp8 decode kernel (experimental: MLA_DECODE_FP8_VARIANT64=ws3). The same
// plan, part cursor, operand layouts, producer, transposers and epilogue as kernel_ws.cuh, with the work of a page
// split by kind instead of by page parity:
//   warpgroup 2, the scorer: S_j = Q K_j^T (m64n64k32 x 18, the last 8 steps with Q from registers as WsQReg), the
//     softmax against its own running max, P_j (e4m3) into P slot j % 4 with the running max and the page's row sums
//     beside it (p_full), for every page;
//   warpgroups 0 / 1, the accumulators: O_half = O_half * alpha + P_j V_j[:, half] (m64n128k32 x 4, wgmma_e4m3.h) for
//     every page, waited for in the same page, and the segment's epilogue (decode/epilogue.cuh write_segment_ws);
//   warpgroup 3: the TMA thread and the three V^T transposers of kernel_ws.cuh.
// Why (session 20, bench/decode/NOTES_plan.md): in kernel_ws.cuh each consumer's softmax needs the other
// warpgroup's running max, so S, softmax, vote and hand-off of every page sit on one chain through both warpgroups
// (~2280 SM cycles per page-tile at b128 s8192, the tensor pipe ~48 % busy). Here the running max stays in the
// scorer, whose period per page is its S issue and softmax; the accumulators follow it, one page behind, and
// their P.V shares the tensor pipe with the scorer's next S.
// Slots: the scorer writes slot j % 4 once the accumulators released page j - 4 from it (p_empty); the
// accumulators read the slot's maxima and row sums after p_full and release it (p_empty) once their P_j V_j is done.
// Four are enough for the wait to be ~free: the scorer's k_full(j) already implies that the transposers saw
// vt_empty(j - 4), on which both accumulators arrive right before their p_empty of page j - 4, so the ring of K and
// V^T stages keeps the scorer at most 4 pages ahead anyway.
// Deferred p_full: the scorer signals P_j after it has issued S_{j+1} (or at a segment's or the part's end), so
// P_j V_j reaches the tensor pipe behind S_{j+1}: issuing 18 wgmma behind another warpgroup's products holds the
// issuing warps ~2.3x longer (bench_wgmma: 884 against 392 cycles).
// Measured (H200, session 20, bench/decode/NOTES_plan.md items 7-12): every fp8 test passes on it (the suite runs each
// 64-row case on it too); against kernel_ws.cuh 2.1-2.8 % slower on the long h_q 128 rows (b128 s8192 344.9 vs 335.5
// us), 3-7 % faster on b32 / b128 s512. The scorer is the period, ~2500 SM cycles per page (phase sums, warp 0): S
// issue ~580, the softmax ~1060 (its warps 1-3 share sub-partitions with the transposer warps) and ~230 more that show
// as the P slot wait (softmax work ptxas hoisted above it: that wait is ~free, see Slots above), waits. Accumulators
// that build their own V^T half instead of the transposer warps: +9.2 % against the default (+9.6 % transposing one
// page ahead).
// Row sums: the scorer publishes each row's sum over the page (quad-reduced); accumulator 0 adds it in lane t4 == 0
// of the row's quad and every other thread adds 0, so the epilogue's quad reduction and its sum over both
// warpgroups (ws_publish_row_sums) give the row's total once.
#include <cstdint>

#include "mla/ops/decode_running_max.h"
#include "ops/cuda/sm90/decode/clock_probe.cuh"
#include "ops/cuda/sm90/decode_fp8/config_ws3.h"
#include "ops/cuda/sm90/decode_fp8/kernel_ws.cuh"

namespace mla::sm90::decode_fp8 {

struct Ws3Barriers : WsBarriers<kWs3KStages, kWs3VStages> {
  __device__ uint32_t p_full(int slot) const { return q_empty() + 8 + 8 * slot; }
  __device__ uint32_t p_empty(int slot) const { return p_full(kWs3PSlots) + 8 * slot; }
};
using Ws3Schedule = WsSchedule<kWs3KStages, kWs3VStages>;

// 128 threads: S, softmax and P of every page of the part.
__device__ __forceinline__ void ws3_scorer(const decode::DecodeKernelParams& p, PartCursor cur, const Ws3Barriers& bars,
                                           uint8_t* smem, int tid) {
  constexpr Ws3SmemLayout L = ws3_smem_layout();
  const uint32_t s_q_tile = decode::smem_u32(smem + L.q_offset);
  const uint32_t s_k0 = decode::smem_u32(smem + L.k_offset);
  uint8_t* p_buf = smem + L.p_offset;
  float* s_m = reinterpret_cast<float*>(smem + L.m_offset);
  float* s_rs = reinterpret_cast<float*>(smem + L.rs_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int tile_row0 = blockIdx.y * kRowsPerCta;
  int row_local[2], row_i[2];  // the thread's two tile rows and their query positions (causal mask)
  decode::thread_rows(tile_row0, p.h_q, warp, g, row_local, row_i);
  float m_run[2] = {-INFINITY, -INFINITY};
  uint32_t qf[kWs3QRegSteps][4];
  int j = 0, seg = -1;
  int pending = -1;  // the slot whose P is stored but not yet signalled (see the file comment: deferred p_full)
  bool prev_end = true;
  decode::ConsumerPhaseSums ph;  // diagnostics only (../decode/phase_sums.cuh, phases_ws.cuh Ws3Phase)
  while (cur.valid()) {
    const bool first = prev_end;
    const bool end = cur.last_of_sequence();
    if (first) {
      // The previous segment's last P goes out now, not behind this segment's Q tile.
      if (pending >= 0) mbar_arrive(bars.p_full(pending));
      pending = -1;
      ++seg;
      mbar_wait(bars.q_full(), seg & 1);
      m_run[0] = m_run[1] = -INFINITY;
      load_q_frags<kWs3QRegSteps>(qf, s_q_tile, warp, lane);
    }
    ph.mark(kPh3Top);
    const int ks = j % kWs3KStages;
    mbar_wait(bars.k_full(ks), phase(j, kWs3KStages));
    ph.mark(kPh3KWait);
    float sc[8][4];
    float(&sc_flat)[32] = reinterpret_cast<float(&)[32]>(sc);
    scores_qreg<kWs3QRegSteps>(sc_flat, qf, s_q_tile, s_k0 + ks * kSlabTileBytes);
    ph.mark(kPh3SIssue);
    // P_{j-1} is signalled only now: its P.V then queues behind S_j on the tensor pipe instead of ahead of it,
    // so the scorer is not held in S_j's issue while the accumulators' products run.
    if (pending >= 0) mbar_arrive(bars.p_full(pending));
    ph.mark(kPh3Signal);
    decode::wgmma_wait_all();
    decode::fence_operands(sc_flat);
    ph.mark(kPh3SWait);
    mbar_arrive(bars.k_empty(ks));
    if (end) mbar_arrive(bars.q_empty());  // the segment's last S: the producer may bring the next Q tile
    int limit[2];
    const bool whole = visible_keys(p, cur, row_i, limit);
    const int slot = j % kWs3PSlots;
    ph.mark(kPh3Release);
    if (j >= kWs3PSlots) mbar_wait(bars.p_empty(slot), phase(j - kWs3PSlots, kWs3PSlots));
    ph.mark(kPh3PEmpty);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float mx = whole ? row_max<8>(sc, h) : mask_row_max<8>(sc, h, limit[h], t4);
      const float m_new = decode_running_max(m_run[h], mx, p.scale_log2, kDecodeFp8MaxSlackLog2);
      const float ms = m_new == -INFINITY ? 0.f : m_new * p.scale_log2;
      float p0[8], p1[8];
      float sum = 0.f;
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        p0[t] = decode::ex2_ftz(fmaf(sc[t][2 * h], p.scale_log2, -ms));
        p1[t] = decode::ex2_ftz(fmaf(sc[t][2 * h + 1], p.scale_log2, -ms));
        sum += p0[t] + p1[t];  // the row sum uses unrounded P (as the reference does)
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      store_p_e4m3(p_buf, slot, row_local[h], t4, p0, p1);
      if (t4 == 0) {
        s_m[slot * kRowsPerCta + row_local[h]] = m_new;
        s_rs[slot * kRowsPerCta + row_local[h]] = sum;
      }
      m_run[h] = m_new;
    }
    ph.mark(kPh3Softmax);
    decode::fence_proxy_async();  // P is a wgmma operand (async proxy) of both accumulators
    pending = slot;
    ph.mark(kPh3Fence);
    ph.page();
    prev_end = end;
    cur.advance(p);
    ++j;
  }
  if (pending >= 0) mbar_arrive(bars.p_full(pending));
  ph.store_consumer(0, warp, lane);  // printed as "wg 0"
}

// pv_issue_ws as two m64n128k32 per k32 step (wgmma_e4m3.h: the 512-thread launch's register cap): columns
// [0, 128) of this warpgroup's 256 into d[0..63], [128, 256) (V^T rows 128.. of its half) into d[64..127].
__device__ __forceinline__ void ws3_pv_issue(float (&d)[128], uint32_t s_p_page, uint32_t s_vt, int wg) {
  float(&lo)[64] = *reinterpret_cast<float(*)[64]>(&d[0]);
  float(&hi)[64] = *reinterpret_cast<float(*)[64]>(&d[64]);
#pragma unroll
  for (int ks = 0; ks < kBlockN / 32; ++ks) {
    const uint64_t da = decode::make_smem_desc(s_p_page + 32 * ks, 16, 1024);
    wgmma_m64n128k32_e4m3(lo, da, decode::make_smem_desc(s_vt + 64 * wg + 32 * ks, 16, 1024));
    wgmma_m64n128k32_e4m3(hi, da, decode::make_smem_desc(s_vt + 128 * 128 + 64 * wg + 32 * ks, 16, 1024));
  }
  decode::wgmma_commit();
}

// 128 threads of accumulator `wg`: O_half over every page of the part, one epilogue per segment.
__device__ __forceinline__ void ws3_accumulator(const Fp8DecodeParams& fp, PartCursor cur, const Ws3Barriers& bars,
                                                uint8_t* smem, int wg, int tid) {
  constexpr Ws3SmemLayout L = ws3_smem_layout();
  const decode::DecodeKernelParams& p = fp.d;
  const uint32_t s_p = decode::smem_u32(smem + L.p_offset);
  const uint32_t s_vt0 = decode::smem_u32(smem + L.vt_offset);
  const float* s_m = reinterpret_cast<const float*>(smem + L.m_offset);
  const float* s_rs = reinterpret_cast<const float*>(smem + L.rs_offset);
  float* s_l = reinterpret_cast<float*>(smem + L.l_offset);
  const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const bool adds_sums = wg == 0 && t4 == 0;  // see the file comment (row sums)
  // The epilogue's rows (this CTA's head tile) and split slots (the part's first item).
  const int tile_row0 = blockIdx.y * kRowsPerCta, valid_rows = min(kRowsPerCta, p.rows - tile_row0);
  const int32_t* part = decode::part_record(p);
  const int first_batch = part[kPartBeginBatch], first_split = part[kPartFirstSplit];
  WsState st;
  st.reset();
  float(&o_regs)[128] = reinterpret_cast<float(&)[128]>(st.o);
  int j = 0, epi = 0;
  decode::FusedMerges<false> merges;  // empty: ws3 leaves the merge to the combine (dispatch.cu)
  decode::ConsumerPhaseSums ph;  // diagnostics only (phases_ws.cuh Ws3Phase)
  while (cur.valid()) {
    const bool end = cur.last_of_sequence();
    const int slot = j % kWs3PSlots, vs = j % kWs3VStages;
    ph.mark(kPh3AccLoop);
    mbar_wait(bars.p_full(slot), phase(j, kWs3PSlots));
    ph.mark(kPh3AccPFull);
    float m_page[2], rs[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = warp * kRowGroup + g + 8 * h;
      m_page[h] = s_m[slot * kRowsPerCta + row];
      rs[h] = adds_sums ? s_rs[slot * kRowsPerCta + row] : 0.f;
    }
    rescale_o_ws(st, m_page, rs, p.scale_log2);  // O is not in flight here: every page's P.V is waited for below
    ph.mark(kPh3AccRescale);
    mbar_wait(bars.vt_full(vs), phase(j, kWs3VStages));
    ph.mark(kPh3AccVtWait);
    decode::fence_operands(o_regs);
    decode::wgmma_fence();
    ws3_pv_issue(o_regs, s_p + p_half_offset(slot), s_vt0 + vs * kVtBytes, wg);
    ph.mark(kPh3AccPvIssue);
    decode::wgmma_wait_all();
    decode::fence_operands(o_regs);
    ph.mark(kPh3AccPvWait);
    mbar_arrive(bars.vt_empty(vs));
    mbar_arrive(bars.p_empty(slot));
    ph.mark(kPh3AccRelease);
    ph.page();
    if (end) ws_fp8_epilogue(fp, st, s_l, epi, cur.b, first_batch, first_split, tile_row0, valid_rows, wg, warp, lane,
                             merges);
    cur.advance(p);
    ++j;
  }
  if (wg == 0) ph.store_consumer(1, warp, lane);  // printed as "wg 1"
}

__global__ void __launch_bounds__(kWs3Threads, 1)
    mla_decode_fp8_ws3_kernel(const __grid_constant__ Fp8DecodeParams fp) {
  constexpr Ws3SmemLayout L = ws3_smem_layout();
  const decode::DecodeKernelParams& p = fp.d;
  extern __shared__ __align__(1024) uint8_t smem[];
  // Let the combine grid (programmatic stream serialization) get scheduled as SMs free up.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (threadIdx.x == 0) decode::clock_probe_start();  // diagnostics builds only (../decode/clock_probe.cuh)
  const Ws3Barriers bars{{decode::smem_u32(smem + L.bar_offset)}};
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWs3KStages; ++s) {
      decode::mbar_init(bars.k_full(s), 1);
      decode::mbar_init(bars.k_empty(s), 128 + kWs3TransposeThreads);  // the scorer + the transposers
    }
    for (int v = 0; v < kWs3VStages; ++v) {
      decode::mbar_init(bars.vt_full(v), kWs3TransposeThreads);
      decode::mbar_init(bars.vt_empty(v), kWsConsumerThreads);  // both accumulators
    }
    decode::mbar_init(bars.q_full(), 1);
    decode::mbar_init(bars.q_empty(), 128);  // the scorer
    for (int s = 0; s < kWs3PSlots; ++s) {
      decode::mbar_init(bars.p_full(s), 128);
      decode::mbar_init(bars.p_empty(s), kWsConsumerThreads);
    }
    decode::mbar_init_fence();
  }
  __syncthreads();
  PartCursor cur;
  if (!cur.init_part(p)) return;  // an empty part: uniform across the CTA
  const int wg = decode::ws_warpgroup(), tid = threadIdx.x % 128;
  if (wg == kWs3Producer) {
    decode::setmaxnreg_dec<kWs3ProducerRegs>();
    if (tid == 0) {
      ws_producer<Ws3Schedule>(fp, cur, bars, decode::smem_u32(smem + L.q_offset), decode::smem_u32(smem + L.k_offset),
                               blockIdx.y * kRowsPerCta);
    } else if (tid >= 32) {
      ws_transposer<Ws3Schedule, kWs3TrWarps, false>(p, cur, bars, decode::smem_u32(smem + L.k_offset),
                                                     decode::smem_u32(smem + L.vt_offset), tid - 32);
    }
    return;
  }
  if (wg == kWs3Scorer) {
    decode::setmaxnreg_dec<kWs3ScorerRegs>();
    ws3_scorer(p, cur, bars, smem, tid);
    return;
  }
  decode::setmaxnreg_inc<kWs3AccRegs>();
  ws3_accumulator(fp, cur, bars, smem, wg, tid);
  if (threadIdx.x == 0) decode::clock_probe_stop();
}

}  // namespace mla::sm90::decode_fp8

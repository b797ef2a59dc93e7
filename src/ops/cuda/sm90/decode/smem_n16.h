#pragma once
// Shared-memory layout of the 16-row warp-specialized decode kernels (decode/kernel_n16ws.cuh, 16-bit KV;
// decode_fp8/kernel_h16.cuh, fp8 KV): the page ring, the Q slots, two P buffers, then the scorer <-> accumulator
// exchange buffers of a 16-row tile with 4 scorer warps (decode/handoff_n16.cuh), then the mbarriers.
namespace mla::sm90::decode {

struct SmemLayoutN16 {
  int k_offset, q_offset, p_offset, red_offset, alpha_offset, lsum_offset, mfin_offset, bar_offset, total;
};

// stage_bytes x stages of pages, q_tile_bytes x q_slots of Q tiles, two P buffers of p_buf_bytes; mbarriers full and
// empty per stage, then q_full per Q slot. The exchange buffers are per 16-row group (row_groups of them, each as
// below; the fp8 kernel's 32-row form has 2): group q's red is at red_offset + q * red_group_bytes(), and so on.
constexpr int kN16ExchangeRows = 16, kN16ScorerWarps = 4;
constexpr int red_group_bytes() { return 2 * kN16ExchangeRows * kN16ScorerWarps * 4; }   // also lsum's
constexpr int alpha_group_bytes() { return 2 * kN16ExchangeRows * 4; }                   // also mfin's
// full_per_stage: full barriers per stage (the 16-bit ws kernel's slab groups; 1 elsewhere).
constexpr SmemLayoutN16 smem_layout_n16(int stage_bytes, int stages, int q_tile_bytes, int q_slots, int p_buf_bytes,
                                        int row_groups = 1, int full_per_stage = 1) {
  SmemLayoutN16 s{};
  s.k_offset = 0;
  s.q_offset = s.k_offset + stages * stage_bytes;
  s.p_offset = s.q_offset + q_slots * q_tile_bytes;
  s.red_offset = s.p_offset + 2 * p_buf_bytes;                          // float [2][16 rows][4 scorer warps]: row-max partials
  s.alpha_offset = s.red_offset + row_groups * red_group_bytes();       // float [2][16]: O rescale of page j
  s.lsum_offset = s.alpha_offset + row_groups * alpha_group_bytes();    // float [2][16][4]: row-sum partials at a segment end
  s.mfin_offset = s.lsum_offset + row_groups * red_group_bytes();       // float [2][16]: the row max at a segment end
  s.bar_offset = s.mfin_offset + row_groups * alpha_group_bytes();      // mbarriers: full[stages][full_per_stage], empty[stages], q_full[q_slots]
  s.total = s.bar_offset + 8 * ((full_per_stage + 1) * stages + q_slots);
  return s;
}

}  // namespace mla::sm90::decode

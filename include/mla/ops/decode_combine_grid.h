#pragma once
// The combine grid of a decode step that merges its split sequences through the combine kernel (not the fused
// merge, plan_decode.h): its size and kind follow from the shapes alone, so the host picks them at launch (and a
// captured graph keeps them for every step). One definition, used by the launcher (ops/cuda/sm90/decode/combine.cu)
// and by `mlaserve plan decode`, which prints it. The per-row choice between the few-split and many-split merges is
// made on the device from the plan's split counts.
#include <cstdint>

#include "mla/core/macros.h"

namespace mla {

inline constexpr int kCombineMaxChunks = 8;  // column chunks per row: 512 / 8 = 64 columns a CTA
// One wave of the combine's 256-thread CTAs: 4 per SM (64 registers each, __launch_bounds__) on the H200's 132 SMs
// (the count only sizes the grid).
inline constexpr int kCombineWaveCtas = 132 * 4;
// Rows of up to this many splits are merged by one group of threads over all of them; more through column chunks.
inline constexpr int kCombineFewSplits = 8;
// ... and up to this many on the direct grid's smallest form (kCombineMaxChunks chunks: rows x batch <= 66).
inline constexpr int kCombineDirectFewSplits = 16;

// The combine CTA's threads (the kernels' block size) and a row's columns (static_asserted against kDimV there).
inline constexpr int kCombineGridThreads = 256;
inline constexpr int kCombineGridColumns = 512;
// combine_many's splits per load batch and thread. 9 (the 66 splits of an h_q 128 batch-1 row over 8 split lanes in
// one round of loads instead of a second round for two lanes; 64 registers, no spills) measured +0.1 to +0.35 us on
// the batch-1 rows of more than 8 splits (session 7 comb2 run 2).
inline constexpr int kCombineManyBatch = 8;

// How many of a direct grid's `chunks` column chunks merge a row of n splits that takes the many-split path: the
// fewest whose split lanes (threads / (columns / 4 / chunks): 2 per chunk) take all n in one load batch, at most
// `chunks`. More chunks only add split lanes to the final shared-memory reduction, which the float4-lane threads walk
// one lane after the other, and masked loads. Session 35 (c4) timed every chunk count on batch-1 rows: h_q 16 b1
// s1088 / s1536 / s2048 (17 / 24 / 32 splits) bf16 13.1 / 13.6 / 13.8 us at 8 chunks, 12.4 / 12.7 / 12.1 at 2;
// s4096 (64) 14.5 at 8, 13.9 at 4; s8192 (128) best at 8; fp8 alike. Evaluated per row on the device (the split
// counts are the plan's). Session 36 (this rule): bf16 h_q 16 b1 s1088-s2048 -1.4..-1.8 us, s4096 -1.0, h_q 128 b1
// s704 / s4096 -0.8 / -0.4 (BENCHMARKS.md "Session 36").
MLA_HD_INLINE int decode_combine_many_chunks(int n, int chunks) {
  // Closed form, no loop of divisions: the kernel evaluates it per CTA before its wait, on the critical path of the
  // CTAs that start as the decode kernel's last ones leave (a loop with two run-time divisions a step cost h_q 16 / 128
  // batch-1 rows 0.3-0.8 us, session 36 c1).
  constexpr int kPerChunk = kCombineManyBatch * (kCombineGridThreads / (kCombineGridColumns / 4));  // 8 x 2 lanes
  const int u = n <= kPerChunk ? 1 : n <= 2 * kPerChunk ? 2 : n <= 4 * kPerChunk ? 4 : kCombineMaxChunks;
  return u < chunks ? u : chunks;
}

struct DecodeCombineGrid {
  int chunks = 1;         // column chunks per (sequence, query row) item
  int64_t items = 0;      // rows x batch x chunks
  int64_t ctas = 0;       // the grid: one CTA per item (direct), else one wave
  bool direct = false;    // items fit one wave: combine_direct_kernel; else combine_list_kernel
  int few_splits = kCombineFewSplits;  // the most splits a row merged by one thread group may have
};

// rows: query rows per sequence (s_q x h_q); batch: sequences. Chunks: enough CTAs that a small batch's rows with
// many splits are read by most SMs (h_q 16 b1: 16 rows x 8 chunks), one chunk once rows x batch alone fills the
// machine.
inline DecodeCombineGrid decode_combine_grid(int rows, int batch) {
  DecodeCombineGrid g;
  const int64_t rb = static_cast<int64_t>(rows) * batch;
  // Doubling only: combine_many indexes a chunk's columns and threads by shifts (a power of two, 1..8).
  while (g.chunks < kCombineMaxChunks && rb * g.chunks * 2 <= kCombineWaveCtas) g.chunks *= 2;
  g.items = rb * g.chunks;
  g.direct = g.items <= kCombineWaveCtas;
  g.ctas = g.direct ? g.items : kCombineWaveCtas;
  // The 16-split path is a second instance of the direct kernel, for its 8-chunk grids only: inside the one kernel
  // its code cost h_q 128 b1 s4096 / s8192 (4-chunk grids, which never take it) 0.3-0.7 us (session 35).
  if (g.direct && g.chunks == kCombineMaxChunks) g.few_splits = kCombineDirectFewSplits;
  return g;
}

}  // namespace mla

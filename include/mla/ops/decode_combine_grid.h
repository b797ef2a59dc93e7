#pragma once
// The combine grid of a decode step that merges its split sequences through the combine kernel (not the fused
// merge, plan_decode.h): its size and kind follow from the shapes alone, so the host picks them at launch (and a
// captured graph keeps them for every step). One definition, used by the launcher (ops/cuda/sm90/decode/combine.cu)
// and by `mlaserve plan decode`, which prints it. The per-row choice between the few-split and many-split merges is
// made on the device from the plan's split counts.
#include <cstdint>

namespace mla {

inline constexpr int kCombineMaxChunks = 8;  // column chunks per row: 512 / 8 = 64 columns a CTA
// One wave of the combine's 256-thread CTAs: 4 per SM (64 registers each, __launch_bounds__) on the H200's 132 SMs
// (the count only sizes the grid).
inline constexpr int kCombineWaveCtas = 132 * 4;
// Rows of up to this many splits are merged by one group of threads over all of them; more through column chunks.
inline constexpr int kCombineFewSplits = 8;
// ... and up to this many on the direct grid's smallest form (kCombineMaxChunks chunks: rows x batch <= 66).
inline constexpr int kCombineDirectFewSplits = 16;

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

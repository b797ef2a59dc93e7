#pragma once
// The rows of its CTA's 64-row tile that a consumer thread's accumulators hold, shared by the 64-row
// warp-specialized kernels (decode/kernel_ws.cuh, decode_fp8ds/kernel_ws64.cuh, decode_fp8/kernel_ws.cuh and
// kernel_ws3.cuh), which set them up the same way before their page loops.
#include "ops/cuda/sm90/decode/config.h"

namespace mla::sm90::decode {

// A warp's m64 accumulator fragment covers rows [16 * warp, 16 * warp + 16) of the tile, and a thread holds rows
// g = lane / 4 and g + 8 of those (the wgmma D-fragment layout). Tile rows are (query position, head) pairs with
// the head fastest, so a row's query position, which the causal mask compares against, is its row / h_q.
//   tile_row0: the tile's first row (blockIdx.y * kRowsPerCta); row_local[h]: the thread's rows in the tile;
//   row_i[h]: their query positions.
__device__ __forceinline__ void thread_rows(int tile_row0, int h_q, int warp, int g, int (&row_local)[2],
                                            int (&row_i)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_local[h] = warp * kRowGroup + g + 8 * h;
    row_i[h] = (tile_row0 + row_local[h]) / h_q;
  }
}

}  // namespace mla::sm90::decode

#pragma once
// Which kernel runs the fp8 64-row tiles when MLA_DECODE_FP8_VARIANT64 is unset or `auto` (dispatch.cu).
//
// The warp-specialized ws kernel (kernel_ws.cuh) is the default. The scorer-split ws3 kernel (kernel_ws3.cuh) is 2-3 %
// slower on long parts but faster on steps whose sequences are all cut into short pieces, where the combine merges
// them anyway (ws3 has no fused merge). H200, session 44 c5 (h_q 128, with the lazy running max, us, ws -> ws3):
// - b8 s1024 / s2048 18.8 -> 17.5, 21.3 -> 20.2;
// - b16 s1024 / s2048 20.5 -> 20.0, 25.5 -> 24.4;
// - b32 s256 / s512 / s1024 19.1 -> 18.0, 21.3 -> 20.0, 25.7 -> 25.2;
// - a tie at b32 s2048 (16 pages a part), losses from 64 pages a part (b32 s8192 +2.5 %);
// - losses of 0.4-1.9 us at b64 / b128, whose whole sequences per part take the fused merge.
// h_q 64 was mixed in c6 (b16 s1024 -1.0 us, b32 s4096 +1.0, b64 +1..+1.9), so the rule is h_q 128's alone: ws3 runs
// a step only when the caller's geometry knows its pages (host seqlens: eager steps; a graph replayed across steps
// keeps ws), s_q is 1, h_q 128, at most kWs3MaxBatch sequences (every one cut into pieces), the parts average at most
// kWs3MaxMeanPartPages and no fused merge was asked for.
#include "mla/ops/plan_decode.h"

namespace mla::sm90::decode_fp8 {

constexpr int kWs3MaxMeanPartPages = 8, kWs3MaxBatch = 32;

inline bool auto_picks_ws3(const DecodePlanGeometry& g, bool fused_merge) {
  return g.tile_rows == kDecodeRowsPerCta && g.s_q == 1 && g.h_q == 128 && g.batch <= kWs3MaxBatch && !fused_merge &&
         g.host_mean_part_pages > 0 && g.host_mean_part_pages <= kWs3MaxMeanPartPages;
}

// Otherwise a step merged by the combine whose sequences average at least two CTA columns each (2 x batch <= parts)
// has its sequences cut into pieces, each written as a split partial through plain stores. The default kernel's TMA
// epilogue for direct segments (config_ws.h kTmaOut) buys nothing there and its code costs the whole kernel's
// register allocation (6 Q-register steps, not 8): h_q 128 b32 s4096 / s8192 54.4 -> 55.5 / 92.0 -> 93.5 us with it
// (session 49 c5). Such steps run WsSplit, the kernel as it was before. A shape rule, so a CUDA graph replayed across
// steps gets it too; a short sequence left whole by the plan is still right on WsSplit (plain stores), only slower.
inline bool auto_picks_ws_split(const DecodePlanGeometry& g, bool fused_merge) {
  return g.tile_rows == kDecodeRowsPerCta && !fused_merge && decode_plan_spreads_sequences(g);
}

}  // namespace mla::sm90::decode_fp8

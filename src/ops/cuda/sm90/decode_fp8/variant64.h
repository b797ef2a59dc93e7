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
// h_q 64 was mixed in c6 (b16 s1024 -1.0 us, b32 s4096 +1.0, b64 +1..+1.9, against ws with the fused merge of then),
// so the rule was h_q 128's alone, at most 32 sequences. Session 59 measured it under the combine (the engine's merge;
// bench/decode/NOTES.md "Session 59"), where a cut step's alternative is ws_split, and widened it: ws3 won on every
// spread cut step (decode_plan_spreads_sequences) of h_q 64 (b20-b66, s192-s1024, parts of 1-7 pages: -1.0..-15 %,
// b66 s640 25.5 -> 23.9 us) and h_q 128 b33 (s640 / s1024 -7.3 / -4.8 %), also at 9-16 pages (-0.8..-2.9 %); it lost
// 6-11 % on h_q 128 b48 / b64 (not spread: ws_qreg, 66 parts for 48-64 sequences). Session 60 (v2) took the rule to
// 16 pages a part: ws3 against ws_split on eight spread cut steps of 9.7-16 pages (h_q 64 b24-b66 s2048 / s4096, h_q
// 128 b20-b33 s2048-s3072) -2.4..0.0 % (h64 b66 s2048 41.4 -> 40.4 us), and a tie still at 19-23 pages (h64 b40 s4096
// 0.0 %, h128 b24 s4096 -0.9 %), where the rule stops for want of a gain. On steps of short whole sequences the
// TMA-store kernel beat it by 5-13 % (host_uncut). So ws3 runs a step when the caller's geometry knows its pages (host
// seqlens: eager steps; a graph replayed across steps keeps the shape rule below), s_q is 1, h_q 64 or 128, the step
// spreads its sequences and some are cut, the parts average at most kWs3MaxMeanPartPages, no fused merge was asked
// for, and at h_q 64 at least kWs3MinBatch64 sequences. Below that,
// measured under the combine in session 60 (c2, three passes): ws3 against ws_split b1 s8192 / s16384 -1.8 / -2.2 %,
// b4 s4096 / b8 s2048 / b12 s4096 +1.1 / +0.6 / +1.4 %, b16 s2048 -2.2 %: no rule to gain from, ws_split stays.
#include "mla/core/env_knob.h"
#include "mla/core/status.h"
#include "mla/ops/plan_decode.h"

namespace mla::sm90::decode_fp8 {

constexpr int kWs3MaxMeanPartPages = 16, kWs3MinBatch64 = 16;

inline bool auto_picks_ws3(const DecodePlanGeometry& g, bool fused_merge) {
  const bool heads = g.h_q == 128 || (g.h_q == 64 && g.batch >= kWs3MinBatch64);
  return g.tile_rows == kDecodeRowsPerCta && g.s_q == 1 && heads && !fused_merge && decode_plan_spreads_sequences(g) &&
         g.host_mean_part_pages > 0 && g.host_mean_part_pages <= kWs3MaxMeanPartPages;
}

// Otherwise a step merged by the combine whose sequences average at least two CTA columns each (2 x batch <= parts)
// has its sequences cut into pieces, each written as a split partial through plain stores. The default kernel's TMA
// epilogue for direct segments (config_ws.h kTmaOut) buys nothing there and its code costs the whole kernel's
// register allocation (6 Q-register steps, not 8): h_q 128 b32 s4096 / s8192 54.4 -> 55.5 / 92.0 -> 93.5 us with it
// (session 49 c5). Such steps run WsSplit, the kernel as it was before. Without seqlens a shape rule, so a CUDA graph
// replayed across steps gets it too; a short sequence left whole by the plan is still right on WsSplit (plain stores),
// only slower: an eager step whose geometry knows nothing is cut (host_uncut) keeps ws (5-20 % faster there, h_q 64 /
// 128 b17-b66 s128-s320, session 59).
inline bool auto_picks_ws_split(const DecodePlanGeometry& g, bool fused_merge) {
  return g.tile_rows == kDecodeRowsPerCta && !fused_merge && decode_plan_spreads_sequences(g);
}

// MLA_DECODE_FP8_VARIANT64: `auto` (or unset: auto_variant64 below, the ws_qreg kernel, ws3 on steps of short split
// parts, or ws_split -- the same kernel without the TMA-store epilogue, with 8 Q-register steps -- on other steps whose
// sequences are all cut; the rules above), or one kernel for every step: the warp-specialized wgmma kernel (kernel_ws.cuh)
// with S's last k32 steps taking Q from registers (`ws_qreg`, the default since run W17: H200 h128 b128 s8192 343-345 µs
// in runs W17-W18 with 6 steps, 339 µs with 8 in session 18; 6 again with session 49's TMA-store epilogue, 318 µs),
// the same kernel with Q from shared memory in every step
// (`ws_ahead`, the default until then: 352-353 µs in the same runs), the 256-thread mma.sync kernel (`mma_sync`,
// kept for comparison) or the scorer-split kernel (`ws3`, kernel_ws3.cuh, experimental: 2.1-2.8 % slower on the long
// h_q 128 rows in session 20). Read on every call (one getenv, as MLA_DECODE_FP8_H16_EARLY_S below), so the tests run
// ws3 cases beside the default's; a bad value fails every fp8 call, whatever its rows. The variants that lost are in
// NOTES_fp8.md (runs W2-W18).
enum class Variant64 { kWsQReg, kMmaSync, kWsAhead, kWs3, kWsSplit };

// The kernel `auto` (or an unset knob) runs for a step of geometry g; fused_merge: the call passes merge counters.
inline Variant64 auto_variant64(const DecodePlanGeometry& g, bool fused_merge) {
  return auto_picks_ws3(g, fused_merge)        ? Variant64::kWs3
         : auto_picks_ws_split(g, fused_merge) ? Variant64::kWsSplit
                                               : Variant64::kWsQReg;
}

// The knob resolved for a step (dispatch.cu; the fp8 test suite, to pick its reference's sums).
inline Status variant64(const DecodePlanGeometry& g, bool fused_merge, Variant64* v) {
  const EnvKnob k =
      read_env_knob("MLA_DECODE_FP8_VARIANT64", {"ws_qreg", "mma_sync", "ws_ahead", "ws3", "ws_split", "auto"});
  MLA_TRY(k.status);
  *v = k.index < 0 || k.index == 5 ? auto_variant64(g, fused_merge)
                                   : static_cast<Variant64>(k.index);  // the list's order is Variant64's
  return Status::ok();
}

}  // namespace mla::sm90::decode_fp8

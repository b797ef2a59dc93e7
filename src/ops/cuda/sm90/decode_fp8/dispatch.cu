// Row-group dispatch of the fp8 decode kernel, then the shared combine (bf16 output, as for bf16 KV).
#include <cstdlib>
#include <string>

#include "mla/core/env_knob.h"
#include "ops/cuda/sm90/decode/launch.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode_fp8/config.h"
#include "ops/cuda/sm90/decode_fp8/config_h16.h"
#include "ops/cuda/sm90/decode_fp8/launch.h"
#include "ops/cuda/sm90/decode_fp8/variant64.h"

namespace mla::sm90::decode_fp8 {
namespace {

// MLA_DECODE_FP8_L2_PREFETCH=N (0..8, default 0): pages prefetched into L2 ahead of the stages by the mma.sync
// kernel (32-row tiles, 64-row `mma_sync`; read once).
// Strict like every knob: a value outside 0..8 is an error, not a silent clamp.
const EnvKnob& l2_prefetch_knob() {
  static const EnvKnob k = read_env_knob("MLA_DECODE_FP8_L2_PREFETCH", {"0", "1", "2", "3", "4", "5", "6", "7", "8"});
  return k;
}
int l2_prefetch_pages() { return l2_prefetch_knob().index < 0 ? 0 : l2_prefetch_knob().index; }

// MLA_DECODE_FP8_H16_EARLY_S = auto (default) | always | never: forces the 16- and 32-row kernel's early S of page
// j + 1 (kernel_h16.cuh) on or off, for tests: by default a 16-row page takes it when page j + 1 has landed in time, so
// which path runs depends on timing (the 32-row form takes it always: launch_impl_h16.cuh). Read on every 16- and
// 32-row call, unlike the L2 prefetch knob above, so a test can switch it between cases (one getenv, ~0.1 us of host
// time against a call of 9+ us); strict like every knob.
Status h16_early_s(int* mode) {
  const EnvKnob k = read_env_knob("MLA_DECODE_FP8_H16_EARLY_S", {"auto", "always", "never"});
  MLA_TRY(k.status);
  *mode = k.index < 0 ? kEarlySAuto : k.index;  // the list's order is H16EarlyS's
  return Status::ok();
}

}  // namespace

Status run_decode_fp8(const decode::DecodeKernelParams& kp, float out_scale, const DecodePlanGeometry& g,
                      int64_t num_pages, N32Mode n32, cudaStream_t stream) {
  MLA_TRY(l2_prefetch_knob().status);
  Variant64 v = Variant64::kWsQReg;
  MLA_TRY(variant64(g, kp.merge_counters != nullptr, &v));
  Fp8DecodeParams p{};
  p.d = kp;
  p.out_scale = out_scale;
  p.l2_prefetch = l2_prefetch_pages();
  p.last_page = static_cast<int>(num_pages - 1);
  const dim3 grid(g.num_parts, g.num_head_tiles);
  // Active 16-row groups of the first tile: short tiles (h_q 16/32 with few query rows) skip empty groups;
  // 3 groups run the 64-row variant with one idle row group.
  const int rows_first_tile = kp.rows < g.tile_rows ? kp.rows : g.tile_rows;
  const int groups = rows_first_tile / kRowGroup;
  // Narrow tiles (decode_plan_narrow_tiles: 16 rows of h_q 64 / 128) are one row group: the keys-as-M kernel below,
  // merged by the combine (the caller passes no merge_counters for them).
  bool partials_bf16 = false;  // the 64-row kernel writes bf16 partials (decode::write_segment_ws), the others fp32
  // The fused merge (kp.merge_counters set by the caller) is in the keys-as-M kernel and the 64-row ws kernel (ws_qreg,
  // ws_ahead); the mma.sync kernels, ws3 and ws_split leave it to the combine.
  const Fp8KernelFamily family = fp8_kernel_family(kp.rows, g.tile_rows, n32, v == Variant64::kMmaSync);
  const bool h16 = family == Fp8KernelFamily::kH16, mma = family == Fp8KernelFamily::kMmaSync;
  if (mma || (!h16 && (v == Variant64::kWs3 || v == Variant64::kWsSplit))) p.d.merge_counters = nullptr;
  if (h16) {
    // 16 rows (h_q 16, s_q 1) or 32 (h_q 32 s_q 1, h_q 16 s_q 2; the only tile of its sequence): the keys-as-M wgmma
    // kernel, one or two row groups.
    MLA_TRY(h16_early_s(&p.h16_early_s));
    MLA_TRY(encode_tensor_maps_fp8_h16(&p.d, num_pages, static_cast<int64_t>(kp.batch) * kp.rows));
    MLA_TRY(groups == 1 ? launch_decode_fp8_h16(p, grid, stream) : launch_decode_fp8_n32(p, grid, stream));
  } else if (mma) {
    // Two row groups (32-47 rows) or four.
    MLA_TRY(groups == 2 ? launch_decode_fp8<2>(p, grid, stream) : launch_decode_fp8<4>(p, grid, stream));
  } else {
    // 2-3 groups: the rows past them compute rows of the next sequence's q (or TMA zeros past q's end), never written.
    MLA_TRY(encode_tensor_maps_fp8(&p.d, num_pages, static_cast<int64_t>(kp.batch) * kp.rows));
    if (v == Variant64::kWsAhead) {
      MLA_TRY(launch_decode_fp8_ws<WsAhead>(p, grid, stream));
    } else if (v == Variant64::kWs3) {
      MLA_TRY(launch_decode_fp8_ws3(p, grid, stream));
    } else if (v == Variant64::kWsSplit) {
      MLA_TRY(launch_decode_fp8_ws_combined<WsSplit>(p, grid, stream));
    } else {
      MLA_TRY(launch_decode_fp8_ws<WsQReg>(p, grid, stream));
    }
    partials_bf16 = true;
  }
  if (p.d.merge_counters != nullptr) return Status::ok();  // merged by the decode kernel
  return decode::launch_combine<decode::Bf16Traits>(p.d, stream, partials_bf16);
}

}  // namespace mla::sm90::decode_fp8

#pragma once
// Kernel parameters of the fp8 decode kernel, passed __grid_constant__. The 16-bit kernel's parameter
// block carries everything shared (pointers, shapes, plan, partial buffers) so the part scheduler and
// the combine kernel run on it unchanged; the fp8 scale folding is spelled out here.
#include "ops/cuda/sm90/decode/params.h"

namespace mla::sm90::decode_fp8 {

// Early S of the 16-row kernel (kernel_h16.cuh, scorer): whether page j + 1's S may be issued during page j's
// softmax. Values in the order of MLA_DECODE_FP8_H16_EARLY_S's allowed list (dispatch.cu).
enum H16EarlyS : int {
  kEarlySAuto = 0,    // when page j + 1 has landed at page j's row-max exchange (a probe): the default
  kEarlySAlways = 1,  // wait for page j + 1 there, then issue it early (every page but a segment's last)
  kEarlySNever = 2,   // never: each page's S after the previous page's hand-off (the schedule before run H10)
};

struct Fp8DecodeParams {
  // q [b, s_q, h_q, 576] e4m3 codes; kv_cache [num_pages, 64, 576] e4m3 codes; out [b, s_q, h_q, 512] bf16.
  // d.softmax_scale = softmax_scale * q_scale * k_scale (scores are raw e4m3 dot products), and
  // d.scale_log2 = that * log2(e); so the lse comes out in the caller's units.
  decode::DecodeKernelParams d;
  float out_scale;  // k_scale: O accumulates P * raw e4m3 V, the output (and every partial) is O / l * k_scale
  int l2_prefetch;  // pages to prefetch into L2 ahead of the shared-memory stages (0: off; opt-in knob)
  int h16_early_s;  // H16EarlyS: which 16-row kernel instantiation runs (launch_impl_h16.cuh); host side only
  int last_page;    // num_pages - 1: the 16-row kernel loads this page with 2D boxes (page_tma.cuh)
};

// The shared block (decode/launch_kernel.cuh's launch_merging_kernel reads merge_counters through it).
inline const decode::DecodeKernelParams& decode_params_of(const Fp8DecodeParams& p) { return p.d; }

}  // namespace mla::sm90::decode_fp8

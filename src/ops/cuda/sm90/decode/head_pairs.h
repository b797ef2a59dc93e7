#pragma once
// Whether a 64-row decode launcher runs its head tiles in pairs (launch_kernel.cuh launch_kernel's `pair`).
#include "mla/core/env_knob.h"
#include "mla/core/status.h"

namespace mla::sm90::decode {

// Head-tile pairs (session 30, bench/decode/NOTES.md "Session 30"): the CTAs of head tiles 2t and 2t + 1 of one plan
// part read the same pages, the second mostly out of L2. Launched as a (1, 2, 1) cluster they run on one GPC: on the
// H200's h_q 128 long rows the bf16 64-row kernel ran 2.5-4 % faster, fp8 and fp8_ds ~1 % (fp8_ds b128 s512 +0.7 us).
// No cluster feature is used (no multicast, no distributed shared memory, no cluster barrier): the CTAs stay
// independent. MLA_DECODE_HEAD_PAIRS = auto (default: pairs) | off (plain grids), read on every call so the tests run
// both launches; strict like every knob.
inline Status decode_head_pairs(bool* pair) {
  const EnvKnob k = read_env_knob("MLA_DECODE_HEAD_PAIRS", {"auto", "off"});
  MLA_TRY(k.status);
  *pair = k.index != 1;
  return Status::ok();
}

}  // namespace mla::sm90::decode

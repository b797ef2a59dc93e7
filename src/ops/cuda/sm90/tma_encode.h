// The driver's cuTensorMapEncodeTiled for every sm90 kernel that builds TMA descriptors on the host.
#pragma once

#include <cudaTypedefs.h>

#include "mla/core/status.h"

namespace mla::sm90 {

// Looked up once through the runtime's driver entry point, so nothing links against libcuda (the binaries
// carry a static cudart); nullptr when the driver does not offer it (callers turn that into a Status).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encode_fn();

// The L2 promotion of the KV-cache tensor maps: `dflt` (each map's own), unless the experiment knob
// MLA_DECODE_KV_L2_PROMOTION = none | 64 | 128 | 256 (read once, strict) replaces it for every KV map. Host-side
// only, so the kernels' code is the same under every value (an A/B in one binary measures the memory system alone).
Status kv_l2_promotion(CUtensorMapL2promotion dflt, CUtensorMapL2promotion* out);

}  // namespace mla::sm90

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

// The KV cache ([rows, row_bytes], `type` elements) as a 3D map of 128-byte slabs: (128 bytes of columns, row, slab)
// with strides (row_bytes, 128), so a box of (128 bytes, box_rows, slabs) -- one page -- lands slab-major ([slab][row]
// [128 B], 128B swizzle: the wgmma / swizzle_slab layout) in one copy instead of one 2D box per slab. The slab stride
// is below the row stride: the driver takes strides in any order (cuda.h documents packed layouts only; r580 accepts
// it). Used by the fp8 16-row kernel (decode_fp8/page_tma.cuh) and the 16-bit 16-row tiles (decode/pages.cuh).
// box_slabs (0: all `slabs`): a box of that many slabs instead, so a page comes in slabs / box_slabs copies
// (the 16-bit 16-row ws kernel's slab groups, kernel_n16ws.cuh).
Status encode_kv_slabs_3d(CUtensorMap* map, const void* base, int64_t rows, CUtensorMapDataType type, int64_t row_bytes,
                          int slabs, int box_rows, CUtensorMapL2promotion promotion, const char* op, int box_slabs = 0);

}  // namespace mla::sm90

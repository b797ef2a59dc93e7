// fp8 (e4m3) KV, 64-row tiles, warp-specialized: a probe, the default schedule plus a second ldmatrix pass over
// each K page (config_ws.h WsDiagSmem; MLA_DECODE_FP8_VARIANT64=ws_diag_smem; run W17 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsDiagSmem>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8

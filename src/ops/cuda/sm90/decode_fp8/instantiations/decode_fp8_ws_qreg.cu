// fp8 (e4m3) KV, 64-row tiles, warp-specialized: the default, the ahead schedule with S's last 8 k32 steps taking Q
// from registers (config_ws.h WsQReg; MLA_DECODE_FP8_VARIANT64 unset or ws_qreg; runs W17-W18 in
// bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsQReg>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8

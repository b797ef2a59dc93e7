// fp8 (e4m3) KV, 64-row tiles, warp-specialized: ws_qreg8 plus the owner's P.V with P from registers
// (config_ws.h WsQReg8POwn; MLA_DECODE_FP8_VARIANT64=ws_qreg8_pown; run W18 in bench/decode/NOTES_fp8.md).
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws<WsQReg8POwn>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8

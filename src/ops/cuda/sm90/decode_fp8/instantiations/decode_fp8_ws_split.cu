// fp8 (e4m3) KV, 64-row tiles, warp-specialized, for steps whose sequences are all cut into pieces (config_ws.h
// WsSplit: plain stores, 8 Q-register steps; dispatch.cu auto_picks_ws_split), combine-merged only.
#include "ops/cuda/sm90/decode_fp8/launch_impl_ws.cuh"

namespace mla::sm90::decode_fp8 {
template Status launch_decode_fp8_ws_combined<WsSplit>(const Fp8DecodeParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode_fp8

// fp16 KV cache, 64-row tiles, warp-specialized (TMA producer + two wgmma consumer warpgroups).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode_ws<Fp16Traits>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode

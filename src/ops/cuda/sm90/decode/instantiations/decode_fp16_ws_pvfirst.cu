// fp16 KV cache, 64-row tiles, warp-specialized (kPvFirst true, kSlabBars false: see kernel_ws.cuh).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode_ws<Fp16Traits, true, false>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode

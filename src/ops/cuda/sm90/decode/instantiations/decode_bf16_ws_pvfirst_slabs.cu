// bf16 KV cache, 64-row tiles, warp-specialized (kPvFirst true, kSlabBars true: see kernel_ws.cuh).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode_ws<Bf16Traits, true, true>(const DecodeKernelParams&, dim3, cudaStream_t, bool);
}  // namespace mla::sm90::decode

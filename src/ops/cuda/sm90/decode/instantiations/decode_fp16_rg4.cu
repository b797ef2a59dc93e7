// fp16 KV cache, 4 active 16-row group(s) per CTA, mma.sync math.
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode<Fp16Traits, 4, false>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode

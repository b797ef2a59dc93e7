// fp16 KV cache, 16-row tiles (h_q 16, s_q 1), warp-specialized (kernel_n16ws.cuh).
#include "ops/cuda/sm90/decode/launch_impl_n16ws.cuh"

namespace mla::sm90::decode {
template Status launch_decode_n16ws<Fp16Traits>(const DecodeKernelParams&, dim3, cudaStream_t);
}  // namespace mla::sm90::decode

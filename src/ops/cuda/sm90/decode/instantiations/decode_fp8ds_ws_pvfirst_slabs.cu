// fp8_ds KV cache, 64-row tiles, warp-specialized with a dequantizing producer (producer_ws_fp8ds.cuh;
// kPvFirst true, kSlabBars true: see kernel_ws.cuh).
#include "ops/cuda/sm90/decode/launch_impl.cuh"

namespace mla::sm90::decode {
template Status launch_decode_ws<Fp8DsTraits, true, true>(const DecodeKernelParams&, dim3, cudaStream_t, bool);
}  // namespace mla::sm90::decode

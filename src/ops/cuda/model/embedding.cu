// embedding: one warp per token row, 8 values per lane per step.
#include "mla/ops/embedding.h"

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "embedding";

template <class Out>
struct EmbeddingKernelParams {
  const __nv_bfloat16* table;  // [vocab, hidden]
  const int32_t* ids;          // [t]
  Out* out;                    // [t, ld_out]
  int64_t rows, hidden, vocab, ld_out;
};

template <class Out>
__global__ void embedding_kernel(const __grid_constant__ EmbeddingKernelParams<Out> p) {
  const int64_t row = int64_t(blockIdx.x) * model_ops::kWarpsPerBlock + threadIdx.x / 32;
  if (row >= p.rows) return;
  const int lane = threadIdx.x % 32;
  const int32_t id = p.ids[row];
  const bool valid = id >= 0 && id < p.vocab;
  for (int64_t c = lane * 8; c < p.hidden; c += 256) {
    float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (valid) model_ops::load8(p.table + int64_t(id) * p.hidden + c, v);
    model_ops::store8(p.out + row * p.ld_out + c, v);
  }
}

template <class Out>
Status launch(const EmbeddingParams& p, Stream stream) {
  const EmbeddingKernelParams<Out> kp{.table = p.table.ptr<const __nv_bfloat16>(),
                                      .ids = p.token_ids.ptr<const int32_t>(),
                                      .out = p.out.ptr<Out>(),
                                      .rows = p.out.shape[0],
                                      .hidden = p.out.shape[1],
                                      .vocab = p.table.shape[0],
                                      .ld_out = p.out.stride[0]};
  embedding_kernel<Out><<<model_ops::rows_grid(kp.rows), 32 * model_ops::kWarpsPerBlock, 0,
                          reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace

Status embedding(const EmbeddingParams& p, Stream stream) {
  if (!(p.table.rank == 2 && p.table.dtype == DType::kBf16 && p.table.is_contiguous() && p.table.data))
    return Status::invalid(kOp, "table: expected contiguous bf16[vocab, hidden], got " + p.table.str());
  MLA_TRY(model_ops::check_rows_view(kOp, "out", p.out, {DType::kBf16, DType::kFp32}, -1, p.table.shape[1]));
  MLA_TRY(model_ops::check_array(kOp, "token_ids", p.token_ids, DType::kInt32, p.out.shape[0]));
  if (p.out.shape[0] == 0) return Status::ok();
  return p.out.dtype == DType::kFp32 ? launch<float>(p, stream) : launch<__nv_bfloat16>(p, stream);
}

}  // namespace mla::cuda

// gather_rows / scatter_rows: one warp per copied row, 16 bytes per lane per step (a byte copy: the
// dtype only sets the row width).
#include "mla/ops/gather_rows.h"

#include "mla/core/cuda_check.h"
#include "mla/ops/model_ops_common.h"
#include "vec8.cuh"

namespace mla::cuda {
namespace {

struct RowCopyKernelParams {
  const uint8_t* x;
  const int32_t* rows;  // [n]
  uint8_t* out;
  int64_t n, row_bytes, ld_x_bytes, ld_out_bytes;
  int64_t limit;  // rows of the indexed side: out-of-range indices are skipped
  bool scatter;
};

__global__ void row_copy_kernel(const __grid_constant__ RowCopyKernelParams p) {
  const int64_t i = int64_t(blockIdx.x) * model_ops::kWarpsPerBlock + threadIdx.x / 32;
  if (i >= p.n) return;
  const int64_t r = p.rows[i];
  if (r < 0 || r >= p.limit) return;
  const uint8_t* src = p.x + (p.scatter ? i : r) * p.ld_x_bytes;
  uint8_t* dst = p.out + (p.scatter ? r : i) * p.ld_out_bytes;
  for (int64_t b = (threadIdx.x % 32) * 16; b < p.row_bytes; b += 32 * 16)
    *reinterpret_cast<uint4*>(dst + b) = *reinterpret_cast<const uint4*>(src + b);
}

Status run(const char* op, const RowCopyParams& p, bool scatter, Stream stream) {
  MLA_TRY(model_ops::check_rows_view(op, "x", p.x, {DType::kBf16, DType::kFp32}, -1, -1));
  MLA_TRY(model_ops::check_rows_view(op, "out", p.out, {p.x.dtype}, -1, p.x.shape[1]));
  const int64_t n = scatter ? p.x.shape[0] : p.out.shape[0];
  MLA_TRY(model_ops::check_array(op, "rows", p.rows, DType::kInt32, n));
  if (n == 0) return Status::ok();
  const int64_t es = static_cast<int64_t>(dtype_size(p.x.dtype));
  const RowCopyKernelParams kp{.x = p.x.ptr<const uint8_t>(),
                               .rows = p.rows.ptr<const int32_t>(),
                               .out = p.out.ptr<uint8_t>(),
                               .n = n,
                               .row_bytes = p.x.shape[1] * es,
                               .ld_x_bytes = p.x.stride[0] * es,
                               .ld_out_bytes = p.out.stride[0] * es,
                               .limit = scatter ? p.out.shape[0] : p.x.shape[0],
                               .scatter = scatter};
  row_copy_kernel<<<model_ops::rows_grid(n), 32 * model_ops::kWarpsPerBlock, 0,
                    reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(op);
  return Status::ok();
}

}  // namespace

Status gather_rows(const RowCopyParams& p, Stream stream) { return run("gather_rows", p, false, stream); }
Status scatter_rows(const RowCopyParams& p, Stream stream) { return run("scatter_rows", p, true, stream); }

}  // namespace mla::cuda

#include "small_m_gemm.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mla/core/cuda_check.h"

namespace mla::model::cuda_backend {
namespace {

constexpr const char* kOp = "small_m_linear";
constexpr int kBlockMs[4] = {16, 32, 64, 128};

int64_t tiles_of(int64_t rows, int bm) { return rows / bm + 1; }

}  // namespace

int64_t small_m_table_bytes(int64_t max_rows) {
  int64_t entries = max_rows + 1;
  for (int bm : kBlockMs) entries += tiles_of(max_rows, bm);
  return entries * 2 * static_cast<int64_t>(sizeof(int32_t));
}

Status init_small_m_tables(int64_t max_rows, void* device, SmallMTables* out) {
  if (max_rows < 1 || !device) return Status::invalid(kOp, "tables for " + std::to_string(max_rows) + " rows");
  std::vector<int32_t> h;
  h.reserve(static_cast<size_t>(small_m_table_bytes(max_rows) / 4));
  for (int64_t t = 0; t <= max_rows; ++t) h.push_back(0), h.push_back(static_cast<int32_t>(t));
  size_t starts[4];
  for (int i = 0; i < 4; ++i) {
    starts[i] = h.size();
    for (int64_t j = 0; j < tiles_of(max_rows, kBlockMs[i]); ++j) h.push_back(0), h.push_back(static_cast<int32_t>(j * kBlockMs[i]));
  }
  MLA_CUDA_TRY(kOp, cudaMemcpy(device, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  const auto* base = static_cast<const int32_t*>(device);
  out->max_rows = max_rows;
  out->offsets = base;
  for (int i = 0; i < 4; ++i) out->tiles[i] = base + starts[i];
  return Status::ok();
}

int small_m_block_m(int64_t t) { return t <= 16 ? 16 : t <= 32 ? 32 : 64; }

bool small_m_eligible(const SmallMTables& tables, const TensorView& x, const TensorView& w, const TensorView& out,
                      GroupedEpilogue epi) {
  const char* e = std::getenv("MLA_DENSE_PATH");
  if (!(e && std::strcmp(e, "grouped") == 0)) return false;
  if (x.rank != 2 || w.rank != 2 || out.rank != 2 || out.dtype != DType::kBf16 || x.dtype != DType::kBf16) return false;
  const int64_t t = x.shape[0], n = w.shape[0], k = w.shape[1];
  const bool silu = epi == GroupedEpilogue::kSiluMul;
  return t >= 1 && t <= tables.max_rows && w.is_contiguous() && k % 8 == 0 && n % (silu ? 16 : 8) == 0 &&
         x.stride[1] == 1 && x.stride[0] % 8 == 0 && out.stride[1] == 1 && out.stride[0] % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(out.data) % 16 == 0;
}

Status small_m_linear(const SmallMTables& tables, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                      TensorView out, Stream stream) {
  const int64_t t = x.rank == 2 ? x.shape[0] : -1;
  if (t < 1 || t > tables.max_rows || w.rank != 2)
    return Status::invalid(kOp, "x " + x.str() + " · w " + w.str() + "ᵀ: 1 <= rows <= " + std::to_string(tables.max_rows));
  const int bm = small_m_block_m(t);
  const int slot = bm == 16 ? 0 : bm == 32 ? 1 : bm == 64 ? 2 : 3;
  const int64_t nt = (t + bm - 1) / bm;
  GroupedGemmParams p;
  p.a = x;
  p.w = TensorView::contiguous(w.data, DType::kBf16, {1, w.shape[0], w.shape[1]});
  p.expert_offsets = TensorView::contiguous(const_cast<int32_t*>(tables.offsets + 2 * t), DType::kInt32, {2});
  p.tiles = TensorView::contiguous(const_cast<int32_t*>(tables.tiles[slot]), DType::kInt32, {nt, 2});
  p.block_m = bm;
  p.epilogue = epi;
  p.out = out;
  return cuda::grouped_gemm(p, stream);
}

}  // namespace mla::model::cuda_backend

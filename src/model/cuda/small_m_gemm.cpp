#include "small_m_gemm.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "l2_flush.h"
#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"

namespace mla::model::cuda_backend {

// (rows bucket, n, k, epilogue, x row stride, out row stride) → block_m of the grouped kernel, 0: fallback.
struct SmallMChoices {
  std::map<std::array<int64_t, 6>, int> by_shape;
};

namespace {

constexpr const char* kOp = "small_m_linear";
constexpr int kBlockMs[4] = {16, 32, 64, 128};

int64_t tiles_of(int64_t rows, int bm) { return rows / bm + 1; }

int64_t rows_bucket(int64_t t) {
  int64_t b = 1;
  while (b < t) b <<= 1;
  return b;
}

// The kernel's layout rules (grouped_gemm.h) for this call.
bool shape_ok(const SmallMTables& tb, const TensorView& x, const TensorView& w, const TensorView& out,
              GroupedEpilogue epi) {
  if (x.rank != 2 || w.rank != 2 || out.rank != 2 || out.dtype != DType::kBf16 || x.dtype != DType::kBf16 ||
      w.dtype != DType::kBf16)
    return false;
  const int64_t t = x.shape[0], n = w.shape[0], k = w.shape[1];
  const bool silu = epi == GroupedEpilogue::kSiluMul;
  return t >= 1 && t <= tb.max_rows && w.is_contiguous() && k % 8 == 0 && n % (silu ? 16 : 8) == 0 &&
         x.shape[1] == k && out.shape[0] == t && out.shape[1] == (silu ? n / 2 : n) && x.stride[1] == 1 &&
         x.stride[0] % 8 == 0 && out.stride[1] == 1 && out.stride[0] % 8 == 0 &&
         reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(out.data) % 16 == 0;
}

}  // namespace

int64_t small_m_table_bytes(int64_t max_rows) {
  int64_t entries = max_rows + 1;
  for (int bm : kBlockMs) entries += tiles_of(max_rows, bm);
  return entries * 2 * static_cast<int64_t>(sizeof(int32_t));
}

Status init_small_m_tables(int64_t max_rows, void* device, const void* flush, size_t flush_bytes, SmallMTables* out) {
  if (max_rows < 1 || !device) return Status::invalid(kOp, "tables for " + std::to_string(max_rows) + " rows");
  std::vector<int32_t> h;
  h.reserve(static_cast<size_t>(small_m_table_bytes(max_rows) / 4));
  for (int64_t t = 0; t <= max_rows; ++t) h.push_back(0), h.push_back(static_cast<int32_t>(t));
  size_t starts[4];
  for (int i = 0; i < 4; ++i) {
    starts[i] = h.size();
    for (int64_t j = 0; j < tiles_of(max_rows, kBlockMs[i]); ++j)
      h.push_back(0), h.push_back(static_cast<int32_t>(j * kBlockMs[i]));
  }
  MLA_CUDA_TRY(kOp, cudaMemcpy(device, h.data(), h.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  const auto* base = static_cast<const int32_t*>(device);
  out->max_rows = max_rows;
  out->offsets = base;
  for (int i = 0; i < 4; ++i) out->tiles[i] = base + starts[i];
  out->flush = flush, out->flush_bytes = flush_bytes;
  out->choices = std::make_shared<SmallMChoices>();
  return Status::ok();
}

int small_m_block_m(int64_t t) { return t <= 16 ? 16 : t <= 32 ? 32 : 64; }

Status small_m_linear(const SmallMTables& tables, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                      TensorView out, Stream stream, int block_m) {
  const int64_t t = x.rank == 2 ? x.shape[0] : -1;
  if (t < 1 || t > tables.max_rows || w.rank != 2)
    return Status::invalid(kOp,
                           "x " + x.str() + " · w " + w.str() + "ᵀ: 1 <= rows <= " + std::to_string(tables.max_rows));
  const int bm = block_m > 0 ? block_m : small_m_block_m(t);
  const int slot = bm == 16 ? 0 : bm == 32 ? 1 : bm == 64 ? 2 : bm == 128 ? 3 : -1;
  if (slot < 0) return Status::invalid(kOp, "block_m " + std::to_string(bm) + " (16, 32, 64 or 128)");
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

Status small_m_run(const SmallMTables& tb, const TensorView& x, const TensorView& w, GroupedEpilogue epi,
                   TensorView out, Stream stream, const std::function<Status()>& fallback) {
  const EnvKnob mode = read_env_knob("MLA_DENSE_PATH", {"cublaslt", "grouped"});  // per call: bench variants
  MLA_TRY(mode.status);
  if (mode.index == 0 || !tb.choices || !shape_ok(tb, x, w, out, epi)) return fallback();
  const int64_t t = x.shape[0];
  if (mode.index == 1) return small_m_linear(tb, x, w, epi, out, stream);
  const std::array<int64_t, 6> key{rows_bucket(t), w.shape[0], w.shape[1], static_cast<int64_t>(epi), x.stride[0],
                                   out.stride[0]};
  auto run = [&](int bm) { return bm == 0 ? fallback() : small_m_linear(tb, x, w, epi, out, stream, bm); };
  if (auto it = tb.choices->by_shape.find(key); it != tb.choices->by_shape.end()) return run(it->second);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  MLA_CUDA_TRY(kOp, cudaStreamIsCapturing(st, &cap));
  if (cap != cudaStreamCaptureStatusNone) return fallback();

  // Candidates: the fallback and each tile height up to the first that covers every row in one tile.
  std::vector<int> cands = {0};
  for (int bm : {16, 32, 64}) {
    cands.push_back(bm);
    if (bm >= t) break;
  }
  std::vector<float> med(cands.size());
  for (size_t c = 0; c < cands.size(); ++c) {
    MLA_TRY(run(cands[c]));  // warm-up (and first-call setup: descriptors, smem attributes)
    MLA_TRY(median_ms_after_flush(kOp, [&] { return run(cands[c]); }, tb.flush, tb.flush_bytes, st, 5, &med[c]));
  }
  const size_t best = static_cast<size_t>(std::min_element(med.begin(), med.end()) - med.begin());
  tb.choices->by_shape[key] = cands[best];
  if (const char* r = std::getenv("MLA_DENSE_REPORT"); r && r[0] == '1') {
    std::string line = "[dense] t " + std::to_string(t) + " (bucket " + std::to_string(key[0]) + ") n " +
                       std::to_string(w.shape[0]) + " k " + std::to_string(w.shape[1]) +
                       (epi == GroupedEpilogue::kSiluMul ? " silu" : "") + ":";
    char buf[48];
    for (size_t c = 0; c < cands.size(); ++c) {
      std::snprintf(buf, sizeof buf, " %s %.1f us",
                    cands[c] == 0 ? "cublaslt" : ("bm" + std::to_string(cands[c])).c_str(), med[c] * 1e3);
      line += buf;
    }
    std::fprintf(stderr, "%s -> %s\n", line.c_str(),
                 cands[best] == 0 ? "cublaslt" : ("bm" + std::to_string(cands[best])).c_str());
  }
  return run(cands[best]);  // the chosen path writes the result (candidates may differ by a rounding)
}

}  // namespace mla::model::cuda_backend

// moe_align: argument checks (shared with the CUDA launcher) and the plain host reference, a stable
// counting sort written the obvious way.
#include "mla/ops/moe_align.h"

#include <string>
#include <vector>

#include "mla/ops/model_ops_common.h"

namespace mla {
namespace {

constexpr const char* kOp = "moe_align";

// Entry i's expert, or -1 when the entry is invalid (out of range, or a repeat within its token).
int valid_expert(const int32_t* ids, int64_t i, int64_t k, int E) {
  const int32_t e = ids[i];
  if (e < 0 || e >= E) return -1;
  for (int64_t j = i - i % k; j < i; ++j)
    if (ids[j] == e) return -1;
  return e;
}

}  // namespace

Status validate_moe_align(const MoeAlignParams& p) {
  if (p.topk_ids.rank != 2 || p.topk_ids.shape[1] < 1 || p.topk_ids.shape[1] > 16)
    return Status::invalid(kOp, "topk_ids: expected int32[t, k] with 1 <= k <= 16, got " + p.topk_ids.str());
  const int64_t t = p.topk_ids.shape[0], k = p.topk_ids.shape[1], n = t * k;
  if (p.num_experts < 1 || p.num_experts > 256)
    return Status::invalid(kOp, "num_experts " + std::to_string(p.num_experts) + " (1..256 run)");
  if (p.block_m != 16 && p.block_m != 32 && p.block_m != 64 && p.block_m != 128)
    return Status::invalid(kOp, "block_m " + std::to_string(p.block_m) + " (16, 32, 64 or 128: grouped_gemm's tiles)");
  if (n > (int64_t{1} << 30)) return Status::invalid(kOp, std::to_string(n) + " entries (int32 rows)");
  MLA_TRY(model_ops::check_array(kOp, "topk_ids", p.topk_ids, DType::kInt32, n));
  MLA_TRY(model_ops::check_array(kOp, "expert_offsets", p.expert_offsets, DType::kInt32, p.num_experts + 1));
  MLA_TRY(model_ops::check_array(kOp, "perm", p.perm, DType::kInt32, n));
  MLA_TRY(model_ops::check_array(kOp, "src", p.src, DType::kInt32, n));
  MLA_TRY(model_ops::check_array(kOp, "tiles", p.tiles, DType::kInt32,
                                 2 * moe_align_max_tiles(n, p.num_experts, p.block_m)));
  MLA_TRY(model_ops::check_array(kOp, "error", p.error, DType::kInt32, 1));
  return Status::ok();
}

namespace ref {

Status moe_align(const MoeAlignParams& p) {
  MLA_TRY(validate_moe_align(p));
  const int64_t k = p.topk_ids.shape[1], n = p.topk_ids.shape[0] * k;
  const int E = p.num_experts;
  const int32_t* ids = p.topk_ids.ptr<const int32_t>();
  int32_t* off = p.expert_offsets.ptr<int32_t>();
  int32_t* perm = p.perm.ptr<int32_t>();
  int32_t* src = p.src.ptr<int32_t>();
  int32_t* tiles = p.tiles.ptr<int32_t>();
  std::vector<int32_t> count(static_cast<size_t>(E), 0);
  for (int64_t i = 0; i < n; ++i) {
    const int e = valid_expert(ids, i, k, E);
    if (e < 0) {
      p.error.ptr<int32_t>()[0] = 1;
      continue;
    }
    ++count[static_cast<size_t>(e)];
  }
  off[0] = 0;
  for (int e = 0; e < E; ++e) off[e + 1] = off[e] + count[static_cast<size_t>(e)];
  std::vector<int32_t> fill(off, off + E);
  for (int64_t i = 0; i < n; ++i) {
    const int e = valid_expert(ids, i, k, E);
    if (e < 0) {
      src[i] = -1;
      continue;
    }
    const int32_t row = fill[static_cast<size_t>(e)]++;
    perm[row] = static_cast<int32_t>(i / k);
    src[i] = row;
  }
  for (int64_t r = off[E]; r < n; ++r) perm[r] = -1;
  const int64_t max_tiles = moe_align_max_tiles(n, E, p.block_m);
  int64_t j = 0;
  for (int e = 0; e < E; ++e)
    for (int32_t r = off[e]; r < off[e + 1]; r += p.block_m, ++j) tiles[2 * j] = e, tiles[2 * j + 1] = r;
  for (; j < max_tiles; ++j) tiles[2 * j] = -1, tiles[2 * j + 1] = -1;
  return Status::ok();
}

}  // namespace ref
}  // namespace mla

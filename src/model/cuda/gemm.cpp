// cuBLASLt is column-major; a row-major C[m, n] is the column-major Cᵀ[n, m], so the product is run as
// Cᵀ = op(B)ᵀ · Aᵀ: cuBLASLt's "A" is our B (transposed when it is an [n, k] weight) and its "B" is our A.
#include "gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "l2_flush.h"
#include "mla/core/cuda_check.h"
#include "mla/core/env_knob.h"

namespace mla::model::cuda_backend {
namespace {

Status lt_status(cublasStatus_t s, const char* op, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::cuda(op, std::string(what) + " failed: cublas status " + std::to_string(static_cast<int>(s)));
}
#define LT_TRY(op, call) MLA_TRY(lt_status((call), (op), #call))

// Largest power of two (<= 256) dividing the address, the row pitch and (batched) the batch stride, in
// bytes: what the heuristic may assume about every matrix of the operand.
uint32_t alignment_of(const void* p, int64_t ld, int64_t stride, int batch, size_t elem) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld) * elem;
  if (batch > 1) bits |= static_cast<uint64_t>(stride) * elem;
  uint32_t al = 256;
  while (al > 1 && bits % al != 0) al >>= 1;
  return al;
}

// Descriptors destroyed on every exit path.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descs() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

Status set_batch(const char* op, cublasLtMatrixLayout_t l, int batch, int64_t stride) {
  if (batch <= 1) return Status::ok();
  const int32_t count = batch;
  LT_TRY(op, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  LT_TRY(op, cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
  return Status::ok();
}

std::string shape_str(const GemmArgs& g) {
  return "m " + std::to_string(g.m) + ", n " + std::to_string(g.n) + ", k " + std::to_string(g.k) + ", batch " +
         std::to_string(g.batch) + ", lda " + std::to_string(g.lda) + ", ldb " + std::to_string(g.ldb) + ", ldc " +
         std::to_string(g.ldc) + (g.b_is_nk ? ", B [n, k]" : ", B [k, n]") + ", C " +
         std::string(dtype_name(g.c_dtype));
}

// One shape's descriptors and algorithm, reused while the shape recurs (every layer, every step).
struct Plan {
  Descs d;
  cublasLtMatmulAlgo_t algo{};
  bool settled = false;  // tuned (or not to be tuned); false: the heuristic's choice until an eager call tunes it
};

// Everything but the pointers: two calls with equal keys can share descriptors and algorithm.
// The last entry is 1 when the shape is tuned, so MLA_GEMM_TUNE=0 and =1 keep separate plans.
using PlanKey = std::array<int64_t, 16>;

// Descriptors for `g`'s shape and up to `want` heuristic candidates (best first) under the given alignments.
Status make_plan(const char* op, cublasLtHandle_t h, const GemmArgs& g, uint32_t al_a, uint32_t al_b, uint32_t al_c,
                 size_t workspace_bytes, int want, Plan* plan, std::vector<cublasLtMatmulHeuristicResult_t>* cands) {
  Descs& d = plan->d;
  const cudaDataType_t c_type = g.c_dtype == DType::kFp32 ? CUDA_R_32F : CUDA_R_16BF;
  LT_TRY(op, cublasLtMatmulDescCreate(&d.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.b_is_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
  LT_TRY(op, cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  LT_TRY(op, cublasLtMatmulDescSetAttribute(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  // cuBLASLt's A: our B as stored, column-major: [k, n] (ld ldb) when it is an [n, k] row-major weight.
  if (g.b_is_nk) LT_TRY(op, cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, g.k, g.n, g.ldb));
  else LT_TRY(op, cublasLtMatrixLayoutCreate(&d.a, CUDA_R_16BF, g.n, g.k, g.ldb));
  LT_TRY(op, cublasLtMatrixLayoutCreate(&d.b, CUDA_R_16BF, g.k, g.m, g.lda));  // our A as Aᵀ [k, m]
  LT_TRY(op, cublasLtMatrixLayoutCreate(&d.c, c_type, g.n, g.m, g.ldc));       // our C as Cᵀ [n, m]
  MLA_TRY(set_batch(op, d.a, g.batch, g.stride_b));
  MLA_TRY(set_batch(op, d.b, g.batch, g.stride_a));
  MLA_TRY(set_batch(op, d.c, g.batch, g.stride_c));

  LT_TRY(op, cublasLtMatmulPreferenceCreate(&d.pref));
  const uint64_t ws = workspace_bytes;
  LT_TRY(op, cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  LT_TRY(op,
         cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
  LT_TRY(op,
         cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
  LT_TRY(op,
         cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
  LT_TRY(op,
         cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));

  cands->assign(static_cast<size_t>(std::max(want, 1)), cublasLtMatmulHeuristicResult_t{});
  int found = 0;
  LT_TRY(op, cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.c, d.pref, static_cast<int>(cands->size()),
                                            cands->data(), &found));
  cands->resize(static_cast<size_t>(std::max(found, 0)));
  if (found == 0) return Status::unsupported(op, "cuBLASLt has no algorithm for " + shape_str(g));
  plan->algo = cands->front().algo;
  return Status::ok();
}

// Power-of-two bucket of a row count: the shapes whose tuned algorithm is shared.
int64_t m_bucket(int64_t m) {
  int64_t b = 1;
  while (b < m) b <<= 1;
  return b;
}

// MLA_GEMM_TUNE=0|1 overrides `enabled`; read per call (bench_model switches it between variants in one process).
Status tune_on(bool enabled, bool* on) {
  const EnvKnob k = read_env_knob("MLA_GEMM_TUNE", {"0", "1"});
  MLA_TRY(k.status);
  *on = k.index < 0 ? enabled : k.index == 1;
  return Status::ok();
}

}  // namespace

struct Gemm::Cache {
  // MoE expert GEMMs see a new row count almost every step: bound the cache, start over when full.
  static constexpr size_t kMaxPlans = 4096;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
  std::map<PlanKey, cublasLtMatmulAlgo_t> tuned;  // per shape with m → m_bucket(m)
};

Gemm::Gemm() = default;

Gemm::~Gemm() {
  cache_.reset();  // descriptors before the handle
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
}

Status Gemm::init(void* workspace, size_t workspace_bytes, const GemmTuneOptions& tune) {
  cublasLtHandle_t h = nullptr;
  LT_TRY("gemm", cublasLtCreate(&h));
  handle_ = h;
  cache_ = std::make_unique<Cache>();
  workspace_ = workspace;
  workspace_bytes_ = workspace_bytes;
  tune_ = tune;
  return Status::ok();
}

Status Gemm::run(const char* op, const GemmArgs& g, Stream stream) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status::ok();
  const bool ok = g.a && g.b && g.c && g.k > 0 && g.m > 0 && g.n > 0 && g.batch >= 1 && g.lda >= g.k &&
                  g.ldb >= (g.b_is_nk ? g.k : g.n) && g.ldc >= g.n &&
                  (g.c_dtype == DType::kBf16 || g.c_dtype == DType::kFp32);
  if (!ok) return Status::invalid(op, "gemm arguments: " + shape_str(g));
  // Column slices of activations (q_nope of one head, kv_c of a latent row) are not 256-byte aligned:
  // tell the heuristic the real alignment so it never picks a kernel that assumes more.
  const uint32_t al_a = alignment_of(g.b, g.ldb, g.stride_b, g.batch, 2);
  const uint32_t al_b = alignment_of(g.a, g.lda, g.stride_a, g.batch, 2);
  const uint32_t al_c = alignment_of(g.c, g.ldc, g.stride_c, g.batch, dtype_size(g.c_dtype));
  bool tune_env = false;
  MLA_TRY(tune_on(tune_.enabled, &tune_env));
  const bool tune = tune_env && g.tune && g.m <= tune_.max_m && tune_.candidates > 1;
  PlanKey key{g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc, g.stride_a, g.stride_b, g.stride_c,
              g.b_is_nk ? 1 : 0, static_cast<int64_t>(g.c_dtype), al_a, al_b, al_c, tune ? 1 : 0};
  auto* h = static_cast<cublasLtHandle_t>(handle_);
  const auto st = reinterpret_cast<cudaStream_t>(stream);
  auto it = cache_->plans.find(key);
  if (it == cache_->plans.end()) {
    auto plan = std::make_unique<Plan>();
    std::vector<cublasLtMatmulHeuristicResult_t> cands;
    MLA_TRY(make_plan(op, h, g, al_a, al_b, al_c, workspace_bytes_, 1, plan.get(), &cands));
    plan->settled = !tune;
    last_choice_ = "heuristic";
    if (cache_->plans.size() >= Cache::kMaxPlans) cache_->plans.clear();
    it = cache_->plans.emplace(key, std::move(plan)).first;
  } else {
    last_choice_ = "cached";
  }
  Plan& pl = *it->second;
  if (!pl.settled) MLA_TRY(settle(op, g, key, &pl, st));
  const float alpha = 1.f, beta = 0.f;
  LT_TRY(op, cublasLtMatmul(h, pl.d.op, &alpha, g.b, pl.d.a, g.a, pl.d.b, &beta, g.c, pl.d.c, g.c, pl.d.c, &pl.algo,
                            workspace_, workspace_bytes_, st));
  return Status::ok();
}

// Tunes plan `pl` of shape `key` (not during a capture: then it stays on the heuristic's choice, unsettled).
Status Gemm::settle(const char* op, const GemmArgs& g, const PlanKey& key, void* plan, void* stream_v) {
  Plan& pl = *static_cast<Plan*>(plan);
  const auto st = static_cast<cudaStream_t>(stream_v);
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  MLA_CUDA_TRY(op, cudaStreamIsCapturing(st, &cap));
  if (cap != cudaStreamCaptureStatusNone) return Status::ok();
  auto* h = static_cast<cublasLtHandle_t>(handle_);
  PlanKey bkey = key;
  bkey[0] = m_bucket(g.m);
  if (auto t = cache_->tuned.find(bkey); t != cache_->tuned.end()) {
    cublasLtMatmulHeuristicResult_t chk{};
    if (cublasLtMatmulAlgoCheck(h, pl.d.op, pl.d.a, pl.d.b, pl.d.c, pl.d.c, &t->second, &chk) ==
            CUBLAS_STATUS_SUCCESS &&
        chk.workspaceSize <= workspace_bytes_) {
      pl.algo = t->second;
      pl.settled = true;
      last_choice_ = "bucket";
      return Status::ok();
    }
  }
  // The heuristic's candidates again (the plan kept only the first), then each timed on these operands.
  cublasLtMatmulHeuristicResult_t res[16];
  const int want = std::min(tune_.candidates, 16);
  int found = 0;
  LT_TRY(op, cublasLtMatmulAlgoGetHeuristic(h, pl.d.op, pl.d.a, pl.d.b, pl.d.c, pl.d.c, pl.d.pref, want, res, &found));
  const float alpha = 1.f, beta = 0.f;
  int best = -1;
  float best_ms = 0;
  for (int i = 0; i < found; ++i) {
    auto launch = [&] {
      return cublasLtMatmul(h, pl.d.op, &alpha, g.b, pl.d.a, g.a, pl.d.b, &beta, g.c, pl.d.c, g.c, pl.d.c, &res[i].algo,
                            workspace_, workspace_bytes_, st);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that refuses these operands is skipped
    const auto timed = [&]() -> Status { return lt_status(launch(), op, "cublasLtMatmul"); };
    float ms = 0;
    MLA_TRY(median_ms_after_flush(op, timed, tune_.flush, tune_.flush_bytes, st, tune_.reps, &ms));
    if (best < 0 || ms < best_ms) best = i, best_ms = ms;
  }
  if (best < 0) return Status::unsupported(op, "no cuBLASLt candidate ran for " + shape_str(g));
  pl.algo = res[best].algo;
  pl.settled = true;
  cache_->tuned[bkey] = pl.algo;
  std::snprintf(choice_buf_, sizeof choice_buf_, "tuned %d/%d", best, found);
  last_choice_ = choice_buf_;
  return Status::ok();
}

}  // namespace mla::model::cuda_backend

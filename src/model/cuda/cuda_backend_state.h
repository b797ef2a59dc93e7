#pragma once
// What a CudaBackend holds: device weights, the KV pools, arenas, the cuBLASLt wrapper, and the current
// step's device-side inputs (token ids, positions, cache slots, decode block table and plan).
#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "device_arena.h"
#include "gemm.h"
#include "kv_pages.h"
#include "small_m_gemm.h"
#include "step_io.h"
#include "mla/model/cuda_backend.h"
#include "mla/model/rope.h"
#include "mla/ops/plan_decode.h"
#include "mla/ops/sampling.h"

namespace mla::model {

struct CudaBackend::State {
  CudaBackendOptions opts;
  ModelWeights w;  // device views, bf16
  RopeTable rope;
  float softmax_scale = 0;
  int num_sms = 0;
  int padded_heads = 0;  // num_attention_heads rounded up to a head count mla_decode runs (16, 32, 64, 128)
  cudaStream_t stream = nullptr;
  std::vector<void*> allocations;  // every cudaMalloc, freed by the destructor

  void* kv_pool = nullptr;  // [layers][num_pages][64][576] bf16 | e4m3 (opts.kv_format)
  float* inv_freq = nullptr;  // [32]
  // [1] moe_align's sticky flag, set when a router id was out of range (NaN router logits): mapped pinned
  // host memory (upload_weights), so the kernel, inside a graph too, writes it straight to the host, and
  // check_moe_error() reads it after the syncs a step has anyway (read_samples, download) for free.
  int32_t* moe_error = nullptr;                 // device view
  volatile int32_t* moe_error_host = nullptr;   // host view; cudaFreeHost by the destructor
  Status check_moe_error();                     // the flag as a Status, cleared (cuda_backend_moe.cpp)
  cuda_backend::DeviceArena act;      // alloc() / alloc_fp32() and the step's inputs; reset by begin_step
  cuda_backend::DeviceArena scratch;  // one op's temporaries; reset at the start of each op that uses it
  cuda_backend::Gemm gemm;
  cuda_backend::SmallMTables small_m;  // decode-size dense products on the grouped kernel (small_m_gemm.h)
  cuda_backend::KvPages pages;
  cuda_backend::StepIo io;  // the step's inputs and sampled tokens, in fixed pinned/device memory
  AttentionProbe* probe = nullptr;  // profiling only

  // The current step.
  struct Step {
    ForwardBatch batch;
    bool valid = false;
    int64_t tokens = 0;
    int32_t* token_ids = nullptr;    // [t]
    int32_t* positions = nullptr;    // [t]
    int64_t* slots = nullptr;        // [t]: page * 64 + row of each token's latent
    int32_t* logits_rows = nullptr;  // [logits_rows.size()]
    // Absorbed attention (decode rows, and any row when forced): row abs_rows[i] is one decode query
    // (s_q = 1) over its sequence's first pos + 1 keys.
    int64_t num_abs = 0;                 // rows taking the absorbed path (== tokens: no gather/scatter)
    int32_t* abs_rows = nullptr;         // [num_abs] rows of the step
    int32_t* dec_seqlens = nullptr;      // [num_abs]
    // Host copy of dec_seqlens in the staging block (valid until the next step stages), for the decode geometry's
    // head-tile choice (decode_plan_narrow_tiles); nullptr on padded (graph) steps, whose geometry must be the
    // shapes' alone.
    const int32_t* dec_seqlens_host = nullptr;
    int32_t* dec_block_table = nullptr;  // [num_abs, table_width]
    int64_t table_width = 0;
    DecodePlanGeometry geom{};
    DecodePlanView plan{};
    void* dec_workspace = nullptr;
    size_t dec_workspace_bytes = 0;
    // Expanded attention (prefill chunks): whole cached context gathered, expanded by kv_b_proj, then
    // prefill_attention with the chunk's queries as the context's last positions.
    int64_t num_exp = 0;                 // sequences taking the expanded path
    int64_t exp_ctx_rows = 0;            // Σ context lengths
    int64_t exp_max_q = 0;
    int32_t* exp_seqs = nullptr;         // [num_exp, 4]: q_start (row), q_len, k_start (context row), k_len
    int32_t* exp_cu_ctx = nullptr;       // [num_exp + 1]
    int32_t* exp_block_table = nullptr;  // [num_exp, table_width]
    std::vector<std::pair<int64_t, int64_t>> pending;  // (seq, tokens cached once the step's last layer ran)
    // Sampling (set_sampling → staged by begin_step; sample() writes io.tokens_*).
    std::vector<SamplingRow> sampling_host;  // rows of the next step to stage
    const SamplingRow* sampling = nullptr;   // [num_samples] device
    int64_t num_samples = 0;                 // staged rows (padding included)
    int64_t num_real_samples = 0;            // rows read_samples() returns
    bool prestaged = false;  // stage_padded_decode ran: begin_step only plans (graph capture / padded run)
  } step;

  TensorView kv_cache(int layer) const;
  // Contiguous scratch of `dtype` [rows, cols]; an undefined view when the arena is exhausted.
  TensorView scratch_view(DType dtype, int64_t rows, int64_t cols);
  ~State();
};

// cudaMalloc recorded in s->allocations (freed by ~State); a failure is an out-of-memory Status of `op` naming
// the size and `what`, with *out = nullptr. free_tracked releases one such allocation early (nullptr: no-op).
Status alloc_tracked(CudaBackend::State* s, const char* op, size_t bytes, void** out, const char* what);
void free_tracked(CudaBackend::State* s, void* p);

// Uploads every weight of `host` as bf16 into one device allocation (recorded in s->allocations) and
// fills s->w with device views.
Status upload_weights(const ModelWeights& host, CudaBackend::State* s);

}  // namespace mla::model

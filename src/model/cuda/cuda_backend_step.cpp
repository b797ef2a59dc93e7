// begin_step: checks the batch against the cache, reserves KV pages, and uploads the step's inputs (token
// ids, positions, cache slots, logit rows, the decode block table) into the activation arena; then plans
// the split-KV decode once for every layer of the step.
#include <string>
#include <vector>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/prefill_attention.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "cuda_backend begin_step";

template <class T>
Status upload(CudaBackend::State* s, const std::vector<T>& host, T** dev) {
  *dev = static_cast<T*>(s->act.alloc(std::max<size_t>(host.size(), 1) * sizeof(T)));
  if (!*dev) return Status::oom(kOp, "activation arena exhausted while uploading the step's inputs");
  if (!host.empty())
    MLA_CUDA_TRY(kOp, cudaMemcpyAsync(*dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, s->stream));
  return Status::ok();
}

Status check_batch(const CudaBackend::State& s, const ForwardBatch& b) {
  if (b.num_tokens() > s.opts.max_batch_tokens)
    return Status::invalid(kOp, std::to_string(b.num_tokens()) + " tokens exceed max_batch_tokens " +
                                    std::to_string(s.opts.max_batch_tokens));
  return validate_forward_batch(b, s.w.config, [&s](int64_t id) { return s.pages.committed(id); }, kOp);
}

}  // namespace

Status CudaBackend::begin_step(const ForwardBatch& b) {
  State& s = *s_;
  s.step.valid = false;
  MLA_TRY(check_batch(s, b));
  const ModelConfig& c = s.w.config;
  // The expanded path runs prefill_attention, written for d_nope = d_v = 128.
  const bool can_expand = s.opts.prefill_attention && c.qk_nope_head_dim == kPrefillDimNope && c.v_head_dim == kPrefillDimV;
  if (b.attn_path == AttnPath::kExpanded && !can_expand)
    return Status::unsupported(kOp, "AttnPath::kExpanded needs prefill_attention enabled and qk_nope_head_dim = "
                                    "v_head_dim = 128");
  std::vector<int64_t> had;  // pages each sequence held before: a batch that does not fit reserves nothing
  for (const auto& q : b.seqs) had.push_back(s.pages.num_pages(q.seq_id));
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const SeqChunk& q = b.seqs[i];
    if (s.pages.reserve(q.seq_id, q.start_pos + q.num_tokens)) continue;
    for (size_t j = 0; j < i; ++j) s.pages.shrink(b.seqs[j].seq_id, had[j]);
    return Status::oom(kOp, "KV cache full: sequence " + std::to_string(q.seq_id) + " needs pages for " +
                                std::to_string(q.start_pos + q.num_tokens) + " tokens, " +
                                std::to_string(s.pages.free_pages()) + " pages free");
  }
  // The previous step's kernels may still read the arena: wait before handing it out again.
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s.stream));
  s.act.reset();

  const int64_t t = b.num_tokens();
  std::vector<int32_t> positions, abs_rows, seqlens, exp_seqs, exp_cu{0};
  std::vector<int64_t> slots;
  int64_t width = 1, max_q = 0;
  for (const auto& q : b.seqs) width = std::max<int64_t>(width, s.pages.num_pages(q.seq_id));
  std::vector<int32_t> abs_table, exp_table;
  int64_t row = 0;
  for (const auto& q : b.seqs) {
    const std::vector<int32_t>& pg = s.pages.pages(q.seq_id);
    std::vector<int32_t> table_row(static_cast<size_t>(width), 0);
    std::copy(pg.begin(), pg.end(), table_row.begin());
    const bool absorbed = b.attn_path == AttnPath::kAbsorbed ||
                          (b.attn_path == AttnPath::kAuto && (q.num_tokens == 1 || !can_expand));
    for (int64_t i = 0; i < q.num_tokens; ++i) {
      const int64_t pos = q.start_pos + i;
      positions.push_back(static_cast<int32_t>(pos));
      slots.push_back(int64_t{pg[static_cast<size_t>(pos / kDecodePageSize)]} * kDecodePageSize + pos % kDecodePageSize);
      if (!absorbed) continue;
      abs_rows.push_back(static_cast<int32_t>(row + i));
      seqlens.push_back(static_cast<int32_t>(pos + 1));
      abs_table.insert(abs_table.end(), table_row.begin(), table_row.end());
    }
    if (!absorbed) {
      const int64_t ctx = q.start_pos + q.num_tokens;
      exp_seqs.insert(exp_seqs.end(), {static_cast<int32_t>(row), static_cast<int32_t>(q.num_tokens), exp_cu.back(),
                                       static_cast<int32_t>(ctx)});
      exp_cu.push_back(static_cast<int32_t>(exp_cu.back() + ctx));
      exp_table.insert(exp_table.end(), table_row.begin(), table_row.end());
      max_q = std::max(max_q, q.num_tokens);
    }
    row += q.num_tokens;
  }
  State::Step& st = s.step;
  st.batch = b;
  st.tokens = t;
  st.table_width = width;
  st.num_abs = static_cast<int64_t>(abs_rows.size());
  st.num_exp = static_cast<int64_t>(exp_seqs.size() / kPrefillSeqFields);
  st.exp_ctx_rows = exp_cu.back();
  st.exp_max_q = max_q;
  MLA_TRY(upload(&s, b.token_ids, &st.token_ids));
  MLA_TRY(upload(&s, positions, &st.positions));
  MLA_TRY(upload(&s, slots, &st.slots));
  MLA_TRY(upload(&s, b.logits_rows, &st.logits_rows));
  MLA_TRY(upload(&s, abs_rows, &st.abs_rows));
  MLA_TRY(upload(&s, seqlens, &st.dec_seqlens));
  MLA_TRY(upload(&s, abs_table, &st.dec_block_table));
  MLA_TRY(upload(&s, exp_seqs, &st.exp_seqs));
  MLA_TRY(upload(&s, exp_cu, &st.exp_cu_ctx));
  MLA_TRY(upload(&s, exp_table, &st.exp_block_table));

  // One split-KV plan for the step: every layer's decode has the same rows and lengths.
  if (st.num_abs > 0) {
    MLA_TRY(decode_plan_geometry(static_cast<int>(st.num_abs), 1, s.padded_heads, s.num_sms, &st.geom));
    st.plan.num_parts = st.geom.num_parts;
    st.plan.parts = static_cast<int32_t*>(s.act.alloc(sizeof(int32_t) * st.geom.num_parts * kPlanPartInts));
    st.plan.split_offsets = static_cast<int32_t*>(s.act.alloc(sizeof(int32_t) * (st.num_abs + 1)));
    st.dec_workspace_bytes = decode_workspace_bytes(st.geom);
    st.dec_workspace = s.act.alloc(st.dec_workspace_bytes);
    if (!st.plan.parts || !st.plan.split_offsets || !st.dec_workspace)
      return Status::oom(kOp, "activation arena exhausted by the decode plan (" + std::to_string(st.num_abs) + " rows)");
    MLA_TRY(cuda::plan_decode(TensorView::contiguous(st.dec_seqlens, DType::kInt32, {st.num_abs}), st.geom, st.plan,
                              stream()));
  }

  st.pending.clear();
  for (const auto& q : b.seqs) st.pending.emplace_back(q.seq_id, q.start_pos + q.num_tokens);
  st.valid = true;
  return Status::ok();
}

}  // namespace mla::model

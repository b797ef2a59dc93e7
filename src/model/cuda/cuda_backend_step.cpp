// begin_step: checks the batch against the cache, reserves KV pages, and packs the step's inputs (token ids,
// positions, cache slots, logit rows, decode rows and block tables, prefill descriptors, sampling rows)
// straight into the fixed pinned staging block, sent with one upload into its fixed device twin; then plans
// the split-KV decode once for every layer of the step. No per-step allocation: the arena only holds the
// activations and the plan, and is reset here.
//
// CUDA-graph steps (stage_padded_decode): the same arrays for a decode-only batch padded to a bucket size,
// laid out identically for every step of that bucket (the block table at the fixed graph width, copied at
// its used width), so a graph captured once reads each later step's inputs from the addresses it knows.
#include <algorithm>
#include <string>
#include <vector>

#include "cuda_backend_state.h"
#include "mla/core/cuda_check.h"
#include "mla/core/mla_shapes.h"
#include "mla/ops/prefill_attention.h"

namespace mla::model {
namespace {

constexpr const char* kOp = "cuda_backend begin_step";

Status check_batch(const CudaBackend::State& s, const ForwardBatch& b) {
  if (b.num_tokens() > s.opts.max_batch_tokens)
    return Status::invalid(kOp, std::to_string(b.num_tokens()) + " tokens exceed max_batch_tokens " +
                                    std::to_string(s.opts.max_batch_tokens));
  return validate_forward_batch(b, s.w.config, [&s](int64_t id) { return s.pages.committed(id); }, kOp);
}

}  // namespace

Status CudaBackend::stage(const ForwardBatch& b, int64_t pad_rows) {
  State& s = *s_;
  State::Step& st = s.step;
  st.valid = false;
  st.prestaged = false;
  MLA_TRY(check_batch(s, b));
  const ModelConfig& c = s.w.config;
  // The expanded path runs prefill_attention, written for d_nope = d_v = 128.
  const bool can_expand =
      s.opts.prefill_attention && c.qk_nope_head_dim == kPrefillDimNope && c.v_head_dim == kPrefillDimV;
  if (b.attn_path == AttnPath::kExpanded && !can_expand)
    return Status::unsupported(kOp, "AttnPath::kExpanded needs prefill_attention enabled and qk_nope_head_dim = "
                                    "v_head_dim = 128");
  const bool padded = pad_rows > 0;
  if (padded) {
    if (pad_rows < b.num_tokens() || static_cast<int64_t>(b.seqs.size()) != b.num_tokens() ||
        b.logits_rows.size() != b.seqs.size() || b.attn_path != AttnPath::kAuto)
      return Status::invalid(kOp,
                             "stage_padded_decode: a decode-only batch (one token and one logits row per sequence) "
                             "of at most " +
                                 std::to_string(pad_rows) + " sequences expected");
    for (size_t i = 0; i < b.logits_rows.size(); ++i)
      if (b.logits_rows[i] != static_cast<int32_t>(i))
        return Status::invalid(kOp, "stage_padded_decode: logits rows must be 0..b-1 in order");
  }
  const int64_t graph_width = graph_table_width();
  std::vector<int64_t> had;  // pages each sequence held before: a batch that does not fit reserves nothing
  for (const auto& q : b.seqs) had.push_back(s.pages.num_pages(q.seq_id));
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const SeqChunk& q = b.seqs[i];
    const int64_t need = (q.start_pos + q.num_tokens + kDecodePageSize - 1) / kDecodePageSize;
    bool ok = !(padded && need > graph_width);
    if (ok) ok = s.pages.reserve(q.seq_id, q.start_pos + q.num_tokens);
    if (ok) continue;
    for (size_t j = 0; j < i; ++j) s.pages.shrink(b.seqs[j].seq_id, had[j]);
    if (padded && need > graph_width)
      return Status::invalid(kOp, "sequence " + std::to_string(q.seq_id) + " needs " + std::to_string(need) +
                                      " pages, over the graph table width " + std::to_string(graph_width));
    return Status::oom(kOp, "KV cache full: sequence " + std::to_string(q.seq_id) + " needs pages for " +
                                std::to_string(q.start_pos + q.num_tokens) + " tokens, " +
                                std::to_string(s.pages.free_pages()) + " pages free");
  }
  // The previous step's kernels may still read the arena, and its upload may still read the staging
  // block: wait before handing either out again (a no-op after read_samples / download).
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(s.stream));
  s.act.reset();
  s.io.reset();

  // Shapes first: rows taking each attention path, and the block-table width.
  const int64_t t_real = b.num_tokens(), t = padded ? pad_rows : t_real;
  int64_t width = 1, num_abs = 0, num_exp = 0, ctx_rows = 0, max_q = 0;
  auto absorbed = [&](const SeqChunk& q) {
    return b.attn_path == AttnPath::kAbsorbed || (b.attn_path == AttnPath::kAuto && (q.num_tokens == 1 || !can_expand));
  };
  for (const auto& q : b.seqs) {
    width = std::max<int64_t>(width, s.pages.num_pages(q.seq_id));
    if (absorbed(q)) {
      num_abs += q.num_tokens;
    } else {
      ++num_exp, ctx_rows += q.start_pos + q.num_tokens;
      max_q = std::max(max_q, q.num_tokens);
    }
  }
  const int64_t used_width = width;  // columns any row reads; a graph step's rows are wider (stale past this)
  if (padded) width = graph_width, num_abs = t;
  const int64_t num_logits = padded ? t : static_cast<int64_t>(b.logits_rows.size());
  if (!st.sampling_host.empty() &&
      static_cast<int64_t>(st.sampling_host.size()) != static_cast<int64_t>(b.logits_rows.size()))
    return Status::invalid(kOp, std::to_string(st.sampling_host.size()) + " sampling rows for " +
                                    std::to_string(b.logits_rows.size()) + " logits rows");
  const int64_t num_samples = st.sampling_host.empty() ? 0 : num_logits;

  // Staging slots, tables last (a graph step copies them at their used width only).
  struct Slot {
    int32_t *ids, *pos, *logit_rows, *abs_rows, *seqlens, *exp_seqs, *exp_cu, *abs_table, *exp_table;
    int64_t* slots;
    SamplingRow* sampling;
  } h{}, d{};
  d.ids = s.io.reserve(t, &h.ids);
  d.pos = s.io.reserve(t, &h.pos);
  d.slots = s.io.reserve(t, &h.slots);
  d.logit_rows = s.io.reserve(std::max<int64_t>(num_logits, 1), &h.logit_rows);
  d.abs_rows = s.io.reserve(std::max<int64_t>(num_abs, 1), &h.abs_rows);
  d.seqlens = s.io.reserve(std::max<int64_t>(num_abs, 1), &h.seqlens);
  d.exp_seqs = s.io.reserve(std::max<int64_t>(num_exp * kPrefillSeqFields, 1), &h.exp_seqs);
  d.exp_cu = s.io.reserve(num_exp + 1, &h.exp_cu);
  d.sampling = s.io.reserve(std::max<int64_t>(num_samples, 1), &h.sampling);
  d.abs_table = s.io.reserve(std::max<int64_t>(num_abs * width, 1), &h.abs_table);
  d.exp_table = s.io.reserve(std::max<int64_t>(num_exp * width, 1), &h.exp_table);
  if (!d.exp_table || num_samples > s.io.max_samples())
    return Status::oom(kOp, "step inputs (" + std::to_string(t) + " rows, " + std::to_string(num_abs) +
                                " decode rows and " + std::to_string(num_exp) + " prefill chunks × " +
                                std::to_string(width) + " pages) exceed the fixed staging block of " +
                                std::to_string(s.io.capacity()) +
                                " bytes (raise max_num_seqs or lower max_pages_per_seq)");

  // Fill.
  std::copy(b.token_ids.begin(), b.token_ids.end(), h.ids);
  std::copy(b.logits_rows.begin(), b.logits_rows.end(), h.logit_rows);
  h.exp_cu[0] = 0;
  int64_t row = 0, abs = 0, exp = 0;
  for (const auto& q : b.seqs) {
    const std::vector<int32_t>& pg = s.pages.pages(q.seq_id);
    const bool is_abs = absorbed(q);
    for (int64_t i = 0; i < q.num_tokens; ++i) {
      const int64_t p = q.start_pos + i;
      h.pos[row + i] = static_cast<int32_t>(p);
      h.slots[row + i] = int64_t{pg[static_cast<size_t>(p / kDecodePageSize)]} * kDecodePageSize + p % kDecodePageSize;
      if (!is_abs) continue;
      h.abs_rows[abs] = static_cast<int32_t>(row + i);
      h.seqlens[abs] = static_cast<int32_t>(p + 1);
      int32_t* tr = h.abs_table + abs * width;
      std::copy(pg.begin(), pg.end(), tr);
      std::fill(tr + pg.size(), tr + used_width, 0);
      ++abs;
    }
    if (!is_abs) {
      const int64_t ctx = q.start_pos + q.num_tokens;
      int32_t* e = h.exp_seqs + exp * kPrefillSeqFields;
      e[0] = static_cast<int32_t>(row), e[1] = static_cast<int32_t>(q.num_tokens), e[2] = h.exp_cu[exp],
      e[3] = static_cast<int32_t>(ctx);
      h.exp_cu[exp + 1] = static_cast<int32_t>(h.exp_cu[exp] + ctx);
      int32_t* tr = h.exp_table + exp * width;
      std::copy(pg.begin(), pg.end(), tr);
      std::fill(tr + pg.size(), tr + used_width, 0);
      ++exp;
    }
    row += q.num_tokens;
  }
  // Padding rows (graph steps): valid but inert -- no cache write (slot -1), and one key: the first token
  // of the batch's first sequence, a latent some step wrote (a never-written page could hold NaN, which
  // the MoE router of the padding row would see). Padding rows never touch the real rows' results.
  const int32_t first_page = b.seqs.empty() ? 0 : s.pages.pages(b.seqs[0].seq_id)[0];
  for (int64_t r = t_real; r < t; ++r) {
    h.ids[r] = 0, h.pos[r] = 0, h.slots[r] = -1, h.logit_rows[r] = static_cast<int32_t>(r);
    h.abs_rows[r] = static_cast<int32_t>(r), h.seqlens[r] = 1;
    std::fill(h.abs_table + r * width, h.abs_table + r * width + used_width, first_page);  // entry 0 is read
  }
  if (num_samples > 0) {
    std::copy(st.sampling_host.begin(), st.sampling_host.end(), h.sampling);
    for (int64_t r = static_cast<int64_t>(st.sampling_host.size()); r < num_samples; ++r) h.sampling[r] = SamplingRow{};
  }

  // Upload: everything before the tables, then the tables -- in one copy when they are packed, else
  // (graph width) each row's used pages only.
  if (!padded) {
    MLA_CUDA_TRY(kOp, s.io.upload(s.io.device_begin(), s.io.device_end(), s.stream));
  } else {
    MLA_CUDA_TRY(kOp, s.io.upload(s.io.device_begin(), d.abs_table, s.stream));
    MLA_CUDA_TRY(kOp, cudaMemcpy2DAsync(d.abs_table, width * 4, h.abs_table, width * 4, used_width * 4, t,
                                        cudaMemcpyHostToDevice, s.stream));
  }

  st.batch = b;
  if (padded) {
    st.batch.token_ids.resize(static_cast<size_t>(t), 0);
    st.batch.logits_rows.resize(static_cast<size_t>(t));
    for (int64_t r = 0; r < t; ++r) st.batch.logits_rows[static_cast<size_t>(r)] = static_cast<int32_t>(r);
  }
  st.tokens = t;
  st.table_width = width;
  st.num_abs = num_abs;
  st.num_exp = num_exp;
  st.exp_ctx_rows = ctx_rows;
  st.exp_max_q = max_q;
  st.token_ids = d.ids, st.positions = d.pos, st.slots = d.slots, st.logits_rows = d.logit_rows;
  st.abs_rows = d.abs_rows, st.dec_seqlens = d.seqlens, st.dec_block_table = d.abs_table;
  st.dec_seqlens_host = padded ? nullptr : h.seqlens;
  st.exp_seqs = d.exp_seqs, st.exp_cu_ctx = d.exp_cu, st.exp_block_table = d.exp_table;
  st.sampling = num_samples > 0 ? d.sampling : nullptr;
  st.num_samples = num_samples;
  st.num_real_samples = static_cast<int64_t>(st.sampling_host.size());
  st.sampling_host.clear();
  st.pending.clear();
  for (const auto& q : b.seqs) st.pending.emplace_back(q.seq_id, q.start_pos + q.num_tokens);
  return Status::ok();
}

// The step's decode plan, from the staged seqlens (device to device: graph-capturable).
Status CudaBackend::plan_step() {
  State& s = *s_;
  State::Step& st = s.step;
  if (st.num_abs > 0) {
    // An eager step's seqlens pick its head tiles (narrow 16-row tiles for few pages at h_q >= 64); a graph step's
    // geometry is the shapes' alone, as the captured grid.
    MLA_TRY(decode_plan_geometry(static_cast<int>(st.num_abs), 1, s.padded_heads, s.num_sms, &st.geom,
                                 st.dec_seqlens_host, s.opts.kv_format));
    st.plan.num_parts = st.geom.num_parts;
    st.plan.parts = static_cast<int32_t*>(s.act.alloc(sizeof(int32_t) * st.geom.num_parts * kPlanPartInts));
    st.plan.split_offsets = static_cast<int32_t*>(s.act.alloc(sizeof(int32_t) * (st.num_abs + 1)));
    st.dec_workspace_bytes = decode_workspace_bytes(st.geom);
    st.dec_workspace = s.act.alloc(st.dec_workspace_bytes);
    // A step whose host plan cuts no sequence (an eager step's geometry knows: host_uncut) passes the plan's merge
    // counters (decode_plan_passes_merge_counters): every segment is direct, so the decode kernels merge nothing
    // and no combine grid is launched (1-3 us a layer, bench/decode/NOTES.md "Session 24"). plan_decode zeroes them;
    // every layer's mla_decode leaves them zero. A graph step's geometry cannot know its cuts: it keeps the combine.
    // host_uncut is the default tuning's answer, which the plan_decode call below uses too (a step with another tuning
    // would need its own: a cut plan under the fused merge costs 12-36 us, NOTES.md "Session 50"). Narrow 16-row
    // tiles have no fused merge (mla_decode drops the counters there).
    st.plan.merge_counters = nullptr;
    if (decode_plan_passes_merge_counters(st.geom)) {
      st.plan.merge_counters = static_cast<int32_t*>(s.act.alloc(sizeof(int32_t) * decode_plan_counters(st.geom)));
      if (!st.plan.merge_counters) return Status::oom(kOp, "activation arena exhausted by the decode merge counters");
    }
    if (!st.plan.parts || !st.plan.split_offsets || !st.dec_workspace)
      return Status::oom(kOp,
                         "activation arena exhausted by the decode plan (" + std::to_string(st.num_abs) + " rows)");
    // With the block table (uploaded above on this stream) the plan's records carry each CTA's first pages.
    MLA_TRY(cuda::plan_decode(TensorView::contiguous(st.dec_seqlens, DType::kInt32, {st.num_abs}),
                              TensorView::contiguous(st.dec_block_table, DType::kInt32, {st.num_abs, st.table_width}),
                              st.geom, st.plan, stream()));
  }
  st.valid = true;
  return Status::ok();
}

Status CudaBackend::begin_step(const ForwardBatch& b) {
  State& s = *s_;
  if (s.step.prestaged) {
    // A padded decode step staged by stage_padded_decode (its eager run, or its graph capture).
    if (b.num_tokens() != s.step.tokens || b.attn_path != AttnPath::kAuto ||
        b.logits_rows.size() != s.step.batch.logits_rows.size())
      return Status::invalid(kOp, "a padded step of " + std::to_string(s.step.tokens) +
                                      " rows is staged; got a batch of " + std::to_string(b.num_tokens()));
    s.act.reset();  // the same arena addresses on every run of the step: what a captured graph holds
    return plan_step();
  }
  MLA_TRY(stage(b, 0));
  return plan_step();
}

Status CudaBackend::stage_padded_decode(const ForwardBatch& b, int64_t rows) {
  MLA_TRY(stage(b, rows));
  s_->step.prestaged = true;
  return Status::ok();
}

void CudaBackend::commit_step() {
  for (const auto& [seq, len] : s_->step.pending) s_->pages.commit(seq, len);
}

void CudaBackend::end_padded_step() {
  s_->step.prestaged = false;
  s_->step.valid = false;
}

int64_t CudaBackend::graph_table_width() const { return s_->opts.max_pages_per_seq; }
int64_t CudaBackend::pages_of(int64_t seq_id) const { return s_->pages.num_pages(seq_id); }
void CudaBackend::set_attention_probe(AttentionProbe* probe) { s_->probe = probe; }

void CudaBackend::set_sampling(std::vector<SamplingRow> rows) { s_->step.sampling_host = std::move(rows); }

Status CudaBackend::sample(const TensorView& logits) {
  constexpr const char* op = "cuda_backend sample";
  State& s = *s_;
  const State::Step& st = s.step;
  if (!st.sampling || logits.rank != 2 || logits.shape[0] != st.num_samples)
    return Status::invalid(op, "logits " + logits.str() + " for " + std::to_string(st.num_samples) +
                                   " staged sampling rows (set_sampling before the step)");
  const SampleParams p{.logits = logits,
                       .rows = st.sampling,
                       .tokens = TensorView::contiguous(s.io.tokens_device(), DType::kInt32, {st.num_samples})};
  MLA_TRY(cuda::sample_tokens(p, stream()));
  MLA_CUDA_TRY(op, cudaMemcpyAsync(s.io.tokens_host_mut(), s.io.tokens_device(), st.num_samples * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, s.stream));
  return Status::ok();
}

Status CudaBackend::read_samples(std::vector<int32_t>* tokens) {
  constexpr const char* op = "cuda_backend read_samples";
  State& s = *s_;
  MLA_CUDA_TRY(op, cudaStreamSynchronize(s.stream));
  MLA_TRY(s.check_moe_error());
  const int64_t n = s.step.num_real_samples;
  tokens->assign(s.io.tokens_host(), s.io.tokens_host() + n);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t t = (*tokens)[static_cast<size_t>(i)];
    if (t == kSampleBadLogit) return Status::invalid("sample", "row " + std::to_string(i) + ": a logit is NaN or +inf");
    if (t == kSampleAllNegInf) return Status::invalid("sample", "row " + std::to_string(i) + ": every logit is -inf");
    if (t < 0 || t >= s.w.config.vocab_size)
      return Status::internal("sample", "row " + std::to_string(i) + ": token " + std::to_string(t) + " out of range");
  }
  return Status::ok();
}

}  // namespace mla::model

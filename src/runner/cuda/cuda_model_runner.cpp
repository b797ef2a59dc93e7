#include "mla/runner/cuda_model_runner.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "mla/core/cuda_check.h"
#include "mla/runner/graph_buckets.h"
#include "mla/runner/step_batch.h"
#include "step_profile.h"

namespace mla::runner {

namespace {
constexpr const char* kOp = "cuda_runner";
}  // namespace

struct CudaModelRunner::Graphs {
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    TensorView logits;  // where the graph leaves its logits (arena addresses fixed at capture)
  };
  std::map<int, Entry> by_bucket;
  ~Graphs() {
    for (auto& [b, e] : by_bucket) cudaGraphExecDestroy(e.exec);
  }
};

CudaModelRunner::CudaModelRunner(std::unique_ptr<model::CudaBackend> be, int64_t num_pages, const CudaRunnerOptions& ro)
    : backend_(std::move(be)), model_(backend_.get()), num_pages_(num_pages), ro_(ro), graphs_(new Graphs) {}

CudaModelRunner::~CudaModelRunner() {
  if (prof_) std::fprintf(stderr, "%s", prof_->report().c_str());
}

Status CudaModelRunner::create(const model::ModelWeights& weights, const model::CudaBackendOptions& opts,
                               std::unique_ptr<CudaModelRunner>* out, const CudaRunnerOptions& ro) {
  if (opts.num_pages < 1 || opts.num_pages > (int64_t{1} << 30))
    return Status::invalid(kOp, "num_pages must be in [1, 2^30], got " + std::to_string(opts.num_pages));
  // The block-table width (and the graphs' fixed table shape) is set when the backend is created, before
  // num_pages_for re-sizes the pool; derived from the provisional pool it would cap every sequence at that
  // pool's size, so sizing from a profiled peak needs the width stated.
  if (ro.num_pages_for && opts.max_pages_per_seq <= 0)
    return Status::invalid(kOp, "num_pages_for needs max_pages_per_seq > 0 (got " +
                                    std::to_string(opts.max_pages_per_seq) + "; provisional num_pages " +
                                    std::to_string(opts.num_pages) + ")");
  std::unique_ptr<model::CudaBackend> be;
  MLA_TRY(model::CudaBackend::create(weights, opts, &be));
  std::unique_ptr<CudaModelRunner> r(new CudaModelRunner(std::move(be), opts.num_pages, ro));
  // Buckets: what a padded step may hold -- no more rows than the staging block and batch allow.
  r->buckets_ = decode_graph_buckets(ro.graph_batch_sizes, opts.max_num_seqs, opts.max_batch_tokens);
  if (const char* e = std::getenv("MLA_PROFILE_DECODE"); e && std::atoi(e) > 0) {
    r->prof_every_ = std::atoi(e);
    r->prof_ = std::make_unique<ProfilingBackend>(r->backend_.get());
    r->prof_model_ = std::make_unique<model::DeepseekV2>(r->prof_.get());
  }
  if (ro.num_pages_for) {
    MLA_TRY(r->size_memory(opts));
    r->ro_.num_pages_for = nullptr;  // used at start-up only (callers may capture locals of their own)
  }
  if (ro.enforce_eager) r->stats_.graphs_off = "--enforce-eager";
  else if (!ro.pad_eager_decode) MLA_TRY(r->capture_graphs());
  *out = std::move(r);
  return Status::ok();
}

// Start-up capture, one graph per bucket: a throw-away decode step of `bucket` one-token sequences (ids
// below any the engine uses, released after) runs once eagerly -- loading every kernel its shapes need --
// and is then captured. The graph depends on shapes only; each replay reads the staged inputs of its step.
Status CudaModelRunner::capture_graphs() {
  const cudaStream_t stream = reinterpret_cast<cudaStream_t>(backend_->stream());
  for (int bucket : buckets_) {
    if (backend_->free_pages() < bucket) {
      stats_.graphs_off = "too few free KV pages to capture bucket " + std::to_string(bucket);
      break;
    }
    model::ForwardBatch fb;
    for (int i = 0; i < bucket; ++i) {
      fb.seqs.push_back({-1 - int64_t{i}, 0, 1});
      fb.token_ids.push_back(0);
      fb.logits_rows.push_back(i);
    }
    std::vector<int32_t> tokens;
    Status st = run_padded(fb, bucket, std::vector<SamplingRow>(static_cast<size_t>(bucket)), &tokens);
    if (st.is_ok()) {
      backend_->set_sampling(std::vector<SamplingRow>(static_cast<size_t>(bucket)));
      for (auto& q : fb.seqs) q.start_pos = 1;  // the warm-up step cached one token each
      fb.token_ids.assign(static_cast<size_t>(bucket), 0);
      st = backend_->stage_padded_decode(fb, bucket);
    }
    TensorView logits;
    cudaGraph_t graph = nullptr;
    if (st.is_ok()) {
      MLA_CUDA_TRY(kOp, cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      st = model_.forward(fb, &logits);
      if (st.is_ok()) st = backend_->sample(logits);
      const cudaError_t e = cudaStreamEndCapture(stream, &graph);
      if (st.is_ok() && e != cudaSuccess) st = cuda_status(e, kOp, "cudaStreamEndCapture");
      (void)cudaGetLastError();  // a failed capture leaves its error behind; the stream itself is usable
    }
    backend_->end_padded_step();
    for (const auto& q : fb.seqs) backend_->release_sequence(q.seq_id);
    cudaGraphExec_t exec = nullptr;
    if (st.is_ok() && graph) {
      const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      if (e != cudaSuccess) st = cuda_status(e, kOp, "cudaGraphInstantiate"), (void)cudaGetLastError();
    }
    if (graph) cudaGraphDestroy(graph);
    if (!st.is_ok()) {
      // Not fatal: the engine runs every step eagerly; stats().graphs_off says why (the CLI prints it).
      stats_.graphs_off = "capture of bucket " + std::to_string(bucket) + " failed: " + st.to_string();
      for (auto& [b, en] : graphs_->by_bucket) cudaGraphExecDestroy(en.exec);
      graphs_->by_bucket.clear();
      stats_.captured.clear();
      MLA_CUDA_TRY(kOp, cudaStreamSynchronize(stream));
      return Status::ok();
    }
    graphs_->by_bucket[bucket] = {exec, logits};
    stats_.captured.push_back(bucket);
  }
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(stream));
  return Status::ok();
}

// The two largest steps, run once on the provisional arena (sequence ids below any the engine or the graph
// capture uses, released after); the arena is reset by each begin_step, so its high-water mark after each
// is what that step needed. Decode first: if the prefill's peak is the lower one, the running maximum still
// bounds it, and decode + maximum >= decode + prefill.
Status CudaModelRunner::size_memory(const model::CudaBackendOptions& opts) {
  constexpr int64_t kFirstId = -(int64_t{1} << 40);
  const int64_t t = opts.max_batch_tokens, rows = std::min<int64_t>(opts.max_num_seqs, t);
  TensorView logits;
  model::ForwardBatch dec;
  for (int64_t i = 0; i < rows; ++i) {
    dec.seqs.push_back({kFirstId + i, 0, 1});
    dec.token_ids.push_back(0);
    dec.logits_rows.push_back(static_cast<int32_t>(i));
  }
  Status st = model_.forward(dec, &logits);
  for (const auto& q : dec.seqs) backend_->release_sequence(q.seq_id);
  MLA_TRY(st);
  const size_t decode_peak = backend_->activation_peak();
  model::ForwardBatch pre;
  pre.seqs.push_back({kFirstId - 1, 0, t});
  pre.token_ids.assign(static_cast<size_t>(t), 0);
  for (int64_t i = 0; i < rows; ++i) pre.logits_rows.push_back(static_cast<int32_t>(t - rows + i));
  st = model_.forward(pre, &logits);
  backend_->release_sequence(kFirstId - 1);
  MLA_TRY(st);
  MLA_CUDA_TRY(kOp, cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(backend_->stream())));
  const size_t max_peak = backend_->activation_peak();
  stats_.provisional_activation_bytes = backend_->activation_capacity();
  stats_.decode_peak = decode_peak;
  stats_.prefill_peak = max_peak;  // an upper bound of the prefill step's own peak (see above)
  // 5 % and 64 MB over the two peaks: the arena's 256-byte alignment of other shapes, nothing more.
  const size_t bytes = static_cast<size_t>(1.05 * double(decode_peak + max_peak)) + (size_t{64} << 20);
  MLA_TRY(backend_->resize_cache(bytes, ro_.num_pages_for));
  stats_.activation_bytes = bytes;
  num_pages_ = backend_->num_pages();
  return Status::ok();
}

Status CudaModelRunner::forward(const engine::StepInputs& in, engine::Logits* logits) {
  const model::ForwardBatch fb = to_forward_batch(in, *backend_);
  TensorView out;
  MLA_TRY(model_.forward(fb, &out));
  logits->num_rows = static_cast<int>(out.shape[0]);
  logits->vocab = static_cast<int>(out.shape[1]);
  return backend_->download(out, &logits->data);
}

// The bucket a decode-only step pads to; 0 when the step runs eagerly as it is.
int CudaModelRunner::bucket_for(const engine::StepInputs& in, const model::ForwardBatch& fb) const {
  if (in.num_decodes != in.num_seqs || in.num_tokens != in.num_seqs || in.logits_indices.size() != size_t(in.num_seqs))
    return 0;
  for (int i = 0; i < in.num_seqs; ++i)
    if (in.logits_indices[size_t(i)] != i) return 0;
  for (const auto& q : fb.seqs)  // the graph's block table has a fixed width
    if ((q.start_pos + q.num_tokens + 63) / 64 > backend_->graph_table_width()) return 0;
  for (int b : buckets_) {
    if (b < in.num_seqs) continue;
    if (ro_.pad_eager_decode || graphs_->by_bucket.count(b)) return b;
    return 0;
  }
  return 0;
}

Status CudaModelRunner::forward_sample(const engine::StepInputs& in, const std::vector<engine::SampleRequest>& requests,
                                       std::vector<int32_t>* tokens) {
  if (requests.size() != in.logits_indices.size())
    return Status::invalid(kOp, std::to_string(requests.size()) + " sample requests for " +
                                    std::to_string(in.logits_indices.size()) + " logits rows");
  std::vector<SamplingRow> rows(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const engine::SamplingParams& p = *requests[i].params;
    rows[i].seed = requests[i].seed;
    rows[i].draw_index = requests[i].draw_index;
    rows[i].temperature = p.is_greedy() ? 0.f : p.temperature;
    rows[i].top_k = p.top_k;
    rows[i].top_p = p.top_p;
  }
  model::ForwardBatch fb = to_forward_batch(in, *backend_);
  if (prof_) {
    // Profiling: every mixed or prefill-only step (eager anyway) and every N-th decode-only step.
    if (in.num_decodes != in.num_seqs) {
      return run_profiled(fb, std::move(rows), tokens, in.num_decodes == 0 ? "prefill only" : "mixed", in.num_decodes);
    }
    if (decode_steps_++ % prof_every_ == 0) {
      // One row per graph bucket (the batch rounded up to it), so rows compare with the replayed steps.
      const auto b = std::lower_bound(buckets_.begin(), buckets_.end(), in.num_seqs);
      const std::string label = b == buckets_.end() ? "decode b>" + std::to_string(buckets_.back())
                                                    : "decode b<=" + std::to_string(*b);
      return run_profiled(fb, std::move(rows), tokens, label, in.num_decodes);
    }
  }
  if (rows.empty()) {
    // Prefill chunks only, none finishing its prompt: run the layers for the cache; lm_head on one row
    // (an empty list would mean every row), nothing sampled.
    fb.logits_rows = {static_cast<int32_t>(fb.num_tokens() - 1)};
    MLA_TRY(model_.forward(fb, &last_logits_));
    ++stats_.eager_steps;
    tokens->clear();
    return Status::ok();
  }
  const int bucket = bucket_for(in, fb);
  if (bucket > 0) return run_padded(fb, bucket, std::move(rows), tokens);
  return run_eager(fb, std::move(rows), tokens);
}

Status CudaModelRunner::run_eager(const model::ForwardBatch& fb, std::vector<SamplingRow> rows,
                                  std::vector<int32_t>* tokens) {
  backend_->set_sampling(std::move(rows));
  MLA_TRY(model_.forward(fb, &last_logits_));
  MLA_TRY(backend_->sample(last_logits_));
  ++stats_.eager_steps;
  return backend_->read_samples(tokens);
}

// A decode-only step padded to `bucket` rows: replayed from its graph, or (no graph yet, or
// pad_eager_decode) run eagerly with the same shapes.
Status CudaModelRunner::run_padded(const model::ForwardBatch& fb, int bucket, std::vector<SamplingRow> rows,
                                   std::vector<int32_t>* tokens) {
  const auto t0 = std::chrono::steady_clock::now();
  backend_->set_sampling(std::move(rows));
  MLA_TRY(backend_->stage_padded_decode(fb, bucket));
  Status st;
  auto it = graphs_->by_bucket.find(bucket);
  const bool graph = it != graphs_->by_bucket.end();
  if (graph) {
    // The graph holds no host code: the pages the eager path commits in its last layer are committed here.
    backend_->commit_step();
    if (prof_) prof_->graph_launch_begin();
    st = cuda_status(cudaGraphLaunch(it->second.exec, reinterpret_cast<cudaStream_t>(backend_->stream())), kOp,
                     "cudaGraphLaunch");
    if (prof_) prof_->graph_launch_end();
    last_logits_ = it->second.logits;
    ++stats_.graph_steps;
  } else {
    model::ForwardBatch padded;
    padded.token_ids.assign(static_cast<size_t>(bucket), 0);
    padded.seqs = fb.seqs;
    for (int i = 0; i < bucket; ++i) padded.logits_rows.push_back(i);
    st = model_.forward(padded, &last_logits_);
    if (st.is_ok()) st = backend_->sample(last_logits_);
    ++stats_.eager_steps;
  }
  backend_->end_padded_step();
  MLA_TRY(st);
  st = backend_->read_samples(tokens);
  if (prof_ && graph && st.is_ok())
    prof_->end_graph_step(bucket, static_cast<int>(fb.seqs.size()),
                          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return st;
}

Status CudaModelRunner::run_profiled(const model::ForwardBatch& fb, std::vector<SamplingRow> rows,
                                     std::vector<int32_t>* tokens, const std::string& label, int decode_rows) {
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  if (rows.empty()) {
    // Prefill chunks only, none finishing its prompt (see forward_sample): lm_head on one row, no sampling.
    model::ForwardBatch one = fb;
    one.logits_rows = {static_cast<int32_t>(fb.num_tokens() - 1)};
    st = prof_model_->forward(one, &last_logits_);
    tokens->clear();
  } else {
    backend_->set_sampling(std::move(rows));
    st = prof_model_->forward(fb, &last_logits_);
    if (st.is_ok()) st = prof_->sample(last_logits_);
    if (st.is_ok()) st = backend_->read_samples(tokens);
  }
  ++stats_.eager_steps;
  prof_->end_step(label, fb.num_tokens(), decode_rows,
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return st;
}

Status CudaModelRunner::download_last_logits(std::vector<float>* out) const {
  if (!last_logits_.defined()) return Status::invalid(kOp, "no step has run");
  return backend_->download(last_logits_, out);
}

}  // namespace mla::runner

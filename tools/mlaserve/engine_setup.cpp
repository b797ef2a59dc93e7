#include "engine_setup.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>

#include "mla/core/kv_format.h"
#include "mla/runner/cpu_model_runner.h"

#if defined(MLA_WITH_CUDA)
#include <cuda_runtime_api.h>

#include "mla/model/config.h"
#include "mla/runner/cuda_model_runner.h"
#endif

namespace mla::cli {

void add_engine_options(CLI::App& app, EngineOptions* o) {
  app.add_option("--model", o->source.model, "dummy | dummy:PRESET | checkpoint directory")->capture_default_str();
  app.add_option("--load-format", o->source.load_format, "auto | safetensors | dummy")->capture_default_str();
  app.add_option("--device", o->device, "cuda | cpu")->capture_default_str();
  app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto | fp16 | fp8 | fp8_ds")->capture_default_str();
  app.add_option("--max-num-seqs", o->max_num_seqs,
                 "sequences per step at most (0: vLLM's default, 1024 on a >= 70 GiB GPU other than A100, else 256)")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", o->max_num_batched_tokens,
                 "tokens per step at most (0: vLLM's default, 16384 on a >= 70 GiB GPU other than A100, else 8192)")
      ->capture_default_str();
  app.add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "fraction of GPU memory to use")
      ->capture_default_str();
  app.add_option("--num-pages", o->num_pages, "KV pages (0: from memory on cuda, 4096 on cpu)")->capture_default_str();
  app.add_option("--seed", o->source.seed, "dummy weights and sampling seed")->capture_default_str();
  app.add_flag("--enforce-eager", o->enforce_eager, "cuda: run decode steps eagerly (no CUDA graphs)");
  app.add_option("--max-model-len", o->max_model_len,
                 "prompt + output tokens per request at most (0: the model's max_position_embeddings)")
      ->capture_default_str();
}

namespace {

// The model's positions bound a sequence; --max-model-len may lower that bound, never raise it.
Status max_model_len(const EngineOptions& o, const model::ModelConfig& c, int64_t* out) {
  if (o.max_model_len < 0 || o.max_model_len > c.max_position_embeddings)
    return Status::invalid("--max-model-len", "expected 0 or 1.." + std::to_string(c.max_position_embeddings) +
                                                  " (the model's max_position_embeddings), got " +
                                                  std::to_string(o.max_model_len));
  *out = o.max_model_len > 0 ? o.max_model_len : c.max_position_embeddings;
  return Status::ok();
}

engine::EngineConfig engine_config(const EngineOptions& o, const model::ModelConfig& c, int num_pages,
                                   int64_t model_len) {
  engine::EngineConfig ec;
  ec.scheduler.max_model_len = model_len;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.scheduler.page_size = kDecodePageSize;
  ec.scheduler.num_pages = num_pages;
  for (int64_t id : c.eos_token_ids) ec.scheduler.eos_token_ids.push_back(static_cast<int32_t>(id));
  ec.seed = o.source.seed;
  return ec;
}

void print_model(const model::ModelConfig& c, double load_s) {
  std::fprintf(stderr, "model: %s (%lld layers, hidden %lld, vocab %lld), weights ready in %.2f s\n", c.name.c_str(),
               (long long)c.num_hidden_layers, (long long)c.hidden_size, (long long)c.vocab_size, load_s);
}

// vLLM's batch defaults for its LLM class (EngineArgs' per-device defaults): large GPUs other than the A100
// (where larger batches measured slower) get 1024 sequences and 16384 tokens per step.
void resolve_batch_defaults(EngineOptions* o, size_t device_bytes, const std::string& device_name) {
  std::string lower = device_name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const bool large = device_bytes >= (size_t{70} << 30) && lower.find("a100") == std::string::npos;
  if (o->max_num_seqs <= 0) o->max_num_seqs = large ? 1024 : 256;
  if (o->max_num_batched_tokens <= 0) o->max_num_batched_tokens = large ? 16384 : 8192;
}

#if defined(MLA_WITH_CUDA)
// Provisional activation arena, for the start-up profiling steps only (the runner then re-allocates it at
// the measured peak): DeepseekV2 allocates per layer and frees nothing within a step, so this bounds it by
// layers x tokens x (q, latent, attention out, MLP temporaries, residual) with 50 % headroom.
size_t activation_bytes(const model::ModelConfig& c, int64_t tokens) {
  const int64_t h = c.num_attention_heads;
  const int64_t mlp =
      std::max(c.intermediate_size, c.moe_intermediate_size * (c.num_experts_per_tok + c.n_shared_experts));
  const int64_t per_layer = h * c.qk_head_dim() + c.latent_dim() + h * c.v_head_dim + 3 * mlp + 6 * c.hidden_size;
  return static_cast<size_t>(1.5 * double(tokens) * double(c.num_hidden_layers * per_layer) * 2.0) + (size_t{64} << 20);
}

Status build_cuda_engine(const EngineOptions& opts, KvFormat format, EngineHandle* out) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
    return Status::unsupported("engine", "no CUDA GPU visible; use --device cpu (e.g. with --model dummy:tiny)");
  if (format != KvFormat::kBf16 && format != KvFormat::kFp8 && format != KvFormat::kFp8Ds)
    return Status::unsupported(
        "engine", "--device cuda supports --kv-cache-dtype auto, fp8 and fp8_ds, not " + opts.kv_cache_dtype);
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
    return Status::cuda("engine", "cudaGetDeviceProperties failed");
  EngineOptions o = opts;
  resolve_batch_defaults(&o, prop.totalGlobalMem, prop.name);
  const auto t0 = std::chrono::steady_clock::now();
  model::ModelWeights w;
  MLA_TRY(load_model_weights(o.source, DType::kBf16, &w));
  const model::ModelConfig c = w.config;
  model::CudaBackendOptions bo;
  bo.kv_format = format;
  bo.max_batch_tokens = o.max_num_batched_tokens;
  bo.max_num_seqs = o.max_num_seqs;
  int64_t model_len = 0;
  MLA_TRY(max_model_len(o, c, &model_len));
  // MoE sorts every (token, expert) pair into expert-contiguous rows with their gate/up/down temporaries;
  // 8192 tokens of V2-Lite need ~0.5 GB (seen: "scratch arena too small" at the 512 MB default).
  const double moe_pairs = double(o.max_num_batched_tokens) * double(c.num_experts_per_tok + c.n_shared_experts);
  bo.scratch_bytes =
      std::max(bo.scratch_bytes,
               static_cast<size_t>(1.5 * moe_pairs * double(c.hidden_size + 3 * c.moe_intermediate_size) * 2.0) +
                   (size_t{64} << 20));
  // Memory: weights and the fixed buffers first, with a provisional activation arena and a KV pool just
  // large enough for the runner's two profiling steps; the runner then measures the arena's peak and asks
  // num_pages_for how many pages --gpu-memory-utilization leaves (cudaMemGetInfo, after freeing both).
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return Status::cuda("engine", "cudaMemGetInfo failed");
  const double weights_b = 2.0 * double(model::num_parameters(c));
  const double room =
      double(free_b) - weights_b - double(bo.scratch_bytes + bo.gemm_workspace_bytes) - double(size_t{2} << 30);
  // Without room for activations the first profiling step would fail deep inside a kernel launch with an
  // arena out-of-memory; say what does not fit instead.
  if (room < double(size_t{512} << 20)) {
    char msg[400];
    std::snprintf(
        msg, sizeof msg,
        "no room for activations and a KV cache: %.1f GB free on the GPU, weights %.1f GB (%s), scratch + GEMM "
        "workspace %.1f GB, 2 GB reserve; use a smaller model or --max-num-batched-tokens (now %d)",
        double(free_b) / 1e9, weights_b / 1e9, o.source.model.c_str(),
        double(bo.scratch_bytes + bo.gemm_workspace_bytes) / 1e9, o.max_num_batched_tokens);
    return Status::oom("engine", msg);
  }
  bo.activation_bytes = std::min(activation_bytes(c, o.max_num_batched_tokens), static_cast<size_t>(0.8 * room));
  bo.num_pages = (o.max_num_batched_tokens + kDecodePageSize - 1) / kDecodePageSize + o.max_num_seqs + 2;
  // Block tables (and the CUDA-graph steps' fixed table width) cover the longest sequence allowed.
  bo.max_pages_per_seq = (model_len + kDecodePageSize - 1) / kDecodePageSize;
  const double page_b = double(kDecodePageSize) * kv_bytes_per_token(format) * double(c.num_hidden_layers);
  double kv_budget = 0;  // bytes the pool may take, as measured when it is allocated
  runner::CudaRunnerOptions ro;
  ro.num_pages_for = [&](size_t arena_bytes) -> int64_t {
    size_t f = 0, t = 0;
    if (cudaMemGetInfo(&f, &t) != cudaSuccess) return 0;
    kv_budget = o.gpu_memory_utilization * double(t) - (double(t) - double(f)) - double(arena_bytes);
    if (o.num_pages > 0) return o.num_pages;
    return static_cast<int64_t>(kv_budget / page_b);
  };
  std::unique_ptr<runner::CudaModelRunner> r;
  ro.enforce_eager = o.enforce_eager;
  MLA_TRY(runner::CudaModelRunner::create(w, bo, &r, ro));
  bo.num_pages = r->num_pages();
  print_model(c, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const auto& gs = r->stats();
  if (!gs.captured.empty()) {
    // A capture stopped early by a small cache keeps the buckets it has: say both.
    std::fprintf(stderr, "CUDA graphs: decode steps of %zu batch sizes (up to %d sequences)%s%s%s\n",
                 gs.captured.size(), gs.captured.back(), gs.graphs_off.empty() ? "" : "; larger batches eager (",
                 gs.graphs_off.c_str(), gs.graphs_off.empty() ? "" : ")");
  } else {
    std::fprintf(stderr, "CUDA graphs: off (%s)\n",
                 gs.graphs_off.empty() ? "no bucket captured" : gs.graphs_off.c_str());
  }
  std::fprintf(
      stderr,
      "activation arena: %.2f GB = the profiled peaks of a decode step of %d sequences (%.2f GB) and a prefill "
      "of %d tokens (%.2f GB), +5 %% (the provisional arena was %.2f GB)\n",
      double(gs.activation_bytes) / 1e9, o.max_num_seqs, double(gs.decode_peak) / 1e9, o.max_num_batched_tokens,
      double(gs.prefill_peak) / 1e9, double(gs.provisional_activation_bytes) / 1e9);
  std::fprintf(stderr, "KV cache: %lld pages x %d tokens = %lld tokens (%s, %d B/token/layer, %.1f GB)\n",
               (long long)bo.num_pages, kDecodePageSize, (long long)bo.num_pages * kDecodePageSize,
               std::string(kv_format_name(format)).c_str(), kv_bytes_per_token(format),
               double(bo.num_pages) * page_b / 1e9);
  if (o.num_pages <= 0) {
    // The same budget in every format the backend runs, so runs of different formats compare at a glance.
    std::string line = "KV budget " + std::to_string(kv_budget / 1e9).substr(0, 5) + " GB (--gpu-memory-utilization " +
                       std::to_string(o.gpu_memory_utilization).substr(0, 4) + " after weights and arenas) holds:";
    for (KvFormat f : {KvFormat::kBf16, KvFormat::kFp8, KvFormat::kFp8Ds}) {
      const int64_t pages = static_cast<int64_t>(
          kv_budget / (double(kDecodePageSize) * kv_bytes_per_token(f) * double(c.num_hidden_layers)));
      line += " " + std::string(kv_format_name(f)) + " " + std::to_string(pages) + " pages (" +
              std::to_string(pages * kDecodePageSize) + " tokens);";
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  std::fprintf(stderr, "batching: --max-num-seqs %d --max-num-batched-tokens %d\n", o.max_num_seqs,
               o.max_num_batched_tokens);
  const engine::EngineConfig ec = engine_config(o, c, static_cast<int>(bo.num_pages), model_len);
  MLA_TRY(ec.scheduler.validate());
  out->vocab_size = c.vocab_size;
  MLA_TRY(engine::LLMEngine::create(ec, r.get(), &out->engine));
  const runner::CudaModelRunner* rp = r.get();
  out->runner_summary = [rp] {
    const auto& s = rp->stats();
    return "cuda runner: " + std::to_string(s.graph_steps) + " steps replayed from graphs, " +
           std::to_string(s.eager_steps) + " eager\n";
  };
  out->runner = std::move(r);
  return Status::ok();
}
#endif

}  // namespace

Status build_cpu_engine(const EngineOptions& opts, KvFormat format, EngineHandle* out);

Status build_engine(const EngineOptions& o, EngineHandle* out) {
  KvFormat format;
  MLA_TRY(parse_kv_format(o.kv_cache_dtype, &format));
  if (o.device == "cuda") {
#if defined(MLA_WITH_CUDA)
    return build_cuda_engine(o, format, out);
#else
    return Status::unsupported("engine", "built without CUDA (MLA_CUDA=OFF): use --device cpu");
#endif
  }
  if (o.device != "cpu") return Status::invalid("--device", "expected cuda or cpu, got '" + o.device + "'");
  return build_cpu_engine(o, format, out);
}

Status build_cpu_engine(const EngineOptions& opts, KvFormat format, EngineHandle* out) {
  EngineOptions o = opts;
  resolve_batch_defaults(&o, 0, "cpu");
  if (format != KvFormat::kBf16)
    return Status::unsupported("engine", "--device cpu keeps its KV cache in fp32; --kv-cache-dtype " +
                                             o.kv_cache_dtype + " needs --device cuda");
  const auto t0 = std::chrono::steady_clock::now();
  model::ModelWeights w;
  MLA_TRY(load_model_weights(o.source, DType::kFp32, &w));
  print_model(w.config, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  out->vocab_size = w.config.vocab_size;
  int64_t model_len = 0;
  MLA_TRY(max_model_len(o, w.config, &model_len));
  const engine::EngineConfig ec = engine_config(o, w.config, o.num_pages > 0 ? o.num_pages : 4096, model_len);
  MLA_TRY(ec.scheduler.validate());
  std::unique_ptr<runner::CpuModelRunner> r;
  MLA_TRY(runner::CpuModelRunner::create(std::move(w), ec.scheduler.num_pages, ec.scheduler.page_size, &r));
  std::fprintf(stderr, "KV cache: %d pages x %d tokens = %lld tokens (cpu, fp32 latents)\n", ec.scheduler.num_pages,
               ec.scheduler.page_size, (long long)ec.scheduler.num_pages * ec.scheduler.page_size);
  MLA_TRY(engine::LLMEngine::create(ec, r.get(), &out->engine));
  out->runner = std::move(r);
  return Status::ok();
}

}  // namespace mla::cli

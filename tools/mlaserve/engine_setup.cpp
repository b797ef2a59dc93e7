#include "engine_setup.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "mla/core/kv_format.h"
#include "mla/runner/cpu_model_runner.h"

namespace mla::cli {

void add_engine_options(CLI::App& app, EngineOptions* o) {
  app.add_option("--model", o->source.model, "dummy | dummy:PRESET | checkpoint directory")->capture_default_str();
  app.add_option("--load-format", o->source.load_format, "auto | safetensors | dummy")->capture_default_str();
  app.add_option("--device", o->device, "cuda | cpu")->capture_default_str();
  app.add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto | fp16 | fp8 | fp8_ds")->capture_default_str();
  app.add_option("--max-num-seqs", o->max_num_seqs, "sequences per step at most")->capture_default_str();
  app.add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "tokens per step at most")->capture_default_str();
  app.add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "fraction of GPU memory to use")
      ->capture_default_str();
  app.add_option("--num-pages", o->num_pages, "KV pages (0: from memory on cuda, 4096 on cpu)")->capture_default_str();
  app.add_option("--seed", o->source.seed, "dummy weights and sampling seed")->capture_default_str();
}

Status build_engine(const EngineOptions& o, EngineHandle* out) {
  KvFormat format;
  MLA_TRY(parse_kv_format(o.kv_cache_dtype, &format));
  if (o.device == "cuda") {
    return Status::unsupported("engine", "the CUDA model backend is not built yet (the model issue's CUDA path); "
                                           "use --device cpu with --model dummy:tiny to run the engine end to end");
  }
  if (o.device != "cpu") return Status::invalid("--device", "expected cuda or cpu, got '" + o.device + "'");
  if (format != KvFormat::kBf16)
    return Status::unsupported("engine", "--device cpu keeps its KV cache in fp32; --kv-cache-dtype " + o.kv_cache_dtype +
                                               " needs --device cuda");
  const auto t0 = std::chrono::steady_clock::now();
  model::ModelWeights w;
  MLA_TRY(load_model_weights(o.source, DType::kFp32, &w));
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out->vocab_size = w.config.vocab_size;
  const int32_t eos = w.config.eos_token_ids.empty() ? -1 : static_cast<int32_t>(w.config.eos_token_ids[0]);
  std::fprintf(stderr, "model: %s (%lld layers, hidden %lld, vocab %lld), loaded in %.2f s\n", w.config.name.c_str(),
               (long long)w.config.num_hidden_layers, (long long)w.config.hidden_size, (long long)w.config.vocab_size,
               load_s);

  engine::EngineConfig ec;
  ec.scheduler.max_num_seqs = o.max_num_seqs;
  ec.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.scheduler.page_size = kDecodePageSize;
  ec.scheduler.num_pages = o.num_pages > 0 ? o.num_pages : 4096;
  ec.scheduler.eos_token_id = eos;
  ec.seed = o.source.seed;
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

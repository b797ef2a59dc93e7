#pragma once
// Builds the model runner and the engine from command-line options (shared by generate and bench).
#include <functional>
#include <memory>
#include <string>

#include "mla/engine/llm_engine.h"
#include "mla/engine/model_backend.h"
#include "model_source.h"

namespace CLI { class App; }

namespace mla::cli {

struct EngineOptions {
  ModelSource source;
  std::string device = "cuda";           // cuda | cpu
  std::string kv_cache_dtype = "auto";   // auto | bf16 | fp16 | fp8 | fp8_e4m3 | fp8_ds
  // 0: vLLM's defaults for its offline LLM class (what `vllm bench throughput` runs with): 1024 sequences and
  // 16384 tokens per step on a GPU of >= 70 GiB that is not an A100 (H100, H200), else 256 and 8192.
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  double gpu_memory_utilization = 0.9;
  int num_pages = 0;                     // 0: sized from memory (cuda) or 4096 (cpu)
  bool enforce_eager = false;            // cuda: no CUDA graphs for decode steps
  int64_t max_model_len = 0;             // tokens per sequence at most; 0: the model's max_position_embeddings
};

// Registers the options every engine command shares (vLLM's flag names).
void add_engine_options(CLI::App& app, EngineOptions* o);

struct EngineHandle {
  std::unique_ptr<engine::ModelBackend> runner;
  std::unique_ptr<engine::LLMEngine> engine;
  int64_t vocab_size = 0;
  std::function<std::string()> runner_summary;  // one line on how steps ran (cuda: graph vs eager), or empty
};

// Loads the model (progress on stderr), sizes the cache, creates the engine. Prints one line about the
// cache ("KV cache: N pages x 64 tokens = T tokens (format)").
Status build_engine(const EngineOptions& o, EngineHandle* out);

}  // namespace mla::cli

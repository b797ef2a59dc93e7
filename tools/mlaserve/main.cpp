// mlaserve: the command-line entry point.
//   mlaserve bench throughput ...   offline throughput, counted like `vllm bench throughput`
//   mlaserve bench decode ...       the paged MLA decode kernel benchmark
//   mlaserve generate ...           generate from token-id prompts
//   mlaserve plan decode ...        the split-KV plan of one decode step (host, no GPU)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"mlaserve: DeepSeek-style MLA serving with an FP8 KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mlaserve 0.1.0");
  std::function<int()> run;
  mla::cli::add_generate(app, &run);
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  mla::cli::add_bench_throughput(*bench, &run);
  mla::cli::add_bench_decode(*bench, &run);
  CLI::App* plan = app.add_subcommand("plan", "how a step's work is cut for the kernels (host, no GPU)");
  plan->require_subcommand(1);
  mla::cli::add_plan_decode(*plan, &run);
  CLI11_PARSE(app, argc, argv);
  return run ? run() : 2;
}

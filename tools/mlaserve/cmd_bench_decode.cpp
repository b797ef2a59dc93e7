// mlaserve bench decode: the paged MLA decode benchmark (bench/decode), options passed through.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#if defined(MLA_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "commands.h"

int decode_bench_main(int argc, char** argv);  // bench/decode, linked in CUDA builds

namespace mla::cli {

namespace {
// One clear line and a non-zero exit when there is no GPU to run on (CPU-only machines, CI).
bool have_gpu() {
#if defined(MLA_WITH_CUDA)
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    std::fprintf(stderr, "mlaserve: no CUDA GPU visible (%s); the decode benchmark needs an sm_90 GPU (H100/H200)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return false;
  }
  return true;
#else
  std::fprintf(
      stderr,
      "mlaserve: built without CUDA (MLA_CUDA=OFF); the decode benchmark needs a CUDA build and an sm_90 GPU\n");
  return false;
#endif
}
}  // namespace

void add_bench_decode(CLI::App& bench, std::function<int()>* run) {
  CLI::App* app = bench.add_subcommand("decode", "paged MLA decode kernel benchmark (needs an sm_90 GPU)");
  app->allow_extras();
  app->callback([app, run] {
    *run = [args = app->remaining()]() -> int {
      if (!have_gpu()) return 2;
#if defined(MLA_WITH_CUDA)
      std::vector<std::string> a = {"mlaserve bench decode"};
      a.insert(a.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& s : a) argv.push_back(s.data());
      return decode_bench_main(static_cast<int>(argv.size()), argv.data());
#else
      return 2;
#endif
    };
  });
}

}  // namespace mla::cli

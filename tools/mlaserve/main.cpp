// mlaserve: the command-line entry point. Until the engine lands, the main job is the decode benchmark.
#include <cstdio>
#include <cstring>
#include <string>

#if defined(MLA_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: mlaserve <command> [options]\n"
               "  bench decode [bench_decode options]   paged MLA decode benchmark (needs an sm_90 GPU)\n"
               "  version                               print the version\n");
}

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
  std::fprintf(stderr, "mlaserve: built without CUDA (MLA_CUDA=OFF); the decode benchmark needs a CUDA build and an sm_90 GPU\n");
  return false;
#endif
}

}  // namespace

int decode_bench_main(int argc, char** argv);  // bench/decode, linked in CUDA builds

int main(int argc, char** argv) {
  if (argc < 2) { usage(); return 2; }
  const std::string cmd = argv[1];
  if (cmd == "version" || cmd == "--version") { std::printf("mlaserve 0.1.0\n"); return 0; }
  if (cmd == "bench" && argc >= 3 && std::strcmp(argv[2], "decode") == 0) {
    if (!have_gpu()) return 2;
#if defined(MLA_WITH_CUDA)
    return decode_bench_main(argc - 2, argv + 2);
#endif
  }
  usage();
  return 2;
}

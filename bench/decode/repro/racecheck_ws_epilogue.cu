// Minimal repro for compute-sanitizer racecheck on the warp-specialized decode kernel's shared-memory
// hand-offs (kernel_ws.cuh / epilogue.cuh), outside the kernel. Not part of the build (bench/CMakeLists
// globs bench/<dir>/*.cu only); build and run by hand:
//   nvcc -O2 -arch=sm_90a -lineinfo -o racecheck_ws_epilogue racecheck_ws_epilogue.cu
//   compute-sanitizer --tool racecheck ./racecheck_ws_epilogue MODE
// Every mode checks the values it reads (a real race would also show as mismatches on the GPU).
// Modes (two 128-thread "consumer" warpgroups, 64 rows, kSegs segments each):
//   0  epilogue.cuh exactly: a third warpgroup exits at the start (the producer's return), the consumers
//      write s_l[parity][wg][row], bar.sync 3, 256, read s_l[parity][wg ^ 1][row], parity = segment & 1.
//   1  as 0, but the third warpgroup stays and meets the others at a final __syncthreads.
//   2  positive control, a real WAR race: one buffer instead of two parities (a fast warpgroup may
//      overwrite its sums for segment e + 1 before the other read them for segment e).
//   3  as 0 with 256 threads only (no third warpgroup).
//   4  the P-ready hand-off (kernel_ws.cuh wait_other): the owner of segment e (warpgroup e % 2) writes
//      s_m[e & 1][row], bar.arrive 1 + (e & 1), 256; the other warpgroup bar.sync 1 + (e & 1), 256 and
//      reads it; the owner's next write to the same slot comes after it waited on the other's next arrive.
//   5  as 0, but the two warpgroups reach `bar.sync 3, 256` at two different instructions (the kernel
//      inlines the epilogue at three call sites, and racecheck's hazards pair a write before one of them
//      with a read after another: SASS offsets 0x8e20 -> 0xda70 / 0xf100 in run 6).
//   6  the kernel's order per segment: the P-ready hand-off of mode 4 (owner e % 2 writes s_m, bar.arrive;
//      the other bar.sync, reads s_m), then the s_l exchange of mode 0 by both warpgroups.
// H200 (NOTES.md runs 7-9, on the version with one loop per mode group; the modes' per-segment operations
// are unchanged since): hazards in modes 2 (a real race: wrong values read), 4 and 6 (no wrong value
// ever read); 0, 1, 3, 5 clean. Mode 6 flags the s_l exchange that mode 0 passes: the ws kernel's
// racecheck report at epilogue.cuh's s_l exchange is racecheck's handling of bar.arrive, not a race.
#include <cstdio>
#include <cstdlib>

constexpr int kSegs = 64;
constexpr int kRows = 64;

__device__ __forceinline__ void bar_sync(int id, int n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
}
// The same barrier (3, 256 threads) as another instruction: immediates instead of registers, so the
// compiler cannot merge it with bar_sync(3, 256) on the other path.
__device__ __forceinline__ void bar_sync_3_256_imm() { asm volatile("bar.sync 3, 256;" ::: "memory"); }

// Uneven progress between the warpgroups, so a missing barrier would show.
__device__ __forceinline__ void jitter(int seg, int wg) {
  const long long t0 = clock64();
  const int spin = ((seg * 7 + wg * 13 + blockIdx.x * 5) % 11) * 200;
  while (clock64() - t0 < spin) {
  }
}

__global__ void repro(int mode, int* bad) {
  __shared__ float s_l[2 * 2 * kRows];
  __shared__ float s_m[2 * kRows];
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int row = tid % kRows, half = tid / kRows;  // two threads per row, like t4 == 0 lanes of two warps
  __syncthreads();
  if (wg == 2) {
    if (mode == 1) __syncthreads();
    return;
  }
  int errors = 0;
  for (int e = 0; e < kSegs; ++e) {
    jitter(e, wg);
    // Modes 4 and 6: the P-ready hand-off. The owner of segment e (warpgroup e % 2) writes s_m, bar.arrive;
    // the other bar.sync and reads it.
    if (mode == 4 || mode == 6) {
      if ((e & 1) == wg) {
        if (half == 0) s_m[(e & 1) * kRows + row] = e * 1000.f + row;
        bar_arrive(1 + (e & 1), 256);
      } else {
        bar_sync(1 + (e & 1), 256);
        if (s_m[(e & 1) * kRows + row] != e * 1000.f + row) ++errors;
      }
    }
    if (mode == 4) continue;
    // Every other mode: the s_l exchange (mode 2 with one parity only; mode 5 reaches the barrier at a second
    // instruction in warpgroup 1).
    const int parity = mode == 2 ? 0 : (e & 1);
    if (half == 0) s_l[(parity * 2 + wg) * kRows + row] = e * 1000.f + wg * 100.f + row;
    if (mode == 5 && wg == 1) {
      bar_sync_3_256_imm();
    } else {
      bar_sync(3, 256);
    }
    if (s_l[(parity * 2 + (wg ^ 1)) * kRows + row] != e * 1000.f + (wg ^ 1) * 100.f + row) ++errors;
  }
  if (errors) atomicAdd(bad, errors);
  if (mode == 1) __syncthreads();
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 0;
  int* bad;
  cudaMalloc(&bad, sizeof(int));
  cudaMemset(bad, 0, sizeof(int));
  repro<<<8, mode == 3 ? 256 : 384>>>(mode, bad);
  int h = -1;
  const cudaError_t err = cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost);
  printf("mode %d: %s, %d mismatched reads\n", mode, cudaGetErrorString(err), h);
  return err == cudaSuccess ? 0 : 1;
}

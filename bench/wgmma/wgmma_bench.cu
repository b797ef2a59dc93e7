// bench_wgmma: how fast the tensor pipe runs the e4m3 wgmma shapes of the fp8 64-row decode kernel
// (src/ops/cuda/sm90/decode_fp8/kernel_ws.cuh), and how long a warpgroup is held in issuing them.
//
// Every CTA (one per SM, 132) runs two warpgroups; each repeats a "unit" of one shape, waiting for it before the
// next (the kernel's S waits for its group the same way):
//   n64 SS : S of one page, 18 x m64n64k32, both operands from shared memory;
//   n64 RS : the same with A (Q) from registers;
//   n256 SS: P.V of one page for one warpgroup, 2 x m64n256k32;
//   hog    : no wgmma, 16-byte shared loads and stores as fast as they issue (what the V^T transposers and the
//            softmax's P stores do to the shared-memory port beside the products);
//   softmax: no wgmma, one page's softmax for a warpgroup as the 64-row decode kernels run it (decode/mainloop_ws.cuh
//            softmax_page: 32 scores a thread, row max with two quad shuffles a row, 32 FFMA + ex2, row sums, 16
//            packed bf16x2 stores of P), and its parts alone: ffma (the FFMA / FMNMX / FADD work), mufu (the 32 ex2),
//            mio (the shuffles and the P stores). Session 79 saw the softmax take ~810 cycles beside a P.V against
//            ~540 with the tensor pipe idle (bench/decode/NOTES.md "Session 79" 4); these say which part slows;
//            shfl: mio's shuffles alone;
//   n64 SS in 1s / in 2s: n64 SS committed in groups of 1 / 2 wgmma, each group issued only once at most one earlier
//            group is pending (at most 2 / 4 queued): whether CUDA-core work beside S speeds up when S's wgmma do
//            not wait at issue (session 80: bench/wgmma/NOTES.md).
//   bf16 n64 SS: S of one page as the 16-bit 64-row kernel runs it (decode/mainloop_ws.cuh compute_scores_page):
//            36 x m64n64k16 over nine 128-byte-swizzled slabs, Q (A) and K (B) from shared memory;
//   bf16 n32 SS: half a page's keys with the same Q: 36 x m64n32k16, warpgroup w reading keys 32 w .. 32 w + 31.
//            Two warpgroups sharing a page this way read Q twice (3 KB of operands per 16-cycle step against n64's
//            4 KB per 32): whether wgmma's operand reads keep the pipe at its peak there (session 82).
//            The bf16 rows' MAC/clk/SM is against a peak of 2048, not 4096.
// Reported (median over the CTAs): SM cycles per unit, cycles warp 0 of the warpgroup spends *issuing* a unit (from
// before its first wgmma to after its commit), and e4m3 MACs per SM cycle (the SM's peak is 4096). Beside another
// mode, warpgroup 1 runs ~1.5x longer than warpgroup 0, so warpgroup 0 is measured beside it all the time, and only
// warpgroup 0 is reported (both orders are in the list); the hog's own rate (bytes per cycle over its whole run, part
// of it alone) is printed below its row. The operands are fixed e4m3 bytes (no NaN codes); results are kept live but
// not checked: a timing tool.
// Numbers and what they mean: bench/wgmma/NOTES.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ops/cuda/sm90/decode/mainloop_ws.cuh"  // softmax_page: the kernels' own softmax step
#include "ops/cuda/sm90/decode/ptx.h"
#include "ops/cuda/sm90/decode/tma.h"
#include "ops/cuda/sm90/decode/traits.h"
#include "ops/cuda/sm90/decode/wgmma.h"
#include "ops/cuda/sm90/decode_fp8/wgmma_e4m3.h"

namespace {

using namespace mla::sm90;

enum Mode : int {
  kIdle = 0, kN64SS = 1, kN64RS = 2, kN256SS = 3, kHog = 4,  // the products and the shared-memory hog
  kN64SSc1 = 5, kN64SSc2 = 6,  // n64 SS issued in groups of 1 / 2 wgmma, each group waited down to one behind
  kSoftmax = 7, kFfma = 8, kMufu = 9, kMio = 10, kShfl = 11,  // CUDA-core work only (run_softmax)
  kB64SS = 12, kB32SS = 13                                     // bf16 S: a page / half a page's keys (run_bf16_s)
};
const char* const kModeNames[] = {"idle",    "n64 SS", "n64 RS", "n256 SS", "smem hog", "n64 SS in 1s", "n64 SS in 2s",
                                  "softmax", "ffma",   "mufu",   "mio",     "shfl",    "bf16 n64 SS", "bf16 n32 SS"};
// e4m3 multiply-adds per unit (0: no wgmma).
constexpr double kS = 18.0 * 64 * 64 * 32;
const double kUnitMacs[] = {0, kS, kS, 2.0 * 64 * 256 * 32, 0, kS, kS, 0, 0, 0, 0, 0, 36.0 * 64 * 64 * 16,
                            36.0 * 64 * 32 * 16};
constexpr bool is_bf16_s(int mode) { return mode == kB64SS || mode == kB32SS; }
constexpr bool is_cuda_core(int mode) { return mode >= kSoftmax && mode <= kShfl; }
constexpr bool is_s(int mode) { return mode == kN64SS || mode == kN64RS || mode == kN64SSc1 || mode == kN64SSc2; }
// wgmma per commit group of an S mode issued in groups (0: one group, committed after the last step).
constexpr int s_group(int mode) { return mode == kN64SSc1 ? 1 : mode == kN64SSc2 ? 2 : 0; }
constexpr int kCtas = 132, kSmemBytes = 200 * 1024;

// Per warpgroup: [0] total cycles, [1] issue cycles, written by its thread 0.
struct Out {
  unsigned long long cycles, issue;
};

// Times `units` units of one product for this warpgroup: issue_unit(d) issues a unit's wgmma and commits them (the
// grouped modes commit per group inside it); each unit is waited for before the next, as the kernels' S is. Records
// the SM cycles of the whole run and the cycles spent in issue (from before the first wgmma to after the last commit).
template <int kAcc, class Issue>
__device__ void time_units(int units, Out* out, float* sink, Issue issue_unit) {
  float d[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) d[i] = 0.f;
  decode::named_sync(1 + static_cast<int>(threadIdx.x) / 128, 128);
  const unsigned long long t0 = clock64();
  unsigned long long issue = 0;
  for (int u = 0; u < units; ++u) {
    const unsigned long long ti = clock64();
    decode::fence_operands(d);
    decode::wgmma_fence();
    issue_unit(d);
    issue += clock64() - ti;  // for the grouped modes this includes their waits between groups
    decode::wgmma_wait_all();
    decode::fence_operands(d);
  }
  const unsigned long long t1 = clock64();
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc += d[i];
  if (acc == 12345.f) *sink = acc;  // keeps the products live
  if (threadIdx.x % 128 == 0) out[blockIdx.x * 2 + threadIdx.x / 128] = {t1 - t0, issue};
}

template <int kMode>
__device__ void run_units(uint32_t s_a, uint32_t s_b, int units, Out* out, float* sink) {
  constexpr int kAcc = kMode == kN256SS ? 128 : 32;
  const uint32_t a[4] = {0x38383838u, 0x30303030u, 0x38303830u, 0x30383038u};  // e4m3 1.0 / 0.5 bytes
  const uint64_t da = decode::make_smem_desc(s_a, 16, 1024), db = decode::make_smem_desc(s_b, 16, 1024);
  time_units<kAcc>(units, out, sink, [&](float(&d)[kAcc]) {
    if constexpr (is_s(kMode)) {
      // Grouped modes commit every kGroup steps; before issuing a group the warps wait until at most one earlier
      // group is pending, so at most 2 kGroup wgmma are queued (session 80: at 2 none waits at issue for room in the
      // pipe's queue; at 4 they still do).
      constexpr int kGroup = s_group(kMode);
#pragma unroll
      for (int s = 0; s < 18; ++s) {
        if constexpr (kGroup > 0) {
          if (s >= 2 * kGroup && s % kGroup == 0) decode::wgmma_wait_group<1>();
        }
        // The k32 steps walk a page's five 128-byte slabs as the decode kernel's S does (decode_fp8/config.h).
        const int off = decode_fp8::slab_step_desc(s);
        if constexpr (kMode == kN64RS) {
          decode_fp8::wgmma_m64n64k32_e4m3_rs(reinterpret_cast<float(&)[32]>(d), a, db + off);
        } else {
          decode_fp8::wgmma_m64n64k32_e4m3(reinterpret_cast<float(&)[32]>(d), da + off, db + off);
        }
        if constexpr (kGroup > 0) {
          if (s % kGroup == kGroup - 1) decode::wgmma_commit();
        }
      }
    } else {
#pragma unroll
      for (int s = 0; s < 2; ++s)
        decode_fp8::wgmma_m64n256k32_e4m3(reinterpret_cast<float(&)[128]>(d), da + 2 * s, db + 2 * s);
    }
    if constexpr (s_group(kMode) == 0) decode::wgmma_commit();  // the grouped modes committed per group
  });
}

// bf16 S units (kB64SS / kB32SS): Q's nine slabs at s_q (shared by both warpgroups, as the kernel's Q tile is), the
// page's nine slabs at s_k; n32 reads rows 32 wg .. 32 wg + 31 of each K slab (4 KB in, 1024-byte aligned). Walked as
// compute_scores_page does: four k16 steps of +32 bytes inside a slab's swizzled rows, then the next 8 KB slab.
template <int kMode>
__device__ void run_bf16_s(uint32_t s_q, uint32_t s_k, int units, Out* out, float* sink) {
  constexpr int kAcc = kMode == kB64SS ? 32 : 16;
  time_units<kAcc>(units, out, sink, [&](float(&d)[kAcc]) {
    uint64_t da = decode::make_smem_desc(s_q, 16, 1024), db = decode::make_smem_desc(s_k, 16, 1024);
#pragma unroll
    for (int slab = 0; slab < decode::kSlabsPerPage; ++slab) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if constexpr (kMode == kB64SS) {
          decode::wgmma_m64n64k16_bf16(reinterpret_cast<float(&)[32]>(d), da + 2 * k, db + 2 * k);
        } else {
          decode::wgmma_m64n32k16_bf16(reinterpret_cast<float(&)[16]>(d), da + 2 * k, db + 2 * k);
        }
      }
      da += decode::kSlabBytes >> 4;
      db += decode::kSlabBytes >> 4;
    }
    decode::wgmma_commit();
  });
}

// 128 threads copy 16 KB within shared memory with 16-byte loads and stores, `units` times.
__device__ void run_hog(uint32_t src, uint32_t dst, int units, Out* out) {
  const int t = threadIdx.x % 128;
  const unsigned long long t0 = clock64();
  for (int u = 0; u < units; ++u) {
#pragma unroll 4
    for (int i = 0; i < 8; ++i) {
      uint32_t v0, v1, v2, v3;
      asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v0), "=r"(v1), "=r"(v2), "=r"(v3)
                   : "r"(src + 16 * (t + 128 * i)));
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst + 16 * (t + 128 * i)), "r"(v0), "r"(v1),
                   "r"(v2), "r"(v3)
                   : "memory");
    }
  }
  if (t == 0) out[blockIdx.x * 2 + threadIdx.x / 128] = {clock64() - t0, 0};
}
constexpr double kHogBytesPerUnit = 2.0 * 8 * 128 * 16;  // 16 KB loaded and 16 KB stored

// 128 threads, `units` softmaxes of one page (kMode kSoftmax: the row max tree and quad shuffles, then the kernels'
// own softmax_page<Bf16Traits>) or one part of it (kFfma / kMufu / kMio, written out here to isolate it). Each unit's
// scores depend on the previous unit's P (through its row sums for kSoftmax, whose P leaves packed), so the units
// form one dependent chain, as pages do; P goes to [s_p, s_p + 8 KB), 16 words a thread, consecutive threads on
// consecutive words (conflict-free, as the kernels' swizzled P stores are). mufu takes ex2 of minus the value, so its
// chain stays finite.
template <int kMode>
__device__ void run_softmax(uint32_t s_p, int units, Out* out, float* sink) {
  const int t = threadIdx.x % 128;
  float v[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) v[i] = 0.01f * static_cast<float>((t * 7 + i * 13) & 63);
  constexpr float kScaleLog2 = 0.0625f * 1.4426950408889634f;
  float sum_all = 0.f;
  const unsigned long long t0 = clock64();
  for (int u = 0; u < units; ++u) {
    float m[2] = {v[0], v[16]};
    if constexpr (kMode == kSoftmax || kMode == kFfma) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 1; i < 16; ++i) m[h] = fmaxf(m[h], v[16 * h + i]);
    }
    if constexpr (kMode == kSoftmax || kMode == kMio || kMode == kShfl) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 1));
        m[h] = fmaxf(m[h], __shfl_xor_sync(0xffffffffu, m[h], 2));
      }
    }
    float sum = 0.f;
    if constexpr (kMode == kSoftmax) {
      // softmax_page's fragment order: row h's keys 8 t + 2 t4 (+1) at sc[t][2 h] (+1).
      float sc[8][4], m_new[2], rowsum[2];
      uint32_t pw[2][8];
#pragma unroll
      for (int i = 0; i < 32; ++i) sc[(i % 16) / 2][2 * (i / 16) + i % 2] = v[i];
      decode::softmax_page<decode::Bf16Traits>(sc, m, /*first=*/true, m, kScaleLog2, m_new, rowsum, pw);
#pragma unroll
      for (int i = 0; i < 16; ++i)
        asm volatile("st.shared.b32 [%0], %1;" ::"r"(s_p + 4 * (t + 128 * i)), "r"(pw[i / 8][i % 8]) : "memory");
      sum = rowsum[0] + rowsum[1];
#pragma unroll
      for (int i = 0; i < 32; ++i) v[i] = fmaf(v[i], 0.5f, 0.01f * rowsum[i / 16]);  // bounded, and P's successor
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        float x = v[i];
        if constexpr (kMode == kFfma) x = fmaf(x, kScaleLog2, -m[i / 16] * kScaleLog2);
        if constexpr (kMode == kMufu) x = decode::ex2_ftz(-x);
        if constexpr (kMode == kFfma) sum += x;
        v[i] = x;
      }
      if constexpr (kMode == kShfl) sum = m[0] + m[1];  // mio without its stores
      if constexpr (kMode == kMio) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const uint32_t w = __float_as_uint(v[2 * i] + m[i & 1]);
          asm volatile("st.shared.b32 [%0], %1;" ::"r"(s_p + 4 * (t + 128 * i)), "r"(w) : "memory");
        }
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) v[i] += 0.03125f;  // the next unit's scores depend on this unit's values
    }
    sum_all += sum;
  }
  const unsigned long long t1 = clock64();
  float acc = sum_all;
#pragma unroll
  for (int i = 0; i < 32; ++i) acc += v[i];
  if (acc == 12345.f) *sink = acc;  // keeps the work live
  if (t == 0) out[blockIdx.x * 2 + threadIdx.x / 128] = {t1 - t0, 0};
}

template <int kMode>
__device__ void run_mode(uint32_t base, int wg, int units, Out* out, float* sink) {
  // Operands: A at 8 KB * wg (S walks five 8 KB slabs: [8 KB * wg, +40 KB); P.V reads 8 KB), B at 64 KB + 32 KB * wg
  // (S: +40 KB, P.V: +32 KB), all inside [0, 136 KB) and only read, so the warpgroups' regions may overlap; the hog
  // copies [180 KB, 196 KB) onto [148 KB, 164 KB), clear of them.
  // The softmax modes store P into [136 KB, 144 KB), clear of both.
  if constexpr (is_bf16_s(kMode)) {
    // bf16 S: Q [0, 72 KB), the page [72 KB, 144 KB) (+8 KB for warpgroup 1's n64, a different page's slabs); only
    // read, and no case pairs these modes with the hog's or the softmax's stores.
    constexpr int kPage = decode::kSlabsPerPage * decode::kSlabBytes;
    constexpr int kWgOffset = kMode == kB64SS ? decode::kSlabBytes : 32 * 128;  // a slab / 32 of its 128-byte rows
    run_bf16_s<kMode>(base, base + kPage + kWgOffset * wg, units, out, sink);
  } else if constexpr (kMode == kHog) {
    run_hog(base + 180 * 1024, base + 148 * 1024, units, out);
  } else if constexpr (is_cuda_core(kMode)) {
    run_softmax<kMode>(base + 136 * 1024, units, out, sink);
  } else if constexpr (kMode != kIdle) {
    run_units<kMode>(base + 8192 * wg, base + 65536 + 32768 * wg, units, out, sink);
  } else if (threadIdx.x % 128 == 0) {
    out[blockIdx.x * 2 + wg] = {0, 0};
  }
}

template <int kMode0, int kMode1>
__global__ void __launch_bounds__(256, 1) wgmma_rate_kernel(int units0, int units1, Out* out, float* sink) {
  extern __shared__ __align__(1024) uint8_t smem[];
  for (int i = threadIdx.x; i < kSmemBytes / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = (0x30303030u + 0x01020304u * (i & 7)) & 0x3F3F3F3Fu;  // finite e4m3
  __syncthreads();
  decode::fence_proxy_async();  // generic stores, read by wgmma
  __syncthreads();
  const uint32_t base = decode::smem_u32(smem);
  // Warp-uniform, so ptxas sees each warpgroup's wgmma on a convergent path.
  const int wg = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (wg == 0) {
    run_mode<kMode0>(base, 0, units0, out, sink);
  } else {
    run_mode<kMode1>(base, 1, units1, out, sink);
  }
}

struct Case {
  int mode0, mode1;
};

// Units per warpgroup: n256 units are ~2.25x shorter than n64 ones (2 x 128 vs 18 x 32 cycles at the peak) and a
// hog unit ~2.5x shorter still. Beside a different mode warpgroup 1 gets ~1.5x warpgroup 0's time in units, so
// warpgroup 0's whole run is beside it.
int units_for(int mode, int other, int wg) {
  // A CUDA-core unit (~300-600 cycles) in warpgroup 0: the products beside it run at least twice as long.
  if (is_cuda_core(other) && wg == 1) return mode == kN256SS ? 6144 : 2048;
  if (is_cuda_core(mode)) return 1024;
  if (wg == 1 && other != kIdle && other != mode) {
    if (mode == kN256SS) return is_s(other) ? 2048 : 4608;
    if (mode == kHog) return other == kN256SS ? 2048 : 3000;
    return other == kN256SS ? 768 : 512;
  }
  if (mode == kN256SS) return other == kIdle || other == kN256SS ? 4608 : 1280;
  return 512;
}

template <int M0, int M1>
cudaError_t launch(int u0, int u1, Out* out, float* sink) {
  cudaError_t e = cudaFuncSetAttribute(wgmma_rate_kernel<M0, M1>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       kSmemBytes);
  if (e != cudaSuccess) return e;
  wgmma_rate_kernel<M0, M1><<<kCtas, 256, kSmemBytes>>>(u0, u1, out, sink);
  return cudaGetLastError();
}

// The pairs run, in order: one list for both the run order and the kernel instantiations.
#define MLA_WGMMA_CASES(X)                                                                                   \
  X(kN64SS, kIdle) X(kN64RS, kIdle) X(kN256SS, kIdle) X(kN64SS, kN64SS) X(kN64RS, kN64RS) X(kN256SS, kN256SS) \
  X(kN64SS, kN256SS) X(kN64RS, kN256SS) X(kN256SS, kN64SS) X(kN64SS, kHog) X(kN64RS, kHog) X(kN256SS, kHog)    \
  X(kSoftmax, kIdle) X(kSoftmax, kN256SS) X(kSoftmax, kN64SS) X(kFfma, kIdle) X(kFfma, kN256SS)               \
  X(kFfma, kN64SS) X(kMufu, kIdle) X(kMufu, kN256SS) X(kMufu, kN64SS) X(kMio, kIdle) X(kMio, kN256SS)         \
  X(kMio, kN64SS) X(kN64SSc1, kIdle) X(kN64SSc2, kIdle) X(kN64SSc2, kN64SSc2) X(kN64SSc2, kN256SS)                \
  X(kN256SS, kN64SSc2) X(kSoftmax, kN64SSc1) X(kSoftmax, kN64SSc2) X(kMio, kN64SSc1) X(kMio, kN64SSc2)        \
  X(kShfl, kIdle) X(kShfl, kN256SS) X(kShfl, kN64SS) X(kShfl, kN64SSc2) X(kB64SS, kIdle) X(kB32SS, kIdle)    \
  X(kB64SS, kB64SS) X(kB32SS, kB32SS)

cudaError_t launch_case(const Case& c, int u0, int u1, Out* out, float* sink) {
#define MLA_WGMMA_LAUNCH(a, b) \
  if (c.mode0 == a && c.mode1 == b) return launch<a, b>(u0, u1, out, sink);
  MLA_WGMMA_CASES(MLA_WGMMA_LAUNCH)
#undef MLA_WGMMA_LAUNCH
  return cudaErrorInvalidValue;
}

// Median over the CTAs of one warpgroup's field (total or issue cycles).
unsigned long long median_over_ctas(const std::vector<Out>& h, int wg, unsigned long long Out::*field) {
  std::vector<unsigned long long> v;
  for (int b = 0; b < kCtas; ++b) v.push_back(h[b * 2 + wg].*field);
  std::sort(v.begin(), v.end());
  return v[kCtas / 2];
}

}  // namespace

int wgmma_bench_main(int argc, char** argv) {
  if (argc > 1) {
    std::fprintf(stderr, "bench wgmma: takes no arguments (got '%s'); see bench/wgmma/NOTES.md\n", argv[1]);
    return 2;
  }
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess || prop.major != 9) {
    std::fprintf(stderr, "bench wgmma: needs an sm_90 GPU\n");
    return 1;
  }
  Out* out = nullptr;
  float* sink = nullptr;
  if (cudaMalloc(&out, sizeof(Out) * kCtas * 2) != cudaSuccess || cudaMalloc(&sink, sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "bench wgmma: cudaMalloc failed\n");
    return 1;
  }
#define MLA_WGMMA_CASE_INIT(a, b) Case{a, b},
  const Case cases[] = {MLA_WGMMA_CASES(MLA_WGMMA_CASE_INIT)};
#undef MLA_WGMMA_CASE_INIT
  std::printf("# bench_wgmma, %s, %d CTAs x 2 warpgroups; median over CTAs; SM cycles\n", prop.name, kCtas);
  std::printf("| warpgroup 0 | warpgroup 1 | measured | cycles per unit | issue cycles per unit | MAC/clk/SM |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    const int u0 = units_for(c.mode0, c.mode1, 0), u1 = units_for(c.mode1, c.mode0, 1);
    for (int rep = 0; rep < 2; ++rep) {  // the first launch warms the clocks and the instruction cache
      cudaError_t e = launch_case(c, u0, u1, out, sink);
      if (e == cudaSuccess) e = cudaDeviceSynchronize();
      if (e != cudaSuccess) {
        std::fprintf(stderr, "bench wgmma: %s | %s: %s\n", kModeNames[c.mode0], kModeNames[c.mode1],
                     cudaGetErrorString(e));
        return 1;
      }
    }
    std::vector<Out> h(kCtas * 2);
    if (cudaMemcpy(h.data(), out, sizeof(Out) * h.size(), cudaMemcpyDeviceToHost) != cudaSuccess) {
      std::fprintf(stderr, "bench wgmma: copying the cycle counts back failed\n");
      return 1;
    }
    for (int wg = 0; wg < 2; ++wg) {
      const int mode = wg == 0 ? c.mode0 : c.mode1;
      if (wg == 1 && mode == kHog) {
        std::printf("|   | (the hog: %.1f bytes per cycle over its run) | | | | |\n",
                    kHogBytesPerUnit * u1 / double(median_over_ctas(h, 1, &Out::cycles)));
      }
      // Beside a different mode only warpgroup 0 ran beside the other for its whole time.
      if (mode == kIdle || mode == kHog || (wg == 1 && c.mode0 != c.mode1)) continue;
      const int units = wg == 0 ? u0 : u1;
      const double per = median_over_ctas(h, wg, &Out::cycles) / double(units);
      if (is_cuda_core(mode)) {  // no wgmma: no issue cycles, no MACs
        std::printf("| %s | %s | warpgroup %d | %.1f | - | - |\n", kModeNames[c.mode0], kModeNames[c.mode1], wg, per);
        continue;
      }
      std::printf("| %s | %s | warpgroup %d | %.1f | %.1f | %.0f |\n", kModeNames[c.mode0], kModeNames[c.mode1], wg,
                  per, median_over_ctas(h, wg, &Out::issue) / double(units), kUnitMacs[mode] / per);
    }
  }
  cudaFree(out);
  cudaFree(sink);
  return 0;
}

// sample_tokens: one CTA per logits row (the rule is in sampling.h).
//   pass 1: NaN/+inf check, max and argmax (lowest id on ties); greedy rows stop here.
//   top-k:  radix select (4 passes, 8 bits each) of the k-th largest order key, counting elements;
//           when the cut lands inside a run of equal logits, a second select over ids keeps the lowest.
//   top-p:  the same radix select over the top-k candidates, adding fixed-point mass instead of counts.
//   last:   Gumbel-max over the candidates that survived both cuts.
// A candidate set is a threshold (key_cut, id_cut): element i stays iff key_i > key_cut, or key_i == key_cut
// and i <= id_cut. Every pass streams the row from global memory (L2 after the first), coalesced.
#include <climits>

#include "mla/core/cuda_check.h"
#include "mla/ops/sampling.h"

namespace mla::cuda {
namespace {

constexpr const char* kOp = "sample_tokens";
constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;

struct SampleKernelParams {
  const float* logits;      // [rows, ld]
  const SamplingRow* rows;  // [rows]
  int32_t* tokens;          // [rows]
  int64_t ld;
  int32_t vocab;
};

struct Shared {
  unsigned long long hist[256];
  float red_v[kWarps];
  int red_i[kWarps];
  unsigned long long red_u[kWarps];
  // Result of one select level (written by warp 0).
  uint32_t bin;
  unsigned long long rem, bin_weight;
};

// (v, i) reduction over the CTA: larger v wins, ties to the smaller i. Every thread gets the result.
__device__ void block_argmax(Shared& sh, float& v, int& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, v, o);
    const int oi = __shfl_xor_sync(kFull, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
  const int w = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) sh.red_v[w] = v, sh.red_i[w] = i;
  __syncthreads();
  v = sh.red_v[0], i = sh.red_i[0];
  for (int k = 1; k < kWarps; ++k)
    if (sh.red_v[k] > v || (sh.red_v[k] == v && sh.red_i[k] < i)) v = sh.red_v[k], i = sh.red_i[k];
  __syncthreads();
}

__device__ unsigned long long block_sum(Shared& sh, unsigned long long x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFull, x, o);
  if (threadIdx.x % 32 == 0) sh.red_u[threadIdx.x / 32] = x;
  __syncthreads();
  unsigned long long s = 0;
  for (int k = 0; k < kWarps; ++k) s += sh.red_u[k];
  __syncthreads();
  return s;
}

// Radix select, descending: among elements with pred(i), the key K (32 bits) such that
// weight(key > K) < target <= weight(key >= K). Returns K; *rem = target − weight(key > K) (>= 1) and
// *eq_weight = weight(key == K). target must be in [1, total weight].
template <class KeyFn, class PredFn, class WeightFn>
__device__ uint32_t radix_select(Shared& sh, int32_t vocab, unsigned long long target, KeyFn key_of, PredFn pred,
                                 WeightFn weight_of, unsigned long long* rem, unsigned long long* eq_weight) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long need = target;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kThreads) sh.hist[b] = 0;
    __syncthreads();
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      if (!pred(i)) continue;
      const uint32_t k = key_of(i);
      if ((k & mask) != prefix) continue;
      const unsigned long long w = weight_of(i);
      if (w) atomicAdd(&sh.hist[(k >> shift) & 255u], w);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds bins 255 − 8l − j (j = 0..7): descending order across the warp.
      const int lane = threadIdx.x;
      unsigned long long h[8], s = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) h[j] = sh.hist[255 - 8 * lane - j], s += h[j];
      unsigned long long incl = s;
      for (int o = 1; o < 32; o <<= 1) {
        const unsigned long long t = __shfl_up_sync(kFull, incl, o);
        if (lane >= o) incl += t;
      }
      const unsigned long long excl = incl - s;
      if (excl < need && need <= incl) {
        unsigned long long c = excl;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (c + h[j] >= need) {
            sh.bin = uint32_t(255 - 8 * lane - j), sh.rem = need - c, sh.bin_weight = h[j];
            break;
          }
          c += h[j];
        }
      }
    }
    __syncthreads();
    prefix |= sh.bin << shift;
    mask |= 255u << shift;
    need = sh.rem;
    *eq_weight = sh.bin_weight;
    __syncthreads();  // sh.bin / hist are rewritten by the next level
  }
  *rem = need;
  return prefix;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const __grid_constant__ SampleKernelParams p) {
  __shared__ Shared sh;
  const float* x = p.logits + int64_t(blockIdx.x) * p.ld;
  const SamplingRow r = p.rows[blockIdx.x];
  const int32_t V = p.vocab;

  float mx = -INFINITY;
  int arg = INT_MAX;
  bool bad = false;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) {
    const float v = x[i];
    bad |= isnan(v) || v == INFINITY;
    if (v > mx) mx = v, arg = i;  // i grows within a thread: strict > keeps its lowest id
  }
  bad = __syncthreads_or(bad);
  block_argmax(sh, mx, arg);
  if (bad || arg == INT_MAX || sampling::is_greedy(r)) {
    if (threadIdx.x == 0) p.tokens[blockIdx.x] = bad ? kSampleBadLogit : (arg == INT_MAX ? kSampleAllNegInf : arg);
    return;
  }

  const float inv_t = 1.0f / r.temperature;
  auto key_of = [x](int32_t i) { return sampling::order_key(x[i]); };
  auto ones = [](int32_t) { return 1ull; };
  uint32_t key_cut = 0;  // below every real key: all kept
  int32_t id_cut = V;
  unsigned long long rem = 0, eq = 0;

  if (r.top_k > 0 && r.top_k < V) {
    auto all = [](int32_t) { return true; };
    key_cut = radix_select(sh, V, (unsigned long long)r.top_k, key_of, all, ones, &rem, &eq);
    if (rem < eq) {  // ties at the cut: keep the `rem` lowest ids of the equal run (largest ~id first)
      const uint32_t kc = key_cut;
      auto equal = [kc, key_of](int32_t i) { return key_of(i) == kc; };
      auto inv_id = [](int32_t i) { return ~uint32_t(i); };
      unsigned long long r2, e2;
      id_cut = int32_t(~radix_select(sh, V, rem, inv_id, equal, ones, &r2, &e2));
    }
  }
  if (r.top_p < 1.0f) {
    const uint32_t kc = key_cut;
    const int32_t ic = id_cut;
    auto kept = [kc, ic, key_of](int32_t i) {
      const uint32_t k = key_of(i);
      return k > kc || (k == kc && i <= ic);
    };
    const float m = mx;
    auto mass = [x, m, inv_t](int32_t i) { return (unsigned long long)sampling::mass(x[i], m, inv_t); };
    unsigned long long total = 0;
    for (int32_t i = threadIdx.x; i < V; i += kThreads)
      if (kept(i)) total += mass(i);
    total = block_sum(sh, total);
    const unsigned long long target = sampling::top_p_target(r.top_p, total);
    const uint32_t kp = radix_select(sh, V, target, key_of, kept, mass, &rem, &eq);
    // Equal logits carry equal mass w: the cut keeps the m = ceil(rem / w) lowest ids of the run.
    int32_t idp = V;
    auto is_run = [kp, kept, key_of](int32_t i) { return key_of(i) == kp && kept(i); };
    unsigned long long cnt = 0;
    for (int32_t i = threadIdx.x; i < V; i += kThreads)
      if (is_run(i)) ++cnt;
    cnt = block_sum(sh, cnt);
    const unsigned long long w = eq / cnt;  // exact: eq = cnt · w
    const unsigned long long need = (rem + w - 1) / w;
    if (need < cnt) {
      auto inv_id = [](int32_t i) { return ~uint32_t(i); };
      unsigned long long r2, e2;
      idp = int32_t(~radix_select(sh, V, need, inv_id, is_run, ones, &r2, &e2));
    } else if (kp == kc) {
      idp = ic;  // the whole run stays, within top-k's cut (the runs coincide)
    }
    key_cut = kp, id_cut = idp;
  }

  const uint64_t key = sampling::row_key(r.seed, r.draw_index);
  float best = -INFINITY;
  int tok = INT_MAX;
  for (int32_t i = threadIdx.x; i < V; i += kThreads) {
    const float v = x[i];
    const uint32_t k = sampling::order_key(v);
    if (!(k > key_cut || (k == key_cut && i <= id_cut))) continue;
    const float s = sampling::perturbed(v, mx, inv_t, sampling::gumbel(key, i));
    if (s > best || tok == INT_MAX) best = s, tok = i;
  }
  block_argmax(sh, best, tok);
  if (threadIdx.x == 0) p.tokens[blockIdx.x] = tok;
}

}  // namespace

Status sample_tokens(const SampleParams& p, Stream stream) {
  MLA_TRY(validate_sample(p));
  const SampleKernelParams kp{.logits = p.logits.ptr<const float>(),
                              .rows = p.rows,
                              .tokens = p.tokens.ptr<int32_t>(),
                              .ld = p.logits.stride[0],
                              .vocab = int32_t(p.logits.shape[1])};
  sample_kernel<<<unsigned(p.logits.shape[0]), kThreads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(kp);
  MLA_CUDA_TRY_LAUNCH(kOp);
  return Status::ok();
}

}  // namespace mla::cuda
